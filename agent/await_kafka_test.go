package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// TestApprovalsFromKafka reads answers from a Kafka topic on the embedded
// broker (a second input of the agent, its offsets in the job's
// checkpoints). Job 1 waits for A's approval; B's approval arrives before
// B's input and is checkpointed in B's state; the job dies. A's approval
// is produced while the job is down. The restored job reads A's approval
// from the checkpointed offset, takes B's from the restored state when
// B's input comes, asks neither again, and reads no answer twice.
func TestApprovalsFromKafka(t *testing.T) {
	ctx := testCtx(t)
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"approvals": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(a Answer) {
		t.Helper()
		v, _ := json.Marshal(a)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "approvals", Key: []byte(a.Key), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ap := &approvals{}
	store := NewMemoryStore()
	build := func(restore string, in ...step[msg]) (*weir.Environment, *recorder[string]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Logger: quiet,
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(in...), watermark.NoWatermarks[msg]()).UID("src")
		ksrc := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{"approvals"}}, kafka.JSON[Answer]())
		ans := weir.FromSource(env, "approvals", ksrc, watermark.NoWatermarks[Answer]()).UID("approvals")
		out := ApplyWithAnswers[string, msg, string](weir.KeyBy(src, keyOfMsg), ans, answerKey, "agent", approvalAgent(ap),
			Options{Store: store.Factory()}).UID("agent")
		return env, record(out)
	}
	received := func(env *weir.Environment, n int64) {
		t.Helper()
		for env.Metrics().Sum("agent", "answersReceived") != n {
			select {
			case <-ctx.Done():
				t.Fatalf("answersReceived %d, want %d", env.Metrics().Sum("agent", "answersReceived"), n)
			case <-time.After(time.Millisecond):
			}
		}
	}

	env, _ := build("", rec(msg{Key: "A", Text: "refund-A"}, 1), pause[msg](make(chan struct{})))
	var pendingA PendingWait
	cp := checkpointAndCrash(t, ctx, env, func() {
		pendingA = waitPending(t, ctx, 1).PendingWaits[0]
		produce(Answer{Key: "B", Wait: "approve", Value: json.RawMessage(`"early-B"`)})
		received(env, 1)
	}, func() {})
	produce(Answer{Key: "A", Wait: "approve", ID: pendingA.ID, Value: json.RawMessage(`"yes-A"`)})

	env2, rc2 := build(cp, rec(msg{Key: "A", Text: "refund-A"}, 1), rec(msg{Key: "B", Text: "refund-B"}, 2), pause[msg](make(chan struct{})))
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs := rc2.waitFor(t, ctx, "both approvals", func(evs []recEvent[string]) bool { return len(values(evs)) == 2 })
	received(env2, 1)
	job2.Cancel()
	if err := job2.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	got := values(evs)
	slices.Sort(got)
	if want := []string{`approved:refund-A:"yes-A"`, `approved:refund-B:"early-B"`}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if asked := ap.askedIDs(); len(asked) != 2 || asked[0] != pendingA.ID {
		t.Fatalf("asked %q, want A's request (%s) once, then B's", asked, pendingA.ID)
	}
	if n := env2.Metrics().Sum("agent", "answersReceived"); n != 1 {
		t.Fatalf("the restored job received %d answers, want 1 (A's; B's came with the checkpoint)", n)
	}
}

// TestEndAnswersEndsBoundedJob: a bounded input beside an unbounded
// answers topic. The input ends while A's approval is pending; the job
// does not end then (A still waits), nor does the answers topic hold it
// once A is answered: EndAnswers is called after every subtask has
// finished, it stops the answers source, and the job ends with both
// outputs.
func TestEndAnswersEndsBoundedJob(t *testing.T) {
	endAnswersEndsBoundedJob(t, runtime.CheckpointConfig{})
}

// TestEndAnswersEndsBoundedJobWithCheckpoints is the same job with
// periodic checkpoints (found by the simulator, 2026-12-05). The bounded
// source, its input ended, sends the final watermark and waits for the
// final checkpoint before it ends its output (runtime's
// awaitFinalCheckpoint); the final checkpoint waits for every source, the
// answers source too, which ends only on EndAnswers. EndAnswers waited for
// the agent's input to end, and the job never ended; it now follows the
// end of event time on that input.
func TestEndAnswersEndsBoundedJobWithCheckpoints(t *testing.T) {
	endAnswersEndsBoundedJob(t, runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), Interval: 50 * time.Millisecond})
}

func endAnswersEndsBoundedJob(t *testing.T, cp runtime.CheckpointConfig) {
	ctx := testCtx(t)
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"approvals": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, MaxParallelism: 128, Logger: quiet, Checkpoint: cp})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "A", Text: "refund-A"}, 1), rec(msg{Key: "B", Text: "B1"}, 2)),
		watermark.NoWatermarks[msg]()).UID("src")
	stop := make(chan struct{})
	var ends atomic.Int32
	ksrc := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{"approvals"}, Stop: stop}, kafka.JSON[Answer]())
	ans := weir.FromSource(env, "approvals", ksrc, watermark.NoWatermarks[Answer]()).UID("approvals")
	out := ApplyWithAnswers[string, msg, string](weir.KeyBy(src, keyOfMsg), ans, answerKey, "agent", approvalAgent(&approvals{}),
		Options{EndAnswers: func() { ends.Add(1); close(stop) }}).UID("agent")
	rc := record(weir.Rebalance(out))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pending PendingWait
	for pending.ID == "" {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, s := range Status(qctx, "agent") {
			if len(s.PendingWaits) == 1 {
				pending = s.PendingWaits[0]
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			t.Fatal("A's wait did not start")
		case <-time.After(time.Millisecond):
		}
	}
	t.Logf("pending %+v", pending)
	if n := ends.Load(); n != 0 {
		t.Fatalf("EndAnswers called %d times while A's wait is pending, want 0", n)
	}
	v, _ := json.Marshal(Answer{Key: "A", Wait: "approve", ID: pending.ID, Value: json.RawMessage(`"yes"`)})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "approvals", Key: []byte("A"), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("the bounded job did not end cleanly: %v", err)
	}
	if n := ends.Load(); n != 1 {
		t.Fatalf("EndAnswers called %d times, want 1", n)
	}
	evs, _ := rc.snapshot()
	got := values(evs)
	slices.Sort(got)
	if want := []string{`approved:refund-A:"yes"`, "ok:B1"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
}
