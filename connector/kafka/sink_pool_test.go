package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// hwm is the sum of the high watermarks of topic's partitions (records and
// transaction markers).
func hwm(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	var n int64
	for _, o := range endOffsets(t, cl, topic) {
		n += o
	}
	return n
}

// settled tells whether no transaction is open on topic: every partition's
// last stable offset is its high watermark.
func settled(t *testing.T, cl *kgo.Client, topic string) bool {
	t.Helper()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	end := endOffsets(t, cl, topic)
	ok := true
	lso.Each(func(o kadm.ListedOffset) { ok = ok && o.Offset == end[o.Partition] })
	return ok
}

// written tells whether topic holds (read_uncommitted, so aborted records
// too) at least n records of each of the values.
func written(t *testing.T, addrs []string, topic string, n int, vs ...string) bool {
	t.Helper()
	count := map[string]int{}
	for _, r := range readTopic(t, addrs, topic, false) {
		count[string(r.Value)]++
	}
	for _, v := range vs {
		if count[v] < n {
			return false
		}
	}
	return true
}

// transactionalIDs lists the transactional ids the broker knows with the
// prefix.
func transactionalIDs(t *testing.T, cl *kgo.Client, prefix string) []string {
	t.Helper()
	l, err := kadm.NewClient(cl).ListTransactions(testCtx(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range l.TransactionalIDs() {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	return ids
}

// KS6: checkpoint after checkpoint, each subtask reuses a few
// transactional ids instead of one new id per checkpoint.
func TestExactlyOnceSinkReusesTransactionalIDs(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 2})
	cl := client(t, b)
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet,
		Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}}, String())
	ExactlyOnceSink(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()), "out",
		SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil), TransactionalIDPrefix: "reuse"})
	job, stop := weirtest.Start(t, env)
	const rounds = 12
	for i := range rounds {
		// One record per source partition, so both sink subtasks write
		// in every transaction.
		before := hwm(t, cl, "out")
		produce(t, cl, rec("in", 0, int64(i), fmt.Sprint("a", i)), rec("in", 1, int64(i), fmt.Sprint("b", i)))
		weirtest.Eventually(t, "the round's records written", func() bool { return hwm(t, cl, "out") >= before+2 })
		if _, _, err := job.TriggerCheckpoint(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		weirtest.Eventually(t, "the round's commit", func() bool { return settled(t, cl, "out") })
	}
	stop()
	if got := readTopic(t, b.Addrs(), "out", true); len(got) != 2*rounds {
		t.Fatalf("read_committed sees %d records, want %d", len(got), 2*rounds)
	}
	ids := transactionalIDs(t, cl, "reuse-")
	t.Logf("%d checkpoints used %d transactional ids: %v", rounds, len(ids), ids)
	// Per subtask: the open transaction, the pre-committed one, the
	// committed one the latest checkpoint lists, and maybe one more while
	// a notification is late.
	if len(ids) > 2*4 {
		t.Fatalf("%d checkpoints of 2 subtasks used %d transactional ids, want at most 8: ids are not reused", rounds, len(ids))
	}
}

// snapshotGate is an operator whose snapshot fails while refuse is set: a
// checkpoint that every operator before it has taken but that never
// completes, as when the job dies between the barrier and the completion.
type snapshotGate struct {
	runtime.Base[struct{}]
	refuse *atomic.Bool
}

func (g *snapshotGate) ProcessRecord(runtime.Record[struct{}]) error { return nil }

func (g *snapshotGate) EndInput() error { return nil }

func (g *snapshotGate) SnapshotState(*runtime.SnapshotWriter) error {
	if g.refuse.Load() {
		return errors.New("snapshot gate: checkpoint refused")
	}
	return nil
}

// classicTransactions caps the protocol below KIP-890 part 2, as brokers
// before Kafka 4 (or with transaction.version below 2) speak it: a producer
// keeps its epoch from one transaction to the next.
func classicTransactions() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return kgo.MaxVersions(v)
}

// KS6: the id of a transaction committed after checkpoint c is not reused
// before a later checkpoint completes. Here checkpoint c1 completes and
// commits A; checkpoint c2 is taken by the sink (B pre-committed, a new
// transaction begun, which then receives C) but never completes; the job
// dies. The restore from c1 commits A again by producer id and epoch: had
// C's transaction reused A's id (same producer id, and without KIP-890
// part 2 the same epoch), that would commit C's records, which the restored
// job then writes again (or, with KIP-890 part 2, the commit would be
// refused and the restore fail).
func TestExactlyOnceSinkReusesNoIDARestoreCommits(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []kgo.Opt
	}{{"kip890", nil}, {"classic", []kgo.Opt{classicTransactions()}}} {
		t.Run(mode.name, func(t *testing.T) {
			b := startBroker(t, map[string]int32{"in": 1, "out": 1})
			cl := client(t, b)
			cpDir := t.TempDir()
			var refuse atomic.Bool
			start := func(restore string) *runtime.Job {
				env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet,
					Checkpoint: runtime.CheckpointConfig{Dir: cpDir, RestoreFrom: restore}})
				src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}}, String())
				out := ExactlyOnceSink(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()).UID("in"), "out",
					SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil),
						TransactionalIDPrefix: "hazard", ClientOptions: mode.opts}).UID("out")
				weir.Transform(out, "gate", func() runtime.OneInputOperator[struct{}, struct{}] {
					return &snapshotGate{refuse: &refuse}
				}).UID("gate")
				job, err := env.Start(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return job
			}
			write := func(vs ...string) {
				before := hwm(t, cl, "out")
				for _, v := range vs {
					produce(t, cl, rec("in", 0, 1, v))
				}
				weirtest.Eventually(t, "the records written", func() bool { return hwm(t, cl, "out") >= before+int64(len(vs)) })
			}

			job := start("")
			write("a1", "a2")
			if _, _, err := job.TriggerCheckpoint(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			weirtest.Eventually(t, "A's commit", func() bool { return settled(t, cl, "out") })
			write("b1", "b2")
			refuse.Store(true)
			if _, _, err := job.TriggerCheckpoint(testCtx(t)); err == nil {
				t.Fatal("checkpoint 2 completed; the gate should have refused it")
			}
			write("c1", "c2")
			job.Cancel()
			if err := job.Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("run 1: %v", err)
			}

			dir, id, err := checkpoint.Latest(cpDir)
			if err != nil || id != 1 {
				t.Fatalf("latest checkpoint %d (%v), want 1", id, err)
			}
			refuse.Store(false)
			job = start(dir)
			defer func() { job.Cancel(); job.Wait() }()
			// Restored: A committed again, B and C's transactions
			// aborted, and B and C written again, uncommitted.
			weirtest.Eventually(t, "the replay", func() bool {
				select {
				case <-job.Done():
					t.Fatalf("the restored job failed: %v", job.Wait())
				default:
				}
				return written(t, b.Addrs(), "out", 2, "b1", "b2", "c1", "c2")
			})
			if got := values(readTopic(t, b.Addrs(), "out", true)); fmt.Sprint(got) != "[a1 a2]" {
				t.Fatalf("after the restore read_committed sees %v, want [a1 a2]: the restore committed records of another transaction", got)
			}
			if _, _, err := job.TriggerCheckpoint(testCtx(t)); err != nil {
				t.Fatalf("checkpoint after the restore: %v", err)
			}
			weirtest.Eventually(t, "the commit", func() bool { return settled(t, cl, "out") })
			if got := values(readTopic(t, b.Addrs(), "out", true)); fmt.Sprint(got) != "[a1 a2 b1 b2 c1 c2]" {
				t.Fatalf("read_committed sees %v, want [a1 a2 b1 b2 c1 c2] once each", got)
			}
		})
	}
}

func newTxnSinkAt(t *testing.T, addrs []string, par, subtask int, opts ...kgo.Opt) *txnSink[string] {
	t.Helper()
	s := newTxnSink(t, addrs, subtask)
	s.ctx = &runtime.Context{Subtask: subtask, Parallelism: par}
	s.opts.ClientOptions = opts
	return s
}

func writeTxn(t *testing.T, s *txnSink[string], x *Txn, vs ...string) {
	t.Helper()
	for _, v := range vs {
		if err := s.Write(x, runtime.Record[string]{Value: v, Timestamp: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// asStored round-trips x through JSON, as a checkpoint does.
func asStored(t *testing.T, x *Txn) *Txn {
	t.Helper()
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var y Txn
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return &y
}

// KS5, KS6 across a change of parallelism: a subtask of the new
// parallelism that receives the open transaction of an old subtask fences
// that subtask's pool, every id but the pre-committed one, which another
// new subtask commits (and may commit again).
func TestExactlyOnceSinkRescaleFencesOldPool(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 1})
	cl := client(t, b)
	old := newTxnSinkAt(t, b.Addrs(), 2, 1)
	if err := old.Recover(nil, false); err != nil {
		t.Fatal(err)
	}
	// Three checkpoints: the first transaction committed and released,
	// the second committed (the latest checkpoint lists it no more but an
	// older one does), the third pre-committed, the fourth open.
	var txns []*Txn
	for i := range 4 {
		x, err := old.Begin()
		if err != nil {
			t.Fatal(err)
		}
		writeTxn(t, old, x, fmt.Sprint("v", i))
		if i < 3 {
			if err := old.PreCommit(x); err != nil {
				t.Fatal(err)
			}
		}
		if i == 1 {
			if err := old.Commit(txns[0]); err != nil {
				t.Fatal(err)
			}
		}
		if i == 2 {
			if err := old.Release(txns[0]); err != nil {
				t.Fatal(err)
			}
			if err := old.Commit(txns[1]); err != nil {
				t.Fatal(err)
			}
		}
		txns = append(txns, x)
	}
	open := asStored(t, txns[3])
	pre := asStored(t, txns[2])
	if open.Pool != 3 || fmt.Sprint(open.Pending) != "[2]" || open.Seq != 0 {
		t.Fatalf("open transaction %+v: want id 0 of a pool of 3, id 2 pending", open)
	}
	old.Close() // the process dies

	// Parallelism 1 now; the items are dealt to one subtask, but commit
	// and recovery are done by different sinks to show they need not
	// agree on an order.
	committer := newTxnSinkAt(t, b.Addrs(), 1, 0)
	recoverer := newTxnSinkAt(t, b.Addrs(), 1, 0)
	if err := recoverer.Recover(open, true); err != nil {
		t.Fatal(err)
	}
	if err := committer.Commit(pre); err != nil {
		t.Fatalf("commit of the pre-committed transaction after the old pool was fenced: %v", err)
	}
	if err := committer.Commit(pre); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if got := values(readTopic(t, b.Addrs(), "out", true)); fmt.Sprint(got) != "[v0 v1 v2]" {
		t.Fatalf("read_committed sees %v, want [v0 v1 v2]", got)
	}
	if !settled(t, cl, "out") {
		t.Fatal("a transaction is still open: the old subtask's open transaction was not aborted")
	}
	// The new subtask's own pool starts at id 0 of parallelism 1.
	x, err := recoverer.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if x.TransactionalID != "p-1-0-pool-0" {
		t.Fatalf("first transaction after the rescale on %s, want p-1-0-pool-0", x.TransactionalID)
	}
}

// KS5: a restore from a checkpoint written before the pool (one
// transactional id per checkpoint) aborts the transaction it lists as open.
func TestExactlyOnceSinkRecoversLegacyCheckpoint(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 1})
	cl := client(t, b)
	lingering, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.TransactionalID("p-2-0-7"), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := lingering.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := lingering.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lingering.Close()
	if settled(t, cl, "out") {
		t.Fatal("the lingering transaction is not open")
	}
	var open Txn
	if err := json.Unmarshal([]byte(`{"transactionalId":"p-2-0-7","parallelism":2,"subtask":0,"seq":7,"producerId":0,"epoch":0,"empty":false}`), &open); err != nil {
		t.Fatal(err)
	}
	s := newTxnSinkAt(t, b.Addrs(), 2, 0)
	if err := s.Recover(&open, true); err != nil {
		t.Fatal(err)
	}
	if !settled(t, cl, "out") {
		t.Fatal("the transaction open in the old checkpoint was not aborted")
	}
	if x, err := s.Begin(); err != nil || x.TransactionalID != "p-2-0-pool-0" {
		t.Fatalf("first transaction %+v (%v), want p-2-0-pool-0", x, err)
	}
}

// KS5 through a job rescaled from 2 subtasks to 1: the new subtask
// receives both old open transactions and aborts both, although only one
// old subtask had a pre-committed transaction (the other's was empty).
func TestExactlyOnceSinkRescaleAbortsEveryOpenTransaction(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 1})
	cl := client(t, b)
	cpDir := t.TempDir()
	start := func(par int, restore string) *runtime.Job {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: quiet,
			Checkpoint: runtime.CheckpointConfig{Dir: cpDir, RestoreFrom: restore}})
		src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"in"}}, String())
		ExactlyOnceSink(weir.FromSource(env, "in", src, watermark.ForMonotonous[string]()).UID("in"), "out",
			SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil),
				TransactionalIDPrefix: "rescale"}).UID("out")
		job, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { job.Cancel(); job.Wait() })
		return job
	}
	job := start(2, "")
	// Only one partition, so only one sink subtask, has records.
	produce(t, cl, rec("in", 0, 1, "a"))
	weirtest.Eventually(t, "a written", func() bool { return hwm(t, cl, "out") >= 1 })
	if _, _, err := job.TriggerCheckpoint(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	weirtest.Eventually(t, "a committed", func() bool { return settled(t, cl, "out") })
	// Then both, and the job dies with two transactions open.
	before := hwm(t, cl, "out")
	produce(t, cl, rec("in", 0, 2, "b"), rec("in", 1, 2, "c"))
	weirtest.Eventually(t, "b and c written", func() bool { return hwm(t, cl, "out") >= before+2 })
	job.Cancel()
	job.Wait()

	dir, _, err := checkpoint.Latest(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	job = start(1, dir)
	weirtest.Eventually(t, "the replay", func() bool { return written(t, b.Addrs(), "out", 2, "b", "c") })
	if _, _, err := job.TriggerCheckpoint(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	weirtest.Eventually(t, "no transaction left open", func() bool { return settled(t, cl, "out") })
	if got := values(readTopic(t, b.Addrs(), "out", true)); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("read_committed sees %v, want [a b c]", got)
	}
}
