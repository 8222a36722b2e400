package agentbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/agent/model"
)

// FakeOpenAIConfig configures FakeOpenAI.
type FakeOpenAIConfig struct {
	// Seed and Latency make the replies and their latencies: those of
	// model.Offline{Seed, Latency} for the same messages, so the offline
	// and the HTTP modes of the experiment answer alike.
	Seed    int64
	Latency model.Latency
	// Faults are the failures injected (see Faults).
	Faults Faults
}

// FakeOpenAI is an OpenAI-compatible chat-completions server on
// 127.0.0.1, for the experiment to measure the real client path (the
// official SDK, HTTP, JSON) against a model of known latency and faults.
//
// It serves POST {URL}/chat/completions in the API's wire format: a
// chat.completion object with usage, or, for "stream": true, server-sent
// events of chat.completion.chunk objects (a role chunk, content chunks,
// a chunk with the finish reason, a usage chunk with no choices when
// stream_options.include_usage is set, and "data: [DONE]"). The latency
// of a reply is drawn server-side from Latency by the request (as
// model.Offline does); a streamed reply sends its first chunk after half
// of it and spreads the rest over the other half. Injected faults answer
// at once: 429 with Retry-After and retry-after-ms headers and a
// rate_limit_exceeded error body, 500 with a server_error body, or a
// connection dropped after half of the reply's bytes (the client reads a
// truncated body; net/http does not retry it on its own, as it may a
// request whose connection closed before any reply). A request without
// an Authorization bearer token is answered 401, an unknown path 404.
//
// It is safe for concurrent use; Close stops it.
type FakeOpenAI struct {
	// URL is the base URL to give the client (http://127.0.0.1:port/v1).
	URL string

	srv      *http.Server
	offline  *model.Offline
	inj      *injector
	streamed atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
}

// StartFakeOpenAI starts a server for cfg on a free port of 127.0.0.1.
func StartFakeOpenAI(cfg FakeOpenAIConfig) (*FakeOpenAI, error) {
	if err := cfg.Latency.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Faults.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("agentbench: fake OpenAI server: %w", err)
	}
	f := &FakeOpenAI{URL: "http://" + ln.Addr().String() + "/v1",
		offline: &model.Offline{Seed: cfg.Seed, Latency: cfg.Latency}, inj: newInjector(cfg.Faults, cfg.Seed)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	})
	// No read or idle time-outs: a time-out closing an idle keep-alive
	// connection races with the client reusing it, and the client's
	// retry of that is a fault nobody injected (net/http retries it
	// itself only for requests carrying an Idempotency-Key).
	f.srv = &http.Server{Handler: mux} //nolint:gosec // a local test server

	go f.srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed on Close
	return f, nil
}

// Close stops the server and closes its connections.
func (f *FakeOpenAI) Close() error { return f.srv.Close() }

// FakeOpenAIStats are a FakeOpenAI's counts.
type FakeOpenAIStats struct {
	FaultCounts
	// Streamed is the replies sent as server-sent events.
	Streamed int64 `json:"streamed"`
	// MaxInFlight is the most requests it served at once.
	MaxInFlight int64 `json:"maxInFlight"`
}

// Stats returns the server's counts.
func (f *FakeOpenAI) Stats() FakeOpenAIStats {
	return FakeOpenAIStats{FaultCounts: f.inj.counts(), Streamed: f.streamed.Load(), MaxInFlight: f.maxIn.Load()}
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chunkDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

func (f *FakeOpenAI) chat(w http.ResponseWriter, r *http.Request) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for old := f.maxIn.Load(); n > old && !f.maxIn.CompareAndSwap(old, n); old = f.maxIn.Load() {
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return
	}
	var cr chatRequest
	if err := json.NewDecoder(r.Body).Decode(&cr); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	req := model.Request{Model: cr.Model}
	for i, m := range cr.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("messages[%d].content: %v", i, err))
			return
		}
		req.Messages = append(req.Messages, model.Message{Role: model.Role(m.Role), Content: text})
	}
	if len(req.Messages) == 0 || cr.Model == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "model and messages are required")
		return
	}
	h := f.offline.Hash(req)
	switch f.inj.next(h) {
	case faultRateLimited:
		d := f.inj.f.RetryAfter
		w.Header().Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
		w.Header().Set("Retry-After", strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
		apiError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests (injected).")
		return
	case faultServerError:
		apiError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request (injected).")
		return
	case faultDropped:
		f.drop(w, cr.Stream)
		return
	}
	resp, err := f.offline.Reply(req)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	id := fmt.Sprintf("chatcmpl-%016x", h)
	created := time.Now().Unix()
	usage := chatUsage{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.PromptTokens + resp.Usage.CompletionTokens}
	lat := f.offline.LatencyFor(req)
	if !cr.Stream {
		if !wait(r.Context(), lat) {
			return
		}
		writeJSON(w, http.StatusOK, chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: cr.Model,
			Choices: []chatChoice{{Message: chatMessage{Role: "assistant", Content: resp.Message.Content}, FinishReason: resp.FinishReason}},
			Usage:   usage})
		return
	}
	f.streamed.Add(1)
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(c chatChunk) bool {
		c.ID, c.Object, c.Created, c.Model = id, "chat.completion.chunk", created, cr.Model
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	pieces := splitWords(resp.Message.Content, 8)
	if !wait(r.Context(), lat/2) || !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Role: "assistant", Content: pieces[0]}}}}) {
		return
	}
	step := (lat - lat/2) / time.Duration(len(pieces))
	for _, p := range pieces[1:] {
		if !wait(r.Context(), step) || !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Content: p}}}}) {
			return
		}
	}
	reason := resp.FinishReason
	if !wait(r.Context(), step) || !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{}, FinishReason: &reason}}}) {
		return
	}
	if cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage && !send(chatChunk{Choices: []chunkChoice{}, Usage: &usage}) {
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// drop answers 200 with half of a reply's bytes and drops the connection
// (http.ErrAbortHandler: the server closes it without ending the body).
func (f *FakeOpenAI) drop(w http.ResponseWriter, stream bool) {
	body := []byte(`{"id":"chatcmpl-dropped","object":"chat.completion","created":0,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"this reply is cut short"},"finish_reason":"stop"}]}`)
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
		body = []byte("data: {\"id\":\"chatcmpl-dropped\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"cut\"},\"finish_reason\":null}]}\n\n")
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(body[:len(body)/2]) //nolint:errcheck // the connection is dropped next
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	panic(http.ErrAbortHandler)
}

// contentText is a message's content: a string, or the text of an array
// of content parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// splitWords cuts s into at most n pieces at spaces (a space starts each
// piece after the first); at least one piece.
func splitWords(s string, n int) []string {
	words := strings.SplitAfter(s, " ")
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		out = append(out, strings.Join(words[i:min(i+per, len(words))], ""))
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	body := map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}}
	if code != "" {
		body["error"].(map[string]any)["code"] = code
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client went away
}
