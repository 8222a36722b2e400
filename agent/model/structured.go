package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// DefaultSchemaAttempts is the number of model calls ChatStructured makes
// for a reply that validates when ResponseFormat.Attempts is 0.
const DefaultSchemaAttempts = 3

// SchemaFor returns a response format asking for a JSON value of type T,
// named name: its JSON Schema is inferred from T by
// github.com/google/jsonschema-go (exported fields by their json names,
// `jsonschema:"..."` tags as descriptions, fields without omitempty
// required, no additional properties). Attempts is left 0 (meaning
// DefaultSchemaAttempts); Strict is left false (set it for OpenAI's strict
// mode, which wants every property required).
func SchemaFor[T any](name string) (*ResponseFormat, error) {
	if name == "" {
		return nil, fmt.Errorf("model: a response format needs a name (letters, digits, '_' and '-')")
	}
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("model: response format %q: cannot infer the JSON Schema of %v: %w", name, reflect.TypeFor[T](), err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("model: response format %q: %w", name, err)
	}
	rf := &ResponseFormat{Name: name, Schema: raw}
	if _, err := resolved(rf.Schema); err != nil {
		return nil, fmt.Errorf("model: response format %q: %w", name, err)
	}
	return rf, nil
}

// MustSchemaFor is SchemaFor that panics on error, for package-level
// variables.
func MustSchemaFor[T any](name string) *ResponseFormat {
	rf, err := SchemaFor[T](name)
	if err != nil {
		panic(err)
	}
	return rf
}

// Validate reports whether content, a model's reply, is a JSON value
// conforming to the format's schema; the error says what is wrong in
// words a model can act on.
func (rf *ResponseFormat) Validate(content string) error {
	rs, err := resolved(rf.Schema)
	if err != nil {
		return fmt.Errorf("model: response format %q: %w", rf.Name, err)
	}
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return fmt.Errorf("the reply is not a JSON value: %v", err)
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("the reply does not conform to the schema %q: %v", rf.Name, err)
	}
	return nil
}

// schemaCache holds resolved schemas by their text, so that a schema is
// resolved once however often it is asked for; bounded by clearing it
// when full (schemas are few: one per response format in the code).
var schemaCache struct {
	sync.Mutex
	m map[string]*jsonschema.Resolved
}

const schemaCacheMax = 256

func resolved(schema json.RawMessage) (*jsonschema.Resolved, error) {
	key := string(schema)
	schemaCache.Lock()
	rs, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return rs, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("schema is not a JSON Schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("schema does not resolve: %w", err)
	}
	schemaCache.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= schemaCacheMax {
		schemaCache.m = map[string]*jsonschema.Resolved{}
	}
	schemaCache.m[key] = rs
	schemaCache.Unlock()
	return rs, nil
}

// SchemaError is the error of ChatStructured when no reply conformed to
// the response format within its attempts.
type SchemaError struct {
	// Format names the response format.
	Format string
	// Attempts is the number of model calls made.
	Attempts int
	// Err is the last reply's validation error; Content the last reply.
	Err     error
	Content string
}

// Error says how many attempts failed and why the last one did.
func (e *SchemaError) Error() string {
	c := e.Content
	if len(c) > 120 {
		c = c[:120] + "..."
	}
	return fmt.Sprintf("model: no reply conforming to response format %q in %d attempts (raise ResponseFormat.Attempts, or simplify the schema); last: %v; content %q",
		e.Format, e.Attempts, e.Err, c)
}

// Unwrap returns the last validation error.
func (e *SchemaError) Unwrap() error { return e.Err }

// ChatStructured calls m with req and, when req asks for structured output
// (ResponseFormat), validates the reply against the schema: a reply that
// does not conform is answered, in the conversation, with a user message
// quoting the validation error, and m is called again, up to
// ResponseFormat.Attempts calls in all (0 means DefaultSchemaAttempts).
// A reply with tool calls is returned as is (the answer comes later);
// the calls after a rejected answer offer no tools (ToolChoice "none"). The
// result is the first conforming reply with the usage of every call
// summed; a *SchemaError when none conformed; m's error when a call
// failed. The caller's req is not modified.
//
// When ctx carries an idempotency key, the first call sends it and each
// further call a key derived from it and the attempt number: every
// attempt is a different request.
func ChatStructured(ctx context.Context, m ChatModel, req Request) (*Response, error) {
	rf := req.ResponseFormat
	if rf == nil {
		return m.Chat(ctx, req)
	}
	if _, err := resolved(rf.Schema); err != nil {
		return nil, &PermanentError{fmt.Errorf("model: response format %q: %w", rf.Name, err)}
	}
	attempts := rf.Attempts
	if attempts <= 0 {
		attempts = DefaultSchemaAttempts
	}
	key, hasKey := IdempotencyKey(ctx)
	var total Usage
	for attempt := 1; ; attempt++ {
		actx := ctx
		if hasKey && attempt > 1 {
			actx = WithIdempotencyKey(ctx, attemptKey(key, attempt))
		}
		resp, err := m.Chat(actx, req)
		if err != nil {
			return nil, err
		}
		total.PromptTokens += resp.Usage.PromptTokens
		total.CompletionTokens += resp.Usage.CompletionTokens
		if len(resp.Message.ToolCalls) > 0 {
			resp.Usage = total
			return resp, nil
		}
		verr := rf.Validate(resp.Message.Content)
		if verr == nil {
			resp.Usage = total
			return resp, nil
		}
		if attempt >= attempts {
			return nil, &SchemaError{Format: rf.Name, Attempts: attempt, Err: verr, Content: resp.Message.Content}
		}
		msgs := make([]Message, 0, len(req.Messages)+2)
		msgs = append(msgs, req.Messages...)
		msgs = append(msgs, Assistant(resp.Message.Content), User(SchemaFeedback(verr)))
		req.Messages = msgs
		if len(req.Tools) > 0 {
			// The model chose to answer: a retry corrects the answer, it
			// does not start another round of tool calls (whose results
			// the caller would add to a conversation without this
			// feedback in it).
			req.ToolChoice = "none"
		}
	}
}

// SchemaFeedback is the user message that answers a reply that did not
// conform to the response format.
func SchemaFeedback(err error) string {
	return "Your reply was rejected: " + err.Error() + ". Reply again with only a JSON value that conforms to the schema."
}

// IsSchemaError reports whether err is (or wraps) a *SchemaError.
func IsSchemaError(err error) bool {
	var se *SchemaError
	return errors.As(err, &se)
}

// attemptKey derives the idempotency key of attempt n (n > 1) of a
// structured call from the call's key: same length, as stable as the key.
func attemptKey(key string, n int) string {
	h := sha256.Sum256([]byte(key + "/attempt/" + strconv.Itoa(n)))
	return hex.EncodeToString(h[:16])
}
