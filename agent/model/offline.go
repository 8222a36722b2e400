package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// Latency is a distribution of call latencies.
type Latency struct {
	// Dist is "fixed" (or ""), "uniform", "exponential" or "lognormal".
	Dist string `json:"dist,omitempty"`
	// Mean is the mean latency.
	Mean time.Duration `json:"mean"`
	// Spread shapes the distribution: for uniform the half-width as a
	// fraction of Mean (0 means 0.5: [Mean/2, 3Mean/2]); for lognormal
	// sigma (0 means 0.5). Ignored otherwise.
	Spread float64 `json:"spread,omitempty"`
	// Max caps a latency; 0 means 20 × Mean.
	Max time.Duration `json:"max,omitempty"`
}

// Sample returns the latency at quantile u in [0, 1).
func (l Latency) Sample(u float64) time.Duration {
	mean := float64(l.Mean)
	if mean <= 0 {
		return 0
	}
	u = min(max(u, 0), math.Nextafter(1, 0))
	var d float64
	switch l.Dist {
	case "", "fixed":
		d = mean
	case "uniform":
		w := l.Spread
		if w <= 0 {
			w = 0.5
		}
		w = min(w, 1)
		d = mean * (1 - w + 2*w*u)
	case "exponential":
		d = -mean * math.Log(1-u)
	case "lognormal":
		s := l.Spread
		if s <= 0 {
			s = 0.5
		}
		// mean of lognormal(mu, s) is exp(mu + s²/2).
		mu := math.Log(mean) - s*s/2
		d = math.Exp(mu + s*normalQuantile(u))
	default:
		d = mean
	}
	limit := float64(l.Max)
	if limit <= 0 {
		limit = 20 * mean
	}
	return time.Duration(min(d, limit))
}

// Validate reports a distribution Sample does not know.
func (l Latency) Validate() error {
	switch l.Dist {
	case "", "fixed", "uniform", "exponential", "lognormal":
		return nil
	}
	return fmt.Errorf("model: unknown latency distribution %q; use fixed, uniform, exponential or lognormal", l.Dist)
}

// normalQuantile is the standard normal quantile (Acklam's approximation,
// relative error < 1.2e-9).
func normalQuantile(p float64) float64 {
	if p <= 0 {
		return math.Inf(-1)
	}
	a := [...]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := [...]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := [...]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := [...]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	const lo = 0.02425
	switch {
	case p < lo:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-lo:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	}
	q := p - 0.5
	r := q * q
	return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
}

// Offline is a model that needs no server: its reply and its latency are
// functions of the request and Seed only, so runs are reproducible (I7). It is
// weir's default model for the embedded demo, tests and benchmarks.
//
// Replies: with ResponseFormat, a JSON value conforming to the schema
// (strings filled from the first user message; see SchemaMistakes); with tools offered and ToolCalls set, as long as
// no tool result follows the last user message, a call of one tool (chosen
// by the request's hash) with arguments shaped by its schema; otherwise a
// text answer naming the request's hash and quoting the last user message
// (and the tool results, if any).
type Offline struct {
	// Seed varies replies and latencies between otherwise equal models.
	Seed int64
	// Latency is the distribution each call's latency is drawn from (by the
	// request's hash: the same request always takes as long).
	Latency Latency
	// ToolCalls makes the model call tools when offered.
	ToolCalls bool
	// SchemaMistakes makes the first SchemaMistakes structured answers of
	// a conversation not conform to the schema (a required property left
	// out, or a value of another type), to exercise validation and the
	// feedback loop: the model counts its earlier answers (assistant
	// messages with content) in the request, so the answer after that
	// many rejections conforms.
	SchemaMistakes int
	// Sleep waits (tests and benchmarks replace it); nil means a timer
	// that ends early, with the context's error, when ctx is done.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Hash returns the request's 64-bit hash under the model's seed (FNV-1a
// over the seed and the messages' roles, contents and tool calls).
func (o *Offline) Hash(req Request) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(o.Seed))
	h.Write(b[:])
	for _, m := range req.Messages {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
		for _, tc := range m.ToolCalls {
			h.Write([]byte(tc.Name))
			h.Write(tc.Arguments)
		}
	}
	return h.Sum64()
}

// LatencyFor returns the latency of req.
func (o *Offline) LatencyFor(req Request) time.Duration {
	h := o.Hash(req) * 0x9E3779B97F4A7C15
	return o.Latency.Sample(float64(h>>11) / (1 << 53))
}

// Chat implements ChatModel.
func (o *Offline) Chat(ctx context.Context, req Request) (*Response, error) {
	if d := o.LatencyFor(req); d > 0 {
		s := o.Sleep
		if s == nil {
			// The system clock, not the context's: the latency stands for a
			// server's, which a job's manual clock does not drive.
			s = func(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, clock.Real, d) }
		}
		if err := s(ctx, d); err != nil {
			return nil, err
		}
	} else if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.Reply(req)
}

// Reply returns the reply to req without waiting.
func (o *Offline) Reply(req Request) (*Response, error) {
	h := o.Hash(req)
	prompt, lastUser := "", -1
	for i, m := range req.Messages {
		if m.Role == RoleUser {
			prompt, lastUser = m.Content, i
		}
	}
	var results []string
	for _, m := range req.Messages[lastUser+1:] {
		if m.Role == RoleTool {
			results = append(results, m.Content)
		}
	}
	usage := Usage{PromptTokens: tokens(req), CompletionTokens: 16}
	if o.ToolCalls && len(req.Tools) > 0 && len(results) == 0 && req.ToolChoice != "none" {
		t := req.Tools[h%uint64(len(req.Tools))]
		if req.ToolChoice != "" && req.ToolChoice != "auto" && req.ToolChoice != "required" {
			for _, tt := range req.Tools {
				if tt.Name == req.ToolChoice {
					t = tt
				}
			}
		}
		args, err := exampleJSON(t.Parameters, prompt)
		if err != nil {
			return nil, &PermanentError{fmt.Errorf("model: offline: parameters of tool %q: %w", t.Name, err)}
		}
		return &Response{Model: "offline", FinishReason: "tool_calls", Usage: usage,
			Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: fmt.Sprintf("call_%016x", h), Name: t.Name, Arguments: args}}}}, nil
	}
	var content string
	if rf := req.ResponseFormat; rf != nil {
		answers := 0
		for _, m := range req.Messages {
			if m.Role == RoleAssistant && m.Content != "" {
				answers++
			}
		}
		// Filled from the question (the first user message), not from
		// the feedback to earlier answers.
		question := prompt
		for _, m := range req.Messages {
			if m.Role == RoleUser {
				question = m.Content
				break
			}
		}
		b, err := exampleJSON(rf.Schema, question)
		if err == nil && answers < o.SchemaMistakes {
			b, err = mistaken(b, rf.Schema)
		}
		if err != nil {
			return nil, &PermanentError{fmt.Errorf("model: offline: response format %q: %w", rf.Name, err)}
		}
		content = string(b)
	} else {
		var sb strings.Builder
		fmt.Fprintf(&sb, "answer %016x to %q", h, clip(prompt, 64))
		for _, r := range results {
			fmt.Fprintf(&sb, " using %q", clip(r, 64))
		}
		content = sb.String()
	}
	return &Response{Model: "offline", FinishReason: "stop", Usage: usage, Message: Message{Role: RoleAssistant, Content: content}}, nil
}

func tokens(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)/4 + 1
	}
	return n
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// mistaken turns good, a value conforming to schema, into one that does
// not: an object loses its first required property (or gains a property
// when none is required and none may be added), any other value becomes
// a value of another type.
func mistaken(good json.RawMessage, schema json.RawMessage) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("schema is not a JSON object: %w", err)
	}
	var v any
	if err := json.Unmarshal(good, &v); err != nil {
		return nil, err
	}
	if obj, ok := v.(map[string]any); ok {
		if req, _ := s["required"].([]any); len(req) > 0 {
			name, _ := req[0].(string)
			delete(obj, name)
			return json.Marshal(obj)
		}
		if ap, ok := s["additionalProperties"].(bool); ok && !ap {
			obj["unexpected"] = true
			return json.Marshal(obj)
		}
	}
	if _, ok := v.(string); ok {
		return json.RawMessage(`0`), nil
	}
	return json.RawMessage(`"not what the schema asks for"`), nil
}

// exampleJSON returns a JSON value conforming to the (simple) schema:
// objects with every property, strings filled with text (padded to
// minLength, cut to maxLength), numbers at their minimum or 0 (the
// maximum when that is below 0), booleans false, arrays with minItems
// items, the first enum value or the const when there is one.
func exampleJSON(schema json.RawMessage, text string) (json.RawMessage, error) {
	if len(schema) == 0 {
		return json.RawMessage("{}"), nil
	}
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("schema is not a JSON object: %w", err)
	}
	return json.Marshal(example(s, text, 0))
}

func example(s map[string]any, text string, depth int) any {
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if c, ok := s["const"]; ok {
		return c
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		// The first type that is not null: a nullable list is a list.
		for _, x := range ts {
			if typ, _ = x.(string); typ != "null" {
				break
			}
		}
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		if depth < 8 {
			for _, n := range names {
				if ps, ok := props[n].(map[string]any); ok {
					out[n] = example(ps, text, depth+1)
				}
			}
		}
		return out
	case "array":
		n, _ := s["minItems"].(float64)
		out := make([]any, 0, int(n))
		if items, ok := s["items"].(map[string]any); ok && depth < 8 {
			for range int(min(n, 64)) {
				out = append(out, example(items, text, depth+1))
			}
		}
		return out
	case "integer", "number":
		x := 0.0
		if lo, ok := s["minimum"].(float64); ok {
			x = lo
		} else if lo, ok := s["exclusiveMinimum"].(float64); ok {
			x = math.Floor(lo) + 1
		}
		if hi, ok := s["maximum"].(float64); ok && x > hi {
			x = hi
		}
		if typ == "integer" {
			x = math.Ceil(x)
		}
		return x
	case "boolean":
		return false
	case "null":
		return nil
	}
	t := text
	if lo, ok := s["minLength"].(float64); ok {
		for len([]rune(t)) < int(lo) {
			t += "."
		}
	}
	if hi, ok := s["maxLength"].(float64); ok && len([]rune(t)) > int(hi) {
		t = string([]rune(t)[:int(hi)])
	}
	return t
}
