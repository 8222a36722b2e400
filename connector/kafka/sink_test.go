package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// readTopic reads every record of topic up to its end offsets (the last
// stable offsets under read_committed).
func readTopic(t *testing.T, addrs []string, topic string, committed bool) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out []*kgo.Record
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	sort.Strings(out)
	return out
}

// KS1: records carry key, headers and the event time.
func TestSinkAtLeastOnce(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 2})
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	in := []order{{"a", 1}, {"b", 2}, {"c", 3}}
	s := weir.FromSlice(env, "in", in, watermark.ForMonotonous[order]().
		WithTimestamp(func(o order, _ int64) (int64, bool) { return 1_000_000 + int64(o.Qty), true }))
	Sink(s, "kafka-out", SinkOptions[order]{Brokers: b.Addrs(), Topic: "out",
		Serialize: func(o order) (*kgo.Record, error) {
			r, err := SerializeJSON(func(o order) []byte { return []byte(o.ID) })(o)
			if r != nil {
				r.Headers = []kgo.RecordHeader{{Key: "qty", Value: []byte(fmt.Sprint(o.Qty))}}
			}
			return r, err
		}})
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	recs := readTopic(t, b.Addrs(), "out", false)
	if len(recs) != 3 {
		t.Fatalf("read %d records, want 3", len(recs))
	}
	for _, r := range recs {
		var o order
		if err := json.Unmarshal(r.Value, &o); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != o.ID || len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(o.Qty) ||
			r.Timestamp.UnixMilli() != 1_000_000+int64(o.Qty) {
			t.Fatalf("record %+v: want key = id, a qty header and the event time as timestamp", r)
		}
	}
}

// KS2: a completed checkpoint means every record before its barrier is in
// Kafka.
func TestSinkFlushesOnCheckpoint(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 1})
	cl := client(t, b)
	for i := range 200 {
		produce(t, cl, rec("in", int32(i%2), int64(i), fmt.Sprint(i)))
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}}, String())
	Sink(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()), "out",
		SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil),
			ClientOptions: []kgo.Opt{kgo.ProducerLinger(50 * time.Second)}}) // only a flush sends
	job, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "the catch-up", src.CaughtUp)
	if _, err := job.TriggerSavepoint(testCtx(t), t.TempDir()+"/sp"); err != nil {
		t.Fatal(err)
	}
	if n := endOffsets(t, cl, "out")[0]; n != 200 {
		t.Fatalf("after the savepoint the topic holds %d records, want all 200", n)
	}
	stop()
}

// KS3: transactions commit when the checkpoint completes; read_committed
// readers see nothing before and everything after.
func TestExactlyOnceCommitsOnCheckpoint(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 2})
	cl := client(t, b)
	for i := range 100 {
		produce(t, cl, rec("in", int32(i%2), int64(i), fmt.Sprint(i)))
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}}, String())
	ExactlyOnceSink(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()), "out",
		SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil), TransactionalIDPrefix: "eo-test"})
	job, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "the catch-up", src.CaughtUp)
	weirtest.Eventually(t, "the records written (uncommitted)", func() bool { return len(readTopic(t, b.Addrs(), "out", false)) == 100 })
	if got := readTopic(t, b.Addrs(), "out", true); len(got) != 0 {
		t.Fatalf("read_committed sees %d records before any checkpoint", len(got))
	}
	if _, err := job.TriggerSavepoint(testCtx(t), t.TempDir()+"/sp"); err != nil {
		t.Fatal(err)
	}
	weirtest.Eventually(t, "the commit", func() bool { return len(readTopic(t, b.Addrs(), "out", true)) == 100 })
	stop()
}

func newTxnSink(t *testing.T, addrs []string, subtask int) *txnSink[string] {
	t.Helper()
	o, err := SinkOptions[string]{Brokers: addrs, Topic: "out", Serialize: SerializeString(nil),
		TransactionalIDPrefix: "p"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	s := &txnSink[string]{opts: o, ctx: &runtime.Context{Subtask: subtask, Parallelism: 2}, admin: admin}
	t.Cleanup(func() { s.Close() })
	return s
}

// KS4, KS5: a pre-committed transaction is committed by another process
// from what the checkpoint holds (twice is fine); an open one is aborted
// by Recover, and does not hold read_committed readers back.
func TestResumeAndAbortTransactionsElsewhere(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 1})
	a := newTxnSink(t, b.Addrs(), 0)
	if err := a.Recover(nil, false); err != nil {
		t.Fatal(err)
	}
	write := func(s *txnSink[string], t1 *Txn, vs ...string) {
		for _, v := range vs {
			if err := s.Write(t1, runtime.Record[string]{Value: v, Timestamp: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pre, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	write(a, pre, "p1", "p2", "p3")
	if err := a.PreCommit(pre); err != nil {
		t.Fatal(err)
	}
	open, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	write(a, open, "o1", "o2")
	if err := a.PreCommit(open); err != nil { // flushed, as at a crash after it
		t.Fatal(err)
	}
	// The checkpoint, as JSON; then the process dies (its producers
	// close without ending their transactions).
	js := func(x *Txn) *Txn {
		bs, _ := json.Marshal(x)
		var y Txn
		if err := json.Unmarshal(bs, &y); err != nil {
			t.Fatal(err)
		}
		return &y
	}
	preJ, openJ := js(pre), js(open)
	a.Close()
	if got := readTopic(t, b.Addrs(), "out", true); len(got) != 0 {
		t.Fatalf("read_committed sees %v before the commit", values(got))
	}

	r := newTxnSink(t, b.Addrs(), 0)
	if err := r.Commit(preJ); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(preJ); err != nil {
		t.Fatalf("second commit of the same transaction: %v (Commit must be idempotent)", err)
	}
	if err := r.Recover(openJ, true); err != nil {
		t.Fatal(err)
	}
	if got := values(readTopic(t, b.Addrs(), "out", true)); fmt.Sprint(got) != "[p1 p2 p3]" {
		t.Fatalf("read_committed sees %v, want the pre-committed [p1 p2 p3] only", got)
	}
	// The aborted transaction no longer holds the last stable offset.
	lso := committedEnd(t, b.Addrs(), "out")
	hwm := endOffsets(t, client(t, b), "out")[0]
	if lso != hwm {
		t.Fatalf("last stable offset %d < high watermark %d: the open transaction was not aborted", lso, hwm)
	}
	// The restored subtask goes on with the aborted id.
	next, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if next.TransactionalID != openJ.TransactionalID {
		t.Fatalf("next transaction %s, want the aborted id %s reused", next.TransactionalID, openJ.TransactionalID)
	}
}

func committedEnd(t *testing.T, addrs []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := kadmClient(cl).ListCommittedOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := l.Lookup(topic, 0)
	return o.Offset
}

var errInjected = errors.New("injected failure")

// KS3-KS5 end to end: a job fails in the middle, restarts from its latest
// checkpoint, and read_committed readers see every input record exactly
// once.
func TestExactlyOnceAcrossFailures(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 3, "out": 2})
	cl := client(t, b)
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, rec("in", int32(i%3), int64(i), fmt.Sprintf("v%03d", i)))
	}
	produce(t, cl, recs...)
	cpDir := t.TempDir()
	run := func(attempt int) error {
		cfg := weir.Config{Parallelism: 2, Logger: quiet,
			Checkpoint: runtime.CheckpointConfig{Interval: 20 * time.Millisecond, Dir: cpDir}}
		if dir, _, err := checkpoint.Latest(cpDir); err == nil {
			cfg.Checkpoint.RestoreFrom = dir
		}
		env := weir.NewEnvironment(cfg)
		src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}, RecordsPerPoll: 7}, String())
		var seen atomic.Int64
		s := weir.MapErr(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()).UID("in"), "fail",
			func(v string) (string, error) {
				n := seen.Add(1)
				if n%2 == 0 {
					time.Sleep(time.Millisecond) // let checkpoints happen mid-stream
				}
				if attempt == 1 && n == 150 {
					return "", errInjected
				}
				return v, nil
			})
		ExactlyOnceSink(s, "out", SinkOptions[string]{Brokers: b.Addrs(), Topic: "out",
			Serialize: SerializeString(nil), TransactionalIDPrefix: "crash"}).UID("out")
		job, err := env.Start(context.Background())
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- job.Wait() }()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case err := <-done:
				return err
			case <-deadline:
				job.Cancel()
				return errors.New("timed out")
			case <-time.After(50 * time.Millisecond):
				if attempt > 1 && len(readTopic(t, b.Addrs(), "out", true)) >= 300 {
					job.Cancel()
					<-done
					return nil
				}
			}
		}
	}
	if err := run(1); !errors.Is(err, errInjected) {
		t.Fatalf("attempt 1: %v, want the injected failure", err)
	}
	_, id, err := checkpoint.Latest(cpDir)
	if err != nil {
		t.Fatalf("attempt 1 completed no checkpoint before failing: %v", err)
	}
	t.Logf("attempt 1 failed after checkpoint %d; %d records committed", id, len(readTopic(t, b.Addrs(), "out", true)))
	if err := run(2); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	got := values(readTopic(t, b.Addrs(), "out", true))
	if len(got) != 300 {
		t.Fatalf("read_committed sees %d records, want 300", len(got))
	}
	for i, v := range got {
		if v != fmt.Sprintf("v%03d", i) {
			t.Fatalf("record %d is %s: duplicates or gaps in %v", i, v, got)
		}
	}
}
