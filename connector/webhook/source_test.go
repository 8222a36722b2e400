package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

type event struct {
	ID   int  `json:"id"`
	Boom bool `json:"boom,omitempty"`
}

type reply struct {
	status     int
	body       string
	retryAfter string
	// completed is how many checkpoints had completed when the answer
	// arrived.
	completed int
}

// post sends body and returns the answer on a channel; completed (if not
// nil) is read as soon as the answer arrives.
func post(t *testing.T, url, token, body string, completed func() int) <-chan reply {
	t.Helper()
	out := make(chan reply, 1)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- reply{status: -1, body: err.Error()}
			return
		}
		r := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		if completed != nil {
			r.completed = completed()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.body = string(b)
		out <- r
	}()
	return out
}

// start runs src into an observer (behind fail, which fails the job on a
// record with Boom) and returns the job and the observation.
func start(t *testing.T, src *webhook.Source[event], cfg weir.Config) (*runtime.Job, *weirtest.Observation[event]) {
	t.Helper()
	env := weir.NewEnvironment(cfg)
	s := weir.FromSource(env, "hook", runtime.Source[event](src), watermark.ForMonotonous[event]())
	s = weir.Map(s, "boom", func(e event) event {
		if e.Boom {
			panic(errBoom)
		}
		return e
	})
	obs := weirtest.Observe(s)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Cancel(); job.Wait() })
	return job, obs
}

var errBoom = errors.New("boom")

func completedCheckpoints(job *runtime.Job) func() int {
	return func() int {
		n := 0
		for _, c := range job.Checkpoints() {
			if c.Status == runtime.CheckpointCompleted {
				n++
			}
		}
		return n
	}
}

// A request is answered 200 only after a checkpoint covering its records
// has completed: the answer finds the checkpoint completed (W2).
func TestAnsweredAfterTheCheckpointCompletes(t *testing.T) {
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0"})
	job, obs := start(t, src, weir.Config{Parallelism: 1, Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	done := completedCheckpoints(job)
	a := post(t, src.URL(), "", `{"id":1}`, done)
	b := post(t, src.URL(), "", "{\"id\":2}\n{\"id\":3}\n", done)
	weirtest.Eventually(t, "3 records downstream", func() bool { return obs.Len() == 3 })
	select {
	case r := <-a:
		t.Fatalf("answered %d before any checkpoint", r.status)
	case r := <-b:
		t.Fatalf("answered %d before any checkpoint", r.status)
	default:
	}
	if _, _, err := job.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan reply{a, b} {
		r := <-ch
		if r.status != http.StatusOK || r.completed < 1 {
			t.Fatalf("answer %+v: want 200 after a completed checkpoint", r)
		}
	}
	// A request emitted after the barrier waits for the next checkpoint.
	c := post(t, src.URL(), "", `[{"id":4},{"id":5}]`, done)
	weirtest.Eventually(t, "5 records downstream", func() bool { return obs.Len() == 5 })
	if _, _, err := job.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-c; r.status != http.StatusOK || r.completed < 2 {
		t.Fatalf("answer %+v: want 200 after the second checkpoint", r)
	}
}

// When the job fails, the request waiting for its checkpoint is answered
// 503 with Retry-After, never 200 (W6).
func TestFailureAnswers503(t *testing.T) {
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0"})
	job, obs := start(t, src, weir.Config{Parallelism: 1, Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	url := src.URL()
	a := post(t, url, "", `{"id":1}`, nil)
	weirtest.Eventually(t, "the record downstream", func() bool { return obs.Len() == 1 })
	boom := post(t, url, "", `{"id":2,"boom":true}`, nil)
	if err := job.Wait(); err == nil {
		t.Fatal("the job did not fail")
	}
	for _, ch := range []<-chan reply{a, boom} {
		r := <-ch
		if r.status != http.StatusServiceUnavailable || r.retryAfter == "" || !strings.Contains(r.body, "send them again") {
			t.Fatalf("answer %+v: want 503 with Retry-After", r)
		}
	}
	if src.Addr() != "" {
		t.Errorf("Addr %q after the job ended, want empty", src.Addr())
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(url, "/ingest"), "http://")); err == nil {
		t.Error("the listener is still open after the job ended")
	}
}

// A request that does not fit in the queue is answered 429 with
// Retry-After at once; one with more records than the queue, 413; room
// freed by a checkpoint is taken again (W7).
func TestQueueFullAnswers429(t *testing.T) {
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0", Queue: 3})
	job, obs := start(t, src, weir.Config{Parallelism: 1, Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	a := post(t, src.URL(), "", `[{"id":1},{"id":2}]`, nil)
	weirtest.Eventually(t, "2 records downstream", func() bool { return obs.Len() == 2 })
	if r := <-post(t, src.URL(), "", `[{"id":3},{"id":4}]`, nil); r.status != http.StatusTooManyRequests || r.retryAfter != "1" {
		t.Fatalf("answer %+v: want 429 with Retry-After 1", r)
	}
	if r := <-post(t, src.URL(), "", `[{"id":5},{"id":6},{"id":7},{"id":8}]`, nil); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("answer %+v: want 413 for more records than the queue", r)
	}
	c := post(t, src.URL(), "", `{"id":9}`, nil) // fits: 3 of 3
	weirtest.Eventually(t, "3 records downstream", func() bool { return obs.Len() == 3 })
	if _, _, err := job.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan reply{a, c} {
		if r := <-ch; r.status != http.StatusOK {
			t.Fatalf("answer %+v: want 200", r)
		}
	}
	d := post(t, src.URL(), "", `[{"id":10},{"id":11},{"id":12}]`, nil)
	weirtest.Eventually(t, "6 records downstream", func() bool { return obs.Len() == 6 })
	if _, _, err := job.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-d; r.status != http.StatusOK {
		t.Fatalf("answer %+v: want 200 once the room was freed", r)
	}
}

// The token, the size limit, the method, the path and the body's form are
// checked before anything is queued (W4, W7, W8). AckOnEmit answers once
// the records are emitted, without checkpoints (W3).
func TestRequestChecks(t *testing.T) {
	const token = "t0ken-Value"
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0", Path: "/hook", Token: token, MaxBody: 64, Ack: webhook.AckOnEmit})
	_, obs := start(t, src, weir.Config{Parallelism: 1})
	url := src.URL()
	for _, tc := range []struct {
		name, token, body string
		status            int
	}{
		{"no token", "", `{"id":1}`, http.StatusUnauthorized},
		{"wrong token", "t0ken-Valuf", `{"id":1}`, http.StatusUnauthorized},
		{"a prefix of the token", "t0ken", `{"id":1}`, http.StatusUnauthorized},
		{"too large", token, `[` + strings.Repeat(`{"id":1},`, 10) + `{"id":1}]`, http.StatusRequestEntityTooLarge},
		{"not JSON", token, `{"id":`, http.StatusBadRequest},
		{"a bad line", token, "{\"id\":1}\n{\"id\":\"x\"}\n", http.StatusBadRequest},
		{"empty", token, ` `, http.StatusBadRequest},
		{"good", token, "{\"id\":1}\n{\"id\":2}", http.StatusOK},
	} {
		r := <-post(t, url, tc.token, tc.body, nil)
		if r.status != tc.status {
			t.Errorf("%s: answer %d %q, want %d", tc.name, r.status, r.body, tc.status)
		}
		if tc.status == http.StatusUnauthorized && strings.Contains(r.body, token) {
			t.Errorf("%s: the answer shows the token", tc.name)
		}
	}
	if got := obs.Values(); fmt.Sprint(got) != "[{1 false} {2 false}]" {
		t.Errorf("records %v: want only those of the good request", got)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(url, "/hook")+"/other", strings.NewReader(`{"id":1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", resp.StatusCode)
	}
}

// The zero Options listen on loopback only; bad options fail Start.
func TestDefaultsAndValidation(t *testing.T) {
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0"})
	start(t, src, weir.Config{Parallelism: 2})
	host, _, err := net.SplitHostPort(src.Addr())
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("listening on %q, want loopback", src.Addr())
	}
	if webhook.DefaultListen != "127.0.0.1:8080" {
		t.Errorf("DefaultListen %q, want loopback", webhook.DefaultListen)
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	bad := webhook.New(webhook.Options[event]{Listen: "nowhere", Path: "ingest", Queue: -1})
	weirtest.Observe(weir.FromSource(env, "hook", runtime.Source[event](bad), watermark.ForMonotonous[event]()))
	_, err = env.Start(context.Background())
	for _, want := range []string{`Options.Listen "nowhere"`, `Options.Path "ingest"`, "Options.Queue -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %v, want it to name %s", err, want)
		}
	}
}
