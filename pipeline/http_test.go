package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/weirtest"
)

// keyedService honours idempotency keys, wants a bearer token, and
// refuses records with an amount over 100 (422).
type keyedService struct {
	mu      sync.Mutex
	keys    map[string]bool
	records []map[string]any
	noKey   int
}

func (s *keyedService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer sink-secret" {
		http.Error(w, "who are you", http.StatusUnauthorized)
		return
	}
	var recs []map[string]any
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m["amount"].(float64) > 100 {
			http.Error(w, "amount over the limit", http.StatusUnprocessableEntity)
			return
		}
		recs = append(recs, m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		s.noKey++
	}
	if !s.keys[key] {
		s.keys[key] = true
		s.records = append(s.records, recs...)
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *keyedService) taken() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.records...)
}

// TestWebhookToHTTPSink runs a pipeline file from a webhook source to an
// HTTP sink: every client gets its 200 only after a checkpoint completed,
// the service takes every good record once (with the configured header
// and a key), and the refused one is a dead letter in its output.
func TestWebhookToHTTPSink(t *testing.T) {
	t.Setenv("WEIR_TEST_HOOK_TOKEN", "hook-secret")
	t.Setenv("WEIR_TEST_SINK_TOKEN", "sink-secret")
	svc := &keyedService{keys: map[string]bool{}}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	dir := t.TempDir()
	src := fmt.Sprintf(`name: hooks
job:
  checkpoint: {interval: 20ms, dir: %s}
source:
  http: {listen: "127.0.0.1:0", path: /orders, token: "${WEIR_TEST_HOOK_TOKEN}", maxBody: 64KiB, queue: 100}
  timestamp: time
steps:
  - map: {set: {total: amount * 2}}
sink:
  http:
    url: %s
    format: lines
    headers: {Authorization: 'Bearer ${WEIR_TEST_SINK_TOKEN}'}
    timeout: 5s
    rateLimit: {requestsPerSecond: 1000}
    retries: {attempts: 5, initial: 1ms}
    deadLetters: refused
outputs:
  refused:
    file: {path: %s}
`, filepath.Join(dir, "ckpt"), srv.URL, filepath.Join(dir, "refused.jsonl"))
	spec, err := pipeline.Parse("hooks.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j, err := pipeline.Build(context.Background(), spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	job, err := j.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	url := j.WebhookURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/orders") {
		t.Fatalf("webhook URL %q", url)
	}
	completed := func() int {
		n := 0
		for _, c := range job.Checkpoints() {
			if c.Status == runtime.CheckpointCompleted {
				n++
			}
		}
		return n
	}
	bodies := []string{
		`{"id":1,"amount":10,"time":1000}`,
		`[{"id":2,"amount":20,"time":2000},{"id":3,"amount":30,"time":3000}]`,
		"{\"id\":4,\"amount\":40,\"time\":4000}\n{\"id\":5,\"amount\":500,\"time\":5000}\n",
	}
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(b))
			req.Header.Set("Authorization", "Bearer hook-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			done := completed()
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || done < 1 {
				t.Errorf("answer %d %q with %d checkpoints completed; want 200 after one", resp.StatusCode, body, done)
			}
		}()
	}
	wg.Wait()
	// A wrong token is refused.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":9,"amount":1,"time":1}`))
	req.Header.Set("Authorization", "Bearer nope")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v %v, want 401", resp, err)
	}
	weirtest.Eventually(t, "4 records at the service", func() bool { return len(svc.taken()) >= 4 })
	job.Cancel()
	if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	j.Close()
	ids := map[float64]int{}
	for _, r := range svc.taken() {
		ids[r["id"].(float64)]++
		if r["total"].(float64) != 2*r["amount"].(float64) {
			t.Errorf("record %v: the map step did not run", r)
		}
	}
	if len(ids) != 4 || ids[1] != 1 || ids[2] != 1 || ids[3] != 1 || ids[4] != 1 {
		t.Errorf("the service took %v; want ids 1-4 once each", ids)
	}
	if svc.noKey != 0 {
		t.Errorf("%d requests without an idempotency key", svc.noKey)
	}
	data, err := os.ReadFile(filepath.Join(dir, "refused.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("refused.jsonl: %q; want one dead letter", data)
	}
	var dl map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &dl); err != nil {
		t.Fatal(err)
	}
	if dl["status"] != float64(422) || !strings.Contains(dl["reason"].(string), "amount over the limit") || dl["value"].(map[string]any)["id"] != float64(5) {
		t.Errorf("dead letter %v: want record 5, status 422 and the service's answer", dl)
	}
}

// Bad http sources and sinks are refused with their position.
func TestBadHTTPPipelines(t *testing.T) {
	t.Setenv("WEIR_TEST_SET", "x")
	os.Unsetenv("WEIR_TEST_UNSET_HTTP")
	const sink = "sink:\n  stdout: {}\n"
	const source = "source:\n  generate: {count: 1, fields: {t: i}}\n  timestamp: t\n"
	for _, c := range []struct{ name, src, want string }{
		{"literal token", "source:\n  http: {token: hunter2}\n" + sink, "p.yaml:2:17: source.http.token: want ${ENV_VAR}"},
		{"unset token", "source:\n  http: {token: '${WEIR_TEST_UNSET_HTTP}'}\n" + sink, "p.yaml:2:17: source.http.token: environment variable WEIR_TEST_UNSET_HTTP is not set"},
		{"token and file", "source:\n  http: {token: '${WEIR_TEST_SET}', tokenFile: t}\n" + sink, "p.yaml:2:3: source.http: token and tokenFile both given"},
		{"bad listen", "source:\n  http: {listen: 8080}\n" + sink, "p.yaml:2:18: source.http.listen: got an integer, want a string"},
		{"bad listen text", "source:\n  http: {listen: localhost}\n" + sink, `p.yaml:2:18: source.http.listen: "localhost": want host:port`},
		{"bad path", "source:\n  http: {path: ingest}\n" + sink, `p.yaml:2:16: source.http.path: "ingest": want a URL path starting with /`},
		{"bad maxBody", "source:\n  http: {maxBody: lots}\n" + sink, `p.yaml:2:19: source.http.maxBody: "lots": want a positive number of bytes`},
		{"unknown source key", "source:\n  http: {port: 80}\n" + sink, `p.yaml:2:10: source.http: unknown key "port"`},
		{"no url", source + "sink:\n  http: {batch: 2}\n", `p.yaml:5:10: sink.http: missing key "url"`},
		{"bad url", source + "sink:\n  http: {url: 'ftp://x'}\n", `p.yaml:5:15: sink.http.url: "ftp://x": want an http:// or https:// URL`},
		{"bad format", source + "sink:\n  http: {url: 'http://x', format: csv}\n", `p.yaml:5:35: sink.http.format: "csv": want one of array, lines`},
		{"bad batch", source + "sink:\n  http: {url: 'http://x', batch: 0}\n", "p.yaml:5:34: sink.http.batch: 0 is out of range"},
		{"bad header", source + "sink:\n  http: {url: 'http://x', headers: {X-Token: '${WEIR_TEST_UNSET_HTTP}'}}\n", "p.yaml:5:36: sink.http.headers.X-Token: environment variable WEIR_TEST_UNSET_HTTP is not set"},
		{"bad rate", source + "sink:\n  http: {url: 'http://x', rateLimit: {requestsPerSecond: -1}}\n", "p.yaml:5:58: sink.http.rateLimit.requestsPerSecond: -1: want a positive number"},
		{"burst below batch", source + "sink:\n  http: {url: 'http://x', batch: 10, rateLimit: {recordsPerSecond: 5, burst: 2}}\n", "p.yaml:5:3: sink.http.rateLimit.burst 2 is smaller than batch 10"},
		{"bad key header", source + "sink:\n  http: {url: 'http://x', idempotencyKey: 'a b'}\n", `p.yaml:5:43: sink.http.idempotencyKey: "a b": want a header name`},
		{"unknown retries key", source + "sink:\n  http: {url: 'http://x', retries: {tries: 3}}\n", `p.yaml:5:37: sink.http.retries: unknown key "tries"`},
		{"dead letters unknown", source + "sink:\n  http: {url: 'http://x', deadLetters: lost}\n", `p.yaml:5:40: sink.http.deadLetters: unknown output "lost"`},
		{"dead letters to itself", source + "steps:\n  - tee: o\nsink:\n  stdout: {}\noutputs:\n  o:\n    http: {url: 'http://x', deadLetters: o}\n", `p.yaml:10:42: outputs.o.http.deadLetters: output "o" would feed itself`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pipeline.Parse("p.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("accepted; want %s", c.want)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got  %v\nwant %s...", err, c.want)
			}
		})
	}
}

// The clustered form refuses the webhook source, saying why.
func TestClusterRefusesTheWebhookSource(t *testing.T) {
	spec, err := pipeline.Parse("p.yaml", []byte("source:\n  http: {}\nsteps:\n  - keyBy: id\n  - window: {tumbling: 1m, aggregate: {n: count}}\nsink:\n  stdout: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = pipeline.CheckCluster(spec, pipeline.ClusterOptions{Group: "g"})
	if err == nil || !strings.Contains(err.Error(), "p.yaml:2:3: group mode: source.http: a webhook endpoint listens in one process") {
		t.Fatalf("CheckCluster: %v; want source.http refused", err)
	}
}

// TestWebhookToHTTPExample runs examples/pipelines/webhook-to-http.yaml:
// paid orders POSTed to the webhook reach the receiver once each, with the
// header and a key; the refused one is printed as a dead letter.
func TestWebhookToHTTPExample(t *testing.T) {
	var mu sync.Mutex
	got := map[float64]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer dev-token" || r.Header.Get("Idempotency-Key") == "" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		sc := bufio.NewScanner(r.Body)
		var ids []float64
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["amountCents"] == nil {
				http.Error(w, "bad record", http.StatusBadRequest)
				return
			}
			if m["amount"].(float64) < 0 {
				http.Error(w, "negative amount", http.StatusUnprocessableEntity)
				return
			}
			ids = append(ids, m["id"].(float64))
		}
		mu.Lock()
		for _, id := range ids {
			got[id]++
		}
		mu.Unlock()
	}))
	defer srv.Close()
	t.Setenv("RECEIVER_URL", srv.URL)
	t.Setenv("WEBHOOK_LISTEN", "127.0.0.1:0")
	t.Setenv("WEIR_CHECKPOINTS", t.TempDir())
	spec := parse(t, "webhook-to-http.yaml")
	var out lockedBuffer
	j, err := pipeline.Build(context.Background(), spec, pipeline.Options{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	job, err := j.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	body := `[{"id":1,"status":"paid","amount":12.5,"time":"2026-12-04T10:00:00Z"},
	  {"id":2,"status":"open","amount":3,"time":"2026-12-04T10:00:01Z"},
	  {"id":3,"status":"paid","amount":-1,"time":"2026-12-04T10:00:02Z"},
	  {"id":4,"status":"paid","amount":7,"time":"2026-12-04T10:00:03Z"}]`
	resp, err := http.Post(j.WebhookURL(), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d, want 200", resp.StatusCode)
	}
	// stdout is written as the watermark moves: a later order moves it.
	resp, err = http.Post(j.WebhookURL(), "application/json", strings.NewReader(`{"id":5,"status":"open","amount":1,"time":"2026-12-04T11:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The answer came after a checkpoint, so every paid order was sent:
	// it is at the receiver or a dead letter (the negative one, and any
	// order batched with it, S5), once.
	weirtest.Eventually(t, "the refused order printed", func() bool { return strings.Contains(out.String(), "negative amount") })
	dead := map[float64]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		dead[m["value"].(map[string]any)["id"].(float64)]++
	}
	mu.Lock()
	defer mu.Unlock()
	if dead[3] != 1 || got[3] != 0 || got[2]+dead[2] != 0 || got[1]+dead[1] != 1 || got[4]+dead[4] != 1 {
		t.Errorf("receiver took %v, dead letters %v; want 1 and 4 once at either, 3 refused, 2 filtered out", got, dead)
	}
}
