package httpsink_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/httpsink"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

type event struct {
	ID  int64 `json:"id"`
	Bad bool  `json:"bad,omitempty"`
}

// failAfterCheckpoint fails the job once, at the tenth record after the
// first checkpoint completed: the records between the checkpoint and the
// failure have been sent, and the restore sends them again.
type failAfterCheckpoint struct {
	runtime.Base[event]
	failed *atomic.Bool
	after  int // records seen since a checkpoint completed; -1 before
}

func (o *failAfterCheckpoint) Open(ctx *runtime.Context, out runtime.Output[event]) error {
	o.after = -1
	return o.Base.Open(ctx, out)
}

func (o *failAfterCheckpoint) ProcessRecord(r runtime.Record[event]) error {
	// The record goes on before the failure: the runtime may hand the
	// chain the rest of the source's poll after a failure, so a record
	// held back here would make the failed run's order differ from the
	// replay's (and the keys with it, S2).
	o.Out.Collect(r)
	if o.after >= 0 {
		o.after++
		if o.after == 10 && o.failed.CompareAndSwap(false, true) {
			return fmt.Errorf("injected failure at record %d", r.Value.ID)
		}
	}
	return nil
}

func (o *failAfterCheckpoint) EndInput() error { return nil }
func (o *failAfterCheckpoint) NotifyCheckpointComplete(int64) error {
	if o.after < 0 {
		o.after = 0
	}
	return nil
}
func (o *failAfterCheckpoint) NotifyCheckpointAborted(int64) {}

// A failure after a checkpoint makes the job restore it and send the
// records after it again, with the keys they had: the service that honours
// the keys takes every record once (S1, S2, S3), also with batches cut by
// the barrier, and with retried 500s and 429s on the way (S4).
func TestReplayAfterRestoreSendsTheSameKeys(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name   string
		batch  int
		format httpsink.Format
	}{{"one per request", 1, httpsink.FormatAuto}, {"batches of 7 in arrays", 7, httpsink.FormatArray}, {"batches of 10 in lines", 10, httpsink.FormatLines}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			svc.fail = func(w http.ResponseWriter, _ *http.Request, k int, _ []map[string]any) bool {
				switch k % 11 {
				case 3:
					w.WriteHeader(http.StatusInternalServerError)
					return true
				case 7:
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusTooManyRequests)
					return true
				}
				return false
			}
			var failed atomic.Bool
			src := &gatedSource{n: n, at: 100, gate: make(chan struct{})}
			env := weir.NewEnvironment(weir.Config{Parallelism: 1,
				Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()},
				Restart:    runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Delay: time.Millisecond}})
			events := weir.FromSource(env, "events", runtime.Source[event](src), watermark.ForMonotonous[event]()).UID("events")
			failing := weir.Transform(events, "fail-once", func() runtime.OneInputOperator[event, event] {
				return &failAfterCheckpoint{failed: &failed}
			})
			httpsink.Sink(failing, "to-service", httpsink.Options[event]{URL: svc.srv.URL, Batch: tc.batch, Format: tc.format,
				Retry: httpsink.Retry{InitialDelay: time.Millisecond}}).UID("to-service")
			job, err := env.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { job.Cancel(); job.Wait() }()
			weirtest.Eventually(t, "the source at its gate", func() bool { return src.waiting.Load() })
			if _, _, err := job.TriggerCheckpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			close(src.gate)
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}

			recs, requests, dups, conflicts := svc.snapshot()
			if !failed.Load() {
				t.Fatal("the injected failure did not happen")
			}
			seen := map[int64]int{}
			for _, r := range recs {
				seen[int64(r["id"].(float64))]++
			}
			for i := int64(0); i < n; i++ {
				if seen[i] != 1 {
					t.Errorf("record %d taken %d times, want once", i, seen[i])
				}
			}
			if len(recs) != n {
				t.Errorf("the service took %d records, want %d", len(recs), n)
			}
			if dups == 0 {
				t.Errorf("no request was sent again with a key seen before (%d requests): the replay after the restore changed the keys", requests)
			}
			if conflicts != 0 {
				t.Errorf("%d keys came back with another body", conflicts)
			}
			if got := counter(job, "to-service", "retries"); got == 0 {
				t.Error("no retry counted, though the service answered 500 and 429")
			}
		})
	}
}

// gatedSource emits the events 0..n-1 and waits before event at until
// gate is closed (so that a test can take a checkpoint there). It restores
// its position.
type gatedSource struct {
	n, at   int64
	gate    chan struct{}
	waiting atomic.Bool
}

func (s *gatedSource) CreateReader(ctx runtime.SourceContext) (runtime.Reader[event], error) {
	r := &gatedReader{s: s}
	items, err := ctx.Restored.List(runtime.SplitsList)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if _, err := fmt.Sscan(string(it), &r.next); err != nil {
			return nil, err
		}
	}
	return r, nil
}

type gatedReader struct {
	s    *gatedSource
	next int64
}

func (r *gatedReader) Poll(out runtime.SourceOutput[event]) (runtime.PollStatus, error) {
	for k := 0; k < 16 && r.next < r.s.n; k++ {
		if r.next == r.s.at {
			select {
			case <-r.s.gate:
			default:
				r.s.waiting.Store(true)
				return runtime.Wait, nil
			}
		}
		out.Collect(0, event{ID: r.next}, r.next)
		r.next++
	}
	if r.next >= r.s.n {
		out.FinishSplit(0)
		return runtime.Done, nil
	}
	return runtime.More, nil
}

func (r *gatedReader) Ready() <-chan struct{} { return r.s.gate }
func (r *gatedReader) Close() error           { return nil }
func (r *gatedReader) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{[]byte(fmt.Sprint(r.next))}, nil
}

// With FlushInterval a partly filled batch goes out without a barrier or
// the end of input.
func TestFlushInterval(t *testing.T) {
	svc := newService(t)
	src := &gatedSource{n: 10, at: 5, gate: make(chan struct{})} // stops at 5 and waits
	defer close(src.gate)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	events := weir.FromSource(env, "events", runtime.Source[event](src), watermark.ForMonotonous[event]())
	httpsink.Sink(events, "to-service", httpsink.Options[event]{URL: svc.srv.URL, Batch: 100, FlushInterval: 5 * time.Millisecond})
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	weirtest.Eventually(t, "5 records at the service", func() bool { return svc.count() == 5 })
	if _, requests, _, _ := svc.snapshot(); requests != 1 {
		t.Errorf("%d requests, want the 5 records in one", requests)
	}
}

// Answers 4xx other than 408 and 429 make the records of the request dead
// letters that name the status and the start of the body, counted; the
// job goes on and the other records are delivered (S5).
func TestRefusedRecordsAreDeadLetters(t *testing.T) {
	svc := newService(t)
	svc.fail = func(w http.ResponseWriter, _ *http.Request, _ int, recs []map[string]any) bool {
		for _, r := range recs {
			if r["bad"] == true {
				w.WriteHeader(http.StatusUnprocessableEntity)
				fmt.Fprintf(w, "field bad is set on %v", r["id"])
				return true
			}
		}
		return false
	}
	var in []event
	for i := range int64(20) {
		in = append(in, event{ID: i, Bad: i%5 == 2})
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "events", in, watermark.ForMonotonous[event]().WithTimestamp(func(e event, _ int64) (int64, bool) { return e.ID, true }))
	dead := weirtest.Observe(httpsink.Sink(src, "to-service", httpsink.Options[event]{URL: svc.srv.URL}))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := svc.count(); got != 16 {
		t.Errorf("the service took %d records, want 16", got)
	}
	dl := dead.Values()
	if len(dl) != 4 {
		t.Fatalf("%d dead letters, want 4: %v", len(dl), dl)
	}
	for _, d := range dl {
		if !d.Value.Bad || d.Status != http.StatusUnprocessableEntity || d.Key == "" ||
			!strings.Contains(d.Reason, "422") || !strings.Contains(d.Reason, fmt.Sprintf("field bad is set on %d", d.Value.ID)) {
			t.Errorf("dead letter %+v: want a bad record, status 422, its key, and the service's answer in the reason", d)
		}
	}
	if got := counter(job, "to-service", "deadLetters"); got != 4 {
		t.Errorf("deadLetters counter %d, want 4", got)
	}
}

// A job that keeps getting 503s fails once the attempts are used up, naming
// the URL and the last status; the Authorization header's value appears
// nowhere in the error (S4, S7).
func TestGivesUpAfterTheAttempts(t *testing.T) {
	svc := newService(t)
	svc.fail = func(w http.ResponseWriter, _ *http.Request, _ int, _ []map[string]any) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "down for maintenance")
		return true
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "events", []event{{ID: 1}}, watermark.ForMonotonous[event]().WithTimestamp(func(e event, _ int64) (int64, bool) { return e.ID, true }))
	httpsink.Sink(src, "to-service", httpsink.Options[event]{URL: svc.srv.URL, Header: http.Header{"Authorization": {"Bearer s3cr3t"}},
		Retry: httpsink.Retry{Attempts: 3, InitialDelay: time.Millisecond}})
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = job.Wait()
	if err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), svc.srv.URL) {
		t.Fatalf("job error %v: want giving up after 3 attempts, status 503, the URL", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("job error %v shows the Authorization header", err)
	}
	_, requests, _, _ := svc.snapshot()
	if requests != 3 {
		t.Errorf("%d requests, want 3", requests)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if got := svc.mu.headers[0].Get("Authorization"); got != "Bearer s3cr3t" {
		t.Errorf("Authorization header %q, want the configured one", got)
	}
}

// Bad options fail Start with one line naming each.
func TestOptionsAreValidatedAtStart(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "events", []event{{ID: 1}}, watermark.ForMonotonous[event]().WithTimestamp(func(e event, _ int64) (int64, bool) { return e.ID, true }))
	httpsink.Sink(src, "to-service", httpsink.Options[event]{URL: "ftp://x", Batch: -1, RecordsPerSecond: 5, Burst: 2})
	_, err := env.Start(context.Background())
	if err == nil {
		t.Fatal("Start accepted bad options")
	}
	for _, want := range []string{`Options.URL "ftp://x"`, "Options.Batch -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if err := (httpsink.Options[event]{URL: "http://x", Batch: 10, RecordsPerSecond: 5, Burst: 2}).Validate(); err == nil || !strings.Contains(err.Error(), "Burst 2 is smaller than Batch 10") {
		t.Errorf("Validate: %v, want the burst below the batch refused", err)
	}
}

func counter(job *runtime.Job, op, name string) int64 {
	var n int64
	for _, m := range job.Metrics().Snapshot() {
		if m.Operator == op && m.Name == name {
			n += m.Value
		}
	}
	return n
}
