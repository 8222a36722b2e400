package kafka

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// recOut is a runtime.SourceOutput that records what a reader does, so
// tests can drive a reader directly against the broker and see exactly
// which splits it adds, marks idle and emits.
type recOut[T any] struct {
	events []string // "add 0", "idle 0 true", "rec 0 <value>", "dead 0 <reason>"
	vals   []T
	dead   []runtime.DeadLetter
}

func (o *recOut[T]) Collect(split int, v T, ts int64) {
	o.events = append(o.events, fmt.Sprintf("rec %d", split))
	o.vals = append(o.vals, v)
}
func (o *recOut[T]) AddSplit(split int) { o.events = append(o.events, fmt.Sprintf("add %d", split)) }
func (o *recOut[T]) FinishSplit(split int) {
	o.events = append(o.events, fmt.Sprintf("finish %d", split))
}
func (o *recOut[T]) SetSplitIdle(split int, idle bool) {
	o.events = append(o.events, fmt.Sprintf("idle %d %v", split, idle))
}
func (o *recOut[T]) EmitWatermark(split int, ts int64) {}
func (o *recOut[T]) DeadLetter(d runtime.DeadLetter) {
	o.events = append(o.events, fmt.Sprintf("dead %d", d.Split))
	o.dead = append(o.dead, d)
}

func (o *recOut[T]) has(ev string) bool { return slices.Contains(o.events, ev) }

// driven is a reader under test with its recording output.
type driven[T any] struct {
	r   runtime.Reader[T]
	out *recOut[T]
}

// readers creates every subtask's reader of src, as the runtime would.
func readers[T any](t *testing.T, src *Source[T], par int, restored *runtime.Restored) []*driven[T] {
	t.Helper()
	var out []*driven[T]
	for i := range par {
		r, err := src.CreateReader(runtime.SourceContext{Name: "kafka", Subtask: i, Parallelism: par,
			Clock: clock.Real, Logger: testLogger, Restored: restored})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		out = append(out, &driven[T]{r: r, out: &recOut[T]{}})
	}
	return out
}

// pollUntil polls the readers (as their subtasks would, without blocking
// on Ready) until cond holds.
func pollUntil[T any](t *testing.T, what string, rs []*driven[T], cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, d := range rs {
			if _, err := d.r.Poll(d.out); err != nil {
				t.Fatalf("poll: %v", err)
			}
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func statusOf[T any](src *Source[T], topic string, p int32) PartitionStatus {
	for _, s := range src.Status() {
		if s.Topic == topic && s.Partition == p {
			return s
		}
	}
	return PartitionStatus{}
}

func txnClient(t *testing.T, b interface{ Addrs() []string }, id string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func inTxn(t *testing.T, cl *kgo.Client, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// K5: a transactional producer leaves a commit marker after its last
// record, so lastRecordOffset+1 < end; the consumer position passes the
// marker and the partition catches up. Under read_committed the end is the
// last stable offset and aborted records are never delivered.
func TestCatchUpPastTransactionMarkers(t *testing.T) {
	for _, readCommitted := range []bool{false, true} {
		t.Run(fmt.Sprintf("readCommitted=%v", readCommitted), func(t *testing.T) {
			b := startBroker(t, map[string]int32{"tx": 1})
			cl := txnClient(t, b, "producer")
			var recs []*kgo.Record
			for i := range 5 {
				recs = append(recs, rec("tx", 0, int64(i), fmt.Sprint("c", i)))
			}
			inTxn(t, cl, true, recs...)
			if readCommitted {
				inTxn(t, cl, false, rec("tx", 0, 9, "aborted1"), rec("tx", 0, 9, "aborted2"))
			}
			iso := kgo.ReadUncommitted()
			if readCommitted {
				iso = kgo.ReadCommitted()
			}
			last := lastRecordOffsets(t, b, "tx", iso)[0]
			end := endOffsets(t, client(t, b), "tx")[0]
			if last+1 >= end {
				t.Fatalf("precondition: last record offset %d + 1 >= end %d; the test must have markers after the last record", last, end)
			}
			src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"tx"}, ReadCommitted: readCommitted}, String())
			rs := readers(t, src, 1, nil)
			pollUntil(t, "catch-up", rs, func() bool { return statusOf(src, "tx", 0).CaughtUp })
			st := statusOf(src, "tx", 0)
			if st.End != end || st.Position < end {
				t.Fatalf("status %+v: want end %d and position >= end", st, end)
			}
			pollUntil(t, "idle", rs, func() bool { return rs[0].out.has("idle 0 true") })
			if got := rs[0].out.vals; fmt.Sprint(got) != "[c0 c1 c2 c3 c4]" {
				t.Fatalf("values %v, want the 5 committed ones", got)
			}
		})
	}
}

// K5: compaction leaves offsets no record carries, here at the tail (an
// aborted transaction whose data the cleaner removed, followed by its
// marker) and in the middle (superseded keys).
func TestCatchUpPastCompactionGaps(t *testing.T) {
	b := startBroker(t, nil)
	if err := b.CreateTopic("compacted", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	plain := client(t, b)
	// Recent timestamps: Compact also applies retention (7 days).
	now := time.Now().UnixMilli()
	produce(t, plain, rec("compacted", 0, now, "k1"))
	produce(t, plain, rec("compacted", 0, now, "k1")) // supersedes offset 0
	produce(t, plain, rec("compacted", 0, now, "k2"))
	tx := txnClient(t, b, "compactor")
	inTxn(t, tx, false, rec("compacted", 0, now, "k3"), rec("compacted", 0, now, "k4"))
	b.Cluster().Compact()

	last := lastRecordOffsets(t, b, "compacted", kgo.ReadUncommitted())[0]
	end := endOffsets(t, plain, "compacted")[0]
	if last+1 >= end {
		t.Fatalf("precondition: last record offset %d + 1 >= end %d after compaction", last, end)
	}
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"compacted"}}, String())
	rs := readers(t, src, 1, nil)
	pollUntil(t, "catch-up", rs, func() bool { return rs[0].out.has("idle 0 true") })
	if got := fmt.Sprint(rs[0].out.vals); got != "[k1 k2]" {
		t.Fatalf("values %s, want [k1 k2] (the survivors of compaction)", got)
	}
	if st := statusOf(src, "compacted", 0); st.Position < end {
		t.Fatalf("status %+v: position below end %d", st, end)
	}
}

// K5, K7: deleted records. A partition whose records were all deleted
// starts at its end: caught up at once, without a record. A position
// below the log start (a committed or checkpointed offset the broker no
// longer has) jumps to the log start and is checked again.
func TestCatchUpAfterDeletedRecords(t *testing.T) {
	b := startBroker(t, map[string]int32{"d": 2})
	cl := client(t, b)
	for i := range 10 {
		produce(t, cl, rec("d", 0, int64(i), fmt.Sprint("p0-", i)), rec("d", 1, int64(i), fmt.Sprint("p1-", i)))
	}
	adm := kadm.NewClient(cl)
	var del kadm.Offsets
	del.AddOffset("d", 0, 10, -1) // everything
	del.AddOffset("d", 1, 6, -1)
	if _, err := adm.DeleteRecords(testCtx(t), del); err != nil {
		t.Fatal(err)
	}
	var commit kadm.Offsets
	commit.AddOffset("d", 1, 2, -1) // below the new log start 6
	if err := adm.CommitAllOffsets(testCtx(t), "g", commit); err != nil {
		t.Fatal(err)
	}
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"d"}, Group: "g",
		Start: StartCommitted(StartEarliest())}, String())
	rs := readers(t, src, 1, nil)
	pollUntil(t, "catch-up of both partitions", rs, func() bool {
		return rs[0].out.has("idle 0 true") && rs[0].out.has("idle 1 true")
	})
	p0, p1 := statusOf(src, "d", 0), statusOf(src, "d", 1)
	if p0.Start != 10 || p0.End != 10 || !p0.CaughtUp {
		t.Errorf("partition 0 %+v: want start = end = 10, caught up at once", p0)
	}
	if p1.Start != 2 || p1.Resets != 1 || p1.Position != 10 {
		t.Errorf("partition 1 %+v: want start 2 (committed), one reset to the log start, position 10", p1)
	}
	if got := fmt.Sprint(rs[0].out.vals); got != "[p1-6 p1-7 p1-8 p1-9]" {
		t.Errorf("values %s, want the 4 records left in partition 1", got)
	}
}

// K5: empty partitions are caught up at once; K6: a topic is idle only
// when every partition is caught up, across subtasks.
func TestTopicIdleOnlyWhenEveryPartitionCaughtUp(t *testing.T) {
	b := startBroker(t, map[string]int32{"t": 2, "empty": 3})
	cl := client(t, b)
	for i := range 20 {
		produce(t, cl, rec("t", 1, int64(i), fmt.Sprint(i)))
	}
	gate := make(chan struct{})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t", "empty"},
		BeforeStart: holdUntil(gate, 1)}, String())
	// Sorted: empty/0 empty/1 empty/2 t/0 t/1 -> subtask 0: empty/0,
	// empty/2, t/1 (splits 0,1,2); subtask 1: empty/1, t/0 (splits 0,1).
	rs := readers(t, src, 2, nil)
	pollUntil(t, "subtask 0 caught up", rs, func() bool { return statusOf(src, "t", 1).CaughtUp })
	if !statusOf(src, "empty", 0).CaughtUp || statusOf(src, "empty", 0).TopicCaughtUp {
		t.Fatalf("empty/0 %+v: want caught up, topic not (empty/1 waits on subtask 1)", statusOf(src, "empty", 0))
	}
	// Give a wrong implementation time to mark something idle.
	for range 50 {
		pollUntil(t, "", rs, func() bool { return true })
	}
	for _, ev := range rs[0].out.events {
		if ev[:4] == "idle" {
			t.Fatalf("subtask 0 marked a split idle (%s) while topics had partitions not caught up: %v", ev, rs[0].out.events)
		}
	}
	close(gate)
	pollUntil(t, "all idle", rs, func() bool {
		return rs[0].out.has("idle 0 true") && rs[0].out.has("idle 1 true") && rs[0].out.has("idle 2 true") &&
			rs[1].out.has("idle 0 true") && rs[1].out.has("idle 1 true")
	})
	if !src.CaughtUp() {
		t.Fatalf("status %+v: want everything caught up", src.Status())
	}
}

// K9: with CatchUpOff the reader never marks splits idle.
func TestCatchUpOff(t *testing.T) {
	b := startBroker(t, map[string]int32{"t": 1})
	produce(t, client(t, b), rec("t", 0, 1, "x"))
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t"}, CatchUp: CatchUpOff}, String())
	rs := readers(t, src, 1, nil)
	pollUntil(t, "the record", rs, func() bool { return len(rs[0].out.vals) == 1 })
	for range 50 {
		pollUntil(t, "", rs, func() bool { return true })
	}
	if slices.ContainsFunc(rs[0].out.events, func(e string) bool { return e[:4] == "idle" }) {
		t.Fatalf("events %v: CatchUpOff marked a split idle", rs[0].out.events)
	}
}

// K8: after the catch-up, LiveRejoin makes a split active at its first live
// record (before emitting it); LiveStayIdle keeps it idle.
func TestLiveModes(t *testing.T) {
	for _, live := range []Live{LiveRejoin, LiveStayIdle} {
		t.Run(fmt.Sprint(live), func(t *testing.T) {
			b := startBroker(t, map[string]int32{"t": 1})
			cl := client(t, b)
			produce(t, cl, rec("t", 0, 1, "history"))
			src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t"}, Live: live}, String())
			rs := readers(t, src, 1, nil)
			pollUntil(t, "catch-up", rs, func() bool { return rs[0].out.has("idle 0 true") })
			produce(t, cl, rec("t", 0, 2, "live"))
			pollUntil(t, "the live record", rs, func() bool { return len(rs[0].out.vals) == 2 })
			ev := rs[0].out.events
			want := []string{"add 0", "rec 0", "idle 0 true", "rec 0"}
			if live == LiveRejoin {
				want = []string{"add 0", "rec 0", "idle 0 true", "idle 0 false", "rec 0"}
			}
			if fmt.Sprint(ev) != fmt.Sprint(want) {
				t.Fatalf("events %v, want %v", ev, want)
			}
		})
	}
}

// lateCheck counts records at or behind the watermark it has seen.
type lateCheck[T any] struct {
	runtime.Base[T]
	wm         int64
	late, seen *atomic.Int64
	maxWm      *atomic.Int64
}

func (o *lateCheck[T]) Open(ctx *runtime.Context, out runtime.Output[T]) error {
	o.wm = watermark.Min
	return o.Base.Open(ctx, out)
}

func (o *lateCheck[T]) ProcessRecord(r runtime.Record[T]) error {
	if r.Timestamp <= o.wm {
		o.late.Add(1)
	}
	o.seen.Add(1)
	o.Out.Collect(r)
	return nil
}

func (o *lateCheck[T]) ProcessWatermark(ts int64) error {
	o.wm = ts
	o.maxWm.Store(ts)
	o.Out.EmitWatermark(ts)
	return nil
}

func (o *lateCheck[T]) EndInput() error { return nil }

// K5-K7 end to end, the failure they prevent: a topic whose reader
// starts late. Under a time-out its silent split goes idle, the other
// topic moves event time past the late topic's records, and they arrive
// late. Under the end-offset policy the late topic holds event time until
// it has caught up, and nothing is late.
func TestLateStartingTopic(t *testing.T) {
	for _, policy := range []string{"end-offsets", "time-out"} {
		t.Run(policy, func(t *testing.T) {
			b := startBroker(t, map[string]int32{"fast": 1, "slow": 1})
			cl := client(t, b)
			base := time.Now().UnixMilli() - 100_000
			var recs []*kgo.Record
			for i := range 100 {
				recs = append(recs, rec("fast", 0, base+int64(i)*10, fmt.Sprint(i)), rec("slow", 0, base+int64(i)*10, fmt.Sprint(i)))
			}
			produce(t, cl, recs...)
			gate := make(chan struct{})
			strategy := watermark.ForMonotonous[string]()
			opts := Options{Brokers: b.Addrs()}
			if policy == "time-out" {
				strategy = strategy.WithIdleness(100 * time.Millisecond)
				opts.CatchUp = CatchUpOff
			}
			fastOpts, slowOpts := opts, opts
			fastOpts.Topics, slowOpts.Topics = []string{"fast"}, []string{"slow"}
			slowOpts.BeforeStart = holdUntil(gate, -1)
			fast, slow := NewSource(fastOpts, String()), NewSource(slowOpts, String())
			env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: 10 * time.Millisecond, Logger: quiet})
			in := weir.Union(weir.FromSource(env, "fast", fast, strategy), weir.FromSource(env, "slow", slow, strategy))
			var late, seen, maxWm atomic.Int64
			maxWm.Store(watermark.Min)
			checked := weir.Transform(in, "late-check", func() runtime.OneInputOperator[string, string] {
				return &lateCheck[string]{late: &late, seen: &seen, maxWm: &maxWm}
			})
			collectTo(checked)
			_, stop := weirtest.Start(t, env)
			weirtest.Eventually(t, "the fast topic", func() bool { return seen.Load() == 100 })
			if policy == "time-out" {
				weirtest.Eventually(t, "event time past the slow topic's records", func() bool { return maxWm.Load() >= base+500 })
			} else {
				weirtest.Eventually(t, "the fast topic's catch-up", fast.CaughtUp)
				// Give a wrong implementation time to move event time.
				time.Sleep(300 * time.Millisecond)
				if w := maxWm.Load(); w != watermark.Min {
					t.Fatalf("event time moved to %d while the slow topic had not started", w)
				}
			}
			close(gate)
			weirtest.Eventually(t, "the slow topic", func() bool { return seen.Load() == 200 })
			stop()
			switch {
			case policy == "end-offsets" && late.Load() != 0:
				t.Fatalf("%d records late under the end-offset policy, want 0", late.Load())
			case policy == "time-out" && late.Load() == 0:
				t.Fatalf("no record late under the time-out policy; the test did not reproduce the failure")
			}
			t.Logf("%s: %d of 200 records late", policy, late.Load())
		})
	}
}

// K13: partitions created after the start are found, read from their
// beginning by the subtask Flink's rule names, and are live from birth:
// idle at once, active at their first record (LiveRejoin).
func TestDiscoveredPartitionsLiveFromBirth(t *testing.T) {
	b := startBroker(t, map[string]int32{"grow": 1})
	cl := client(t, b)
	produce(t, cl, rec("grow", 0, 1, "old"))
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"grow"}, DiscoveryInterval: 10 * time.Millisecond}, String())
	rs := readers(t, src, 2, nil)
	pollUntil(t, "catch-up", rs, src.CaughtUp)
	if _, err := kadm.NewClient(cl).CreatePartitions(testCtx(t), 2, "grow"); err != nil {
		t.Fatal(err)
	}
	cl2 := client(t, b) // knows the new partitions
	produce(t, cl2, rec("grow", 1, 2, "new1"), rec("grow", 2, 3, "new2"))
	pollUntil(t, "the new partitions' records", rs, func() bool { return len(rs[0].out.vals)+len(rs[1].out.vals) == 3 })
	for _, p := range []int32{1, 2} {
		st := statusOf(src, "grow", p)
		owner := discoveredOwner("grow", p, 2)
		if !st.Discovered || st.Subtask != owner || st.Position != 1 {
			t.Fatalf("partition %d status %+v: want discovered, read by subtask %d, position 1", p, st, owner)
		}
		ev := rs[owner].out.events
		// The new split is the last one its subtask added.
		id := -1
		for i, e := range ev {
			if strings.HasPrefix(e, "add ") {
				id = i
			}
		}
		if id < 0 || len(ev) < id+4 {
			t.Fatalf("subtask %d events %v: want the new split added, idle, active, then its record", owner, ev)
		}
		split := strings.TrimPrefix(ev[id], "add ")
		want := []string{"add " + split, "idle " + split + " true"}
		if fmt.Sprint(ev[id:id+2]) != fmt.Sprint(want) || !slices.Contains(ev, "idle "+split+" false") {
			t.Fatalf("subtask %d events %v: want %v, later active again", owner, ev, want)
		}
	}
}
