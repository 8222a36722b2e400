package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/model"
)

// embServer speaks the /v1/embeddings wire format: it records each request
// body and answers with the queued replies (the last repeats); a reply of
// status 200 with an empty body gets a vector per input computed by vec,
// listed in reverse index order (servers need not keep input order).
type embServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	replies []embReply
}

type embReply struct {
	status int
	body   string
	header map[string]string
}

func vec(text string, dim int) []float64 {
	v := make([]float64, dim)
	for i := range v {
		v[i] = float64(len(text)*(i+1)%7) / 7
	}
	return v
}

func newEmbServer(t *testing.T, replies ...embReply) *embServer {
	s := &embServer{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("request body is not JSON: %s", b)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, m)
		s.headers = append(s.headers, r.Header.Clone())
		rp := s.replies[0]
		if len(s.replies) > 1 {
			s.replies = s.replies[1:]
		}
		s.mu.Unlock()
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		body := rp.body
		if rp.status == 200 && body == "" {
			inputs, _ := m["input"].([]any)
			var data []string
			for i := len(inputs) - 1; i >= 0; i-- {
				e, _ := json.Marshal(vec(inputs[i].(string), 3))
				data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, i, e))
			}
			body = fmt.Sprintf(`{"object":"list","data":[%s],"model":"text-embedding-test","usage":{"prompt_tokens":%d,"total_tokens":%d}}`,
				strings.Join(data, ","), len(inputs), len(inputs))
		}
		w.WriteHeader(rp.status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func TestOpenAIEmbeddingsWireFormat(t *testing.T) {
	s := newEmbServer(t, embReply{status: 200})
	c, err := OpenAI(OpenAIConfig{BaseURL: s.srv.URL + "/v1", APIKey: "sk-test-secret", Model: "text-embedding-3-small",
		Dimensions: 3, BatchSize: 2, Headers: map[string]string{"X-Team": "weir"}})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"alpha", "beta gamma", "delta"}
	got, err := c.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d vectors for 3 texts", len(got))
	}
	for i, text := range texts {
		want := vec(text, 3)
		for j := range want {
			if got[i][j] != float32(want[j]) {
				t.Fatalf("vector %d (%q) = %v, want %v: vectors not put back in input order", i, text, got[i], want)
			}
		}
	}
	if len(s.bodies) != 2 {
		t.Fatalf("%d requests for 3 texts in batches of 2, want 2", len(s.bodies))
	}
	b := s.bodies[0]
	if b["model"] != "text-embedding-3-small" || b["encoding_format"] != "float" || b["dimensions"] != 3.0 {
		t.Fatalf("request %v", b)
	}
	if in := b["input"].([]any); len(in) != 2 || in[0] != "alpha" || in[1] != "beta gamma" {
		t.Fatalf("first batch input %v", in)
	}
	if in := s.bodies[1]["input"].([]any); len(in) != 1 || in[0] != "delta" {
		t.Fatalf("second batch input %v", in)
	}
	if h := s.headers[0]; h.Get("Authorization") != "Bearer sk-test-secret" || h.Get("X-Team") != "weir" {
		t.Fatalf("headers %v", h)
	}
	if strings.Contains(c.String(), "sk-test") {
		t.Fatalf("String shows the key: %s", c)
	}
}

func TestOpenAIEmbeddingsRetriesAndErrors(t *testing.T) {
	const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	s := newEmbServer(t, embReply{status: 429, body: rateLimited, header: map[string]string{"Retry-After": "2"}}, embReply{status: 200})
	var waits []time.Duration
	c, err := OpenAI(OpenAIConfig{BaseURL: s.srv.URL + "/v1", APIKey: "k", Model: "m",
		Retry: model.RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("a 429 then a 200: %v", err)
	}
	if len(waits) != 1 || waits[0] != 2*time.Second {
		t.Fatalf("waits %v, want one of 2s (Retry-After)", waits)
	}

	// The one reading of a server's wait (package retry), as the chat
	// clients have it: retry-after-ms wins, an HTTP-date counts from the
	// reply's Date, a negative or garbled value leaves the back-off.
	date := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"retry-after-ms", map[string]string{"Retry-After": "1", "retry-after-ms": "1500"}, 1500 * time.Millisecond},
		{"HTTP-date", map[string]string{"Retry-After": date.Add(3 * time.Second).Format(http.TimeFormat), "Date": date.Format(http.TimeFormat)}, 3 * time.Second},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"garbage", map[string]string{"Retry-After": "later"}, 0},
	} {
		s := newEmbServer(t, embReply{status: 429, body: rateLimited, header: c.header}, embReply{status: 200})
		var waits []time.Duration
		cl, err := OpenAI(OpenAIConfig{BaseURL: s.srv.URL + "/v1", APIKey: "k", Model: "m",
			Retry: model.RetryPolicy{Initial: time.Nanosecond, Max: time.Hour, Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Embed(context.Background(), []string{"x"}); err != nil {
			t.Fatalf("%s: a 429 then a 200: %v", c.name, err)
		}
		switch {
		case len(waits) != 1:
			t.Fatalf("%s: waits %v, want one", c.name, waits)
		case c.want > 0 && waits[0] != c.want:
			t.Fatalf("%s: waited %v, want the server's %v", c.name, waits[0], c.want)
		case c.want == 0 && waits[0] > time.Nanosecond:
			t.Fatalf("%s: waited %v, want the back-off's 1ns at most", c.name, waits[0])
		}
	}
	bad := newEmbServer(t, embReply{status: 400, body: `{"error":{"message":"input too long","type":"invalid_request_error","code":null}}`})
	c, _ = OpenAI(OpenAIConfig{BaseURL: bad.srv.URL + "/v1", APIKey: "sk-hidden", Model: "m", Retry: model.RetryPolicy{Sleep: noSleep}})
	_, err = c.Embed(context.Background(), []string{"x"})
	var api *model.APIError
	if !errors.As(err, &api) || api.StatusCode != 400 || api.Message != "input too long" || len(bad.bodies) != 1 {
		t.Fatalf("400: err %v after %d requests; want one request and a *model.APIError", err, len(bad.bodies))
	}
	if strings.Contains(err.Error(), "sk-hidden") {
		t.Fatalf("error shows the key: %v", err)
	}

	if _, err := c.Embed(context.Background(), []string{"x", ""}); err == nil || !strings.Contains(err.Error(), "text 1 is empty") || len(bad.bodies) != 1 {
		t.Fatalf("empty text: err %v, %d requests; want a refusal before any request", err, len(bad.bodies))
	}

	for _, body := range []string{
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]},{"object":"embedding","index":0,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`,
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]},{"object":"embedding","index":1,"embedding":[1]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`,
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`,
	} {
		odd := newEmbServer(t, embReply{status: 200, body: body})
		c, _ := OpenAI(OpenAIConfig{BaseURL: odd.srv.URL + "/v1", APIKey: "k", Model: "m", Retry: model.RetryPolicy{Sleep: noSleep}})
		if _, err := c.Embed(context.Background(), []string{"a", "b"}); err == nil || len(odd.bodies) != 1 {
			t.Fatalf("malformed reply %s: err %v after %d requests; want an error, not retried", body, err, len(odd.bodies))
		}
	}
}

func TestOpenAIConfigValidated(t *testing.T) {
	for _, cfg := range []OpenAIConfig{{}, {Model: "m", Dimensions: -1}, {Model: "m", BatchSize: -2}} {
		if _, err := OpenAI(cfg); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
}
