package agentbench

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/model"
)

// realisticConfig is a tiny run with every realistic feature: execution
// trees (7 actions per input), 429s and transient errors at 10 % of the
// attempts each, short waits so the test is quick.
func realisticConfig(mode string, stream bool) Config {
	return Config{Inputs: 150, Keys: 40, MaxConcurrentKeys: 16, WatermarkInterval: time.Millisecond,
		Latency: model.Latency{Dist: "lognormal", Mean: 2 * time.Millisecond, Spread: 1},
		Model:   mode, Stream: stream, TreeDepth: 2, TreeFanout: 2, RetryInitial: time.Millisecond,
		Faults: Faults{RateLimitRate: 0.1, ErrorRate: 0.1, RetryAfter: time.Millisecond}}
}

// TestRealistic runs the experiment in both model modes (and streaming)
// with trees and injected faults: every action's output reaches the sink
// exactly once (Run fails otherwise), none behind a watermark, faults of
// every kind were injected, and the client retried each exactly once.
func TestRealistic(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   string
		stream bool
	}{{"offline", "offline", false}, {"http", "http", false}, {"http-stream", "http", true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := Run(ctx, realisticConfig(c.mode, c.stream))
			if err != nil {
				t.Fatal(err)
			}
			if r.ActionsPerInput != 7 || r.Actions != 150*7 || r.ActionsRun != r.Actions {
				t.Fatalf("actions: %d per input, %d in all, %d run; want 7, 1050, 1050", r.ActionsPerInput, r.Actions, r.ActionsRun)
			}
			if r.WatermarkViolations != 0 || r.Missing != 0 || r.Duplicates != 0 {
				t.Fatalf("%d watermark violations, %d missing, %d duplicate outputs", r.WatermarkViolations, r.Missing, r.Duplicates)
			}
			in := r.Injected
			if in.RateLimited == 0 || in.ServerErrors == 0 || in.Dropped == 0 {
				t.Fatalf("faults injected %+v: want some of each kind", in)
			}
			// Every call succeeds in the end: one attempt per action plus
			// one per fault, each fault retried once by the client.
			if in.Attempts != r.Actions+in.Faulted() {
				t.Fatalf("%d attempts for %d actions and %d faults", in.Attempts, r.Actions, in.Faulted())
			}
			if r.ModelRetries != in.Faulted() || r.RateLimitedRetries != in.RateLimited {
				t.Fatalf("client retries %d (%d after 429s); injected %+v", r.ModelRetries, r.RateLimitedRetries, in)
			}
			if r.IdealPerSec <= 0 || r.ExpectedActionMs <= r.MeanLatencyMs || r.ActionP99Ms < r.ActionP50Ms || r.ActionP50Ms <= 0 {
				t.Fatalf("result %+v", r)
			}
			t.Logf("%.0f actions/s of ideal %.0f/s, p50 %.2f ms, p99 %.2f ms, %.1f µs CPU per action, injected %+v",
				r.ThroughputPerSec, r.IdealPerSec, r.ActionP50Ms, r.ActionP99Ms, r.ProcessCPUMicrosPerAction, in)
		})
	}
}

// TestSameFaultsInBothModes: the faults are a function of the requests
// and the seed, so the offline and HTTP modes inject the same ones.
func TestSameFaultsInBothModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	off, err := Run(ctx, realisticConfig("offline", false))
	if err != nil {
		t.Fatal(err)
	}
	web, err := Run(ctx, realisticConfig("http", false))
	if err != nil {
		t.Fatal(err)
	}
	if off.Injected != web.Injected {
		t.Fatalf("offline injected %+v, http %+v", off.Injected, web.Injected)
	}
}

// TestFakeOpenAIWireFormat: the project's OpenAI client (the official
// SDK) reads the fake server's replies, streamed and not, as the offline
// model's answers with their usage, and its 429s, 500s and dropped
// connections as the errors the retry path acts on.
func TestFakeOpenAIWireFormat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lat := model.Latency{Dist: "uniform", Mean: time.Millisecond}
	req := model.Request{Messages: []model.Message{model.System("be brief"), model.User("what is a watermark?")}}
	want, err := (&model.Offline{Seed: 7, Latency: lat}).Reply(req)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartFakeOpenAI(FakeOpenAIConfig{Seed: 7, Latency: lat})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, stream := range []bool{false, true} {
		c := model.OpenAI(model.OpenAIConfig{BaseURL: srv.URL, APIKey: "k", Model: "m", Stream: stream, Retry: model.RetryPolicy{Attempts: 1}})
		got, err := c.Chat(ctx, req)
		if err != nil {
			t.Fatalf("stream %v: %v", stream, err)
		}
		if got.Message.Content != want.Message.Content || got.Usage != want.Usage || got.FinishReason != "stop" || got.Model != "m" {
			t.Fatalf("stream %v: got %+v, want %+v", stream, got, want)
		}
	}
	if s := srv.Stats(); s.Streamed != 1 || s.Attempts != 2 {
		t.Fatalf("stats %+v: want 2 attempts, 1 streamed", s)
	}

	// Faults: every first attempt fails (MaxInARow 1), the second succeeds.
	for _, c := range []struct {
		name   string
		faults Faults
		check  func(error) bool
	}{
		{"429", Faults{RateLimitRate: 1, RetryAfter: 1500 * time.Millisecond, MaxInARow: 1}, func(err error) bool {
			var api *model.APIError
			return errors.As(err, &api) && api.StatusCode == 429 && api.RetryAfter == 1500*time.Millisecond && api.Code == "rate_limit_exceeded"
		}},
		{"error", Faults{ErrorRate: 1, MaxInARow: 1}, func(err error) bool {
			var api *model.APIError
			if errors.As(err, &api) {
				return api.StatusCode == 500 && api.Type == "server_error"
			}
			return strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset")
		}},
	} {
		for _, stream := range []bool{false, true} {
			fs, err := StartFakeOpenAI(FakeOpenAIConfig{Seed: 7, Latency: lat, Faults: c.faults})
			if err != nil {
				t.Fatal(err)
			}
			cl := model.OpenAI(model.OpenAIConfig{BaseURL: fs.URL, APIKey: "k", Model: "m", Stream: stream, Retry: model.RetryPolicy{Attempts: 1}})
			for i := range 8 {
				r := model.Request{Messages: []model.Message{model.User("q" + string(rune('a'+i)))}}
				_, err := cl.Chat(ctx, r)
				if err == nil || !c.check(err) || !model.Retryable(ctx, err) {
					t.Fatalf("%s, stream %v: first attempt: %v", c.name, stream, err)
				}
				if _, err := cl.Chat(ctx, r); err != nil {
					t.Fatalf("%s, stream %v: second attempt: %v", c.name, stream, err)
				}
			}
			s := fs.Stats()
			fs.Close()
			if c.name == "error" && (s.ServerErrors == 0 || s.Dropped == 0) {
				t.Fatalf("stream %v: %+v: want both 500s and dropped connections among 8", stream, s)
			}
		}
	}

	// No key: 401; an unknown path: 404.
	c := model.OpenAI(model.OpenAIConfig{BaseURL: srv.URL, APIKeyHeader: "api-key", APIKey: "k", Model: "m", Retry: model.RetryPolicy{Attempts: 1}})
	var api *model.APIError
	if _, err := c.Chat(ctx, req); !errors.As(err, &api) || api.StatusCode != 401 {
		t.Fatalf("without a bearer token: %v", err)
	}
	resp, err := http.Get(strings.TrimSuffix(srv.URL, "/v1") + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET /v1/models: %s", resp.Status)
	}
}

// TestExpectedActionTime checks the ideal's action time against sums
// worked by hand.
func TestExpectedActionTime(t *testing.T) {
	const l = 100 * time.Millisecond
	p := model.RetryPolicy{Initial: 40 * time.Millisecond}
	for _, c := range []struct {
		f    Faults
		want time.Duration
	}{
		{Faults{}, l},
		// Half the first attempts get a 429 (1 s), the second succeeds.
		{Faults{RateLimitRate: 0.5, RetryAfter: time.Second, MaxInARow: 1}, l + 500*time.Millisecond},
		// Half fail: a back-off of 3/4 × 40 ms, then l.
		{Faults{ErrorRate: 0.5, MaxInARow: 1}, l + 15*time.Millisecond},
		// Two errors in a row cost 30 ms + 60 ms: 1/2·30 + 1/4·60.
		{Faults{ErrorRate: 0.5, MaxInARow: 2}, l + 30*time.Millisecond},
	} {
		if got := ExpectedActionTime(l, c.f, p); (got - c.want).Abs() > time.Microsecond {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
}
