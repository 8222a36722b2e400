package ordering

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	ckpt "github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

func startBroker(t *testing.T, topics map[string]int32) (*broker.Broker, *kgo.Client) {
	t.Helper()
	b := testenv.StartBroker(t, broker.Options{Topics: topics})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, cl
}

// produce writes events as JSON with their timestamps.
func produce(t *testing.T, cl *kgo.Client, topic string, evs ...ev) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, e := range evs {
		b, _ := json.Marshal(e)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(e.Partition), Key: []byte(e.Key), Value: b, Timestamp: time.UnixMilli(e.TS)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// fromKafka turns kafka messages into events carrying their partition and
// offset (the tiebreak).
func fromKafka(s weir.Stream[kafka.Message[ev]]) weir.Stream[ev] {
	return weir.Map(s, "meta", func(m kafka.Message[ev]) ev {
		e := m.Value
		e.Partition, e.Offset = int64(m.Partition), m.Offset
		return e
	})
}

// history writes n events per partition, timestamps one second apart from
// base, keys spread over 4 items.
func history(t *testing.T, cl *kgo.Client, topic string, parts, n int, base int64) int {
	var evs []ev
	for p := range parts {
		for i := range n {
			evs = append(evs, ev{Key: fmt.Sprint("item-", (i+p)%4), TS: base + int64(i)*1000 + int64(p)*7, Partition: int64(p)})
		}
	}
	produce(t, cl, topic, evs...)
	return len(evs)
}

// C1, C2 with a clock.Manual, in the order the seed found matters: while
// the data topic has not caught up (its reader starts late), the clock
// moves nothing; once it has caught up its splits go idle and event time
// follows the clock; live records are then released as the clock passes
// them, and one older than the lag is a violation (C3).
func TestClockMovesEventTimeOnlyAfterCatchUp(t *testing.T) {
	_, cl := startBroker(t, map[string]int32{"inv": 2})
	t0 := time.Now().Truncate(time.Second)
	n := history(t, cl, "inv", 2, 20, t0.Add(-time.Hour).UnixMilli())
	gate := make(chan struct{})
	src := kafka.NewSource(kafka.Options{Brokers: []string{cl.OptValue(kgo.SeedBrokers).([]string)[0]}, Topics: []string{"inv"},
		Live: kafka.LiveStayIdle,
		BeforeStart: func(ctx context.Context, _ int) error {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return nil
		}}, kafka.WithMetadata(kafka.JSON[ev]()))
	manual := clock.NewManual(t0)
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Clock: manual, AutoWatermarkInterval: 100 * time.Millisecond, Logger: quiet})
	data := fromKafka(weir.FromSource(env, "inv", src, watermark.ForMonotonous[kafka.Message[ev]]()))
	in := weir.Union(data, Clock[ev](env, "clock", time.Second, 100*time.Millisecond))
	sorted := Sort(weir.KeyBy(in, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Tiebreak: tiebreak})
	o := sinkTo(sorted)
	_, stop := weirtest.Start(t, env)

	// The clock ticks for 3 s of processing time; the data topic has not
	// started: nothing may move.
	for range 30 {
		manual.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if seq := o.sequence(); len(seq) != 0 {
		t.Fatalf("before the data caught up the sort emitted %v; the clock must not move event time yet", seq)
	}

	// The data topic starts, reads its history and catches up: event time
	// jumps to the clock (t0 + 3 s - 1 s) and the history comes out sorted.
	close(gate)
	weirtest.Eventually(t, "the history", func() bool { return len(o.records()) == n })
	weirtest.Eventually(t, "event time at the clock", func() bool {
		return contains(o.sequence(), fmt.Sprintf("wm %d", t0.Add(2*time.Second).UnixMilli()))
	})
	checkSorted(t, o.records())

	// Live: a record stamped now is held until the clock passes it.
	now := manual.Now().UnixMilli()
	produce(t, cl, "inv", ev{Key: "item-1", TS: now, Partition: 1})
	time.Sleep(100 * time.Millisecond)
	if got := len(o.records()); got != n {
		t.Fatalf("a live record was released before the clock passed it (%d records)", got)
	}
	for range 15 {
		manual.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	weirtest.Eventually(t, "the live record", func() bool { return len(o.records()) == n+1 })
	// A record older than the lag: a violation, emitted at once.
	produce(t, cl, "inv", ev{Key: "item-2", TS: manual.Now().Add(-5 * time.Second).UnixMilli(), Partition: 0})
	weirtest.Eventually(t, "the late record", func() bool { return len(o.records()) == n+2 })
	stop()
	if v := env.Metrics().Sum("sort", "orderViolations"); v != 1 {
		t.Fatalf("orderViolations = %d, want 1 (the record older than the lag)", v)
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// Without a clock, LiveRejoin keeps event time moving in live mode: the
// caught-up splits rejoin at their first live record and their own
// watermarks release the live records.
func TestLiveRejoinWithoutClock(t *testing.T) {
	_, cl := startBroker(t, map[string]int32{"inv": 2})
	base := time.Now().Add(-time.Hour).UnixMilli()
	n := history(t, cl, "inv", 2, 10, base)
	src := kafka.NewSource(kafka.Options{Brokers: []string{cl.OptValue(kgo.SeedBrokers).([]string)[0]}, Topics: []string{"inv"}},
		kafka.WithMetadata(kafka.JSON[ev]()))
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: 10 * time.Millisecond, Logger: quiet})
	data := fromKafka(weir.FromSource(env, "inv", src, watermark.ForMonotonous[kafka.Message[ev]]()))
	o := sinkTo(Sort(weir.KeyBy(data, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Tiebreak: tiebreak}))
	_, stop := weirtest.Start(t, env)
	// The history up to the watermarks of the last periodic emit before
	// the catch-up is released; the rest waits for event time to move.
	weirtest.Eventually(t, "the catch-up", src.CaughtUp)
	// Live records on both partitions, later than the history.
	live := base + 3_600_000
	for i := range 5 {
		produce(t, cl, "inv", ev{Key: "item-0", TS: live + int64(i)*1000, Partition: int64(i % 2)})
	}
	// Each partition's watermark is its newest timestamp - 1: all but the
	// newest live record of the slower partition are released.
	weirtest.Eventually(t, "live records released by the data's own watermarks", func() bool { return len(o.records()) >= n+3 })
	stop()
	checkSorted(t, o.records())
	if v := env.Metrics().Sum("sort", "orderViolations"); v != 0 {
		t.Fatalf("orderViolations = %d, want 0", v)
	}
}

// S4: held records survive a savepoint and a restore at another
// parallelism, and are released, in order, once the watermark passes them.
func TestSortSavepointRestore(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testSortSavepointRestore(t, [2]string{"", ""}, false) })
	// Held in Pebble (keyed state and timers) before the savepoint, in
	// memory after it, and the other way round: the savepoint is the same.
	t.Run("pebble-memory", func(t *testing.T) { testSortSavepointRestore(t, [2]string{state.BackendPebble, ""}, false) })
	t.Run("memory-pebble", func(t *testing.T) { testSortSavepointRestore(t, [2]string{"", state.BackendPebble}, false) })
	// A native checkpoint of the Pebble mode (records and timers in the
	// database's files), restored at another parallelism into either.
	t.Run("pebble-checkpoint-pebble", func(t *testing.T) {
		testSortSavepointRestore(t, [2]string{state.BackendPebble, state.BackendPebble}, true)
	})
	t.Run("pebble-checkpoint-memory", func(t *testing.T) {
		testSortSavepointRestore(t, [2]string{state.BackendPebble, ""}, true)
	})
}

func testSortSavepointRestore(t *testing.T, backends [2]string, checkpoint bool) {
	b, cl := startBroker(t, map[string]int32{"inv": 3})
	base := time.Now().Add(-time.Hour).UnixMilli()
	n := history(t, cl, "inv", 3, 30, base)
	sp := t.TempDir() + "/sp"
	build := func(par int, restore string, withClock bool) (*weir.Environment, *kafka.Source[kafka.Message[ev]], *out) {
		backend := backends[0]
		if restore != "" {
			backend = backends[1]
		}
		cc := runtime.CheckpointConfig{RestoreFrom: restore}
		if checkpoint && restore == "" {
			cc.Dir = t.TempDir()
		}
		env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: quiet,
			Checkpoint:   cc,
			StateBackend: weir.StateBackendConfig{Kind: backend, Dir: t.TempDir()}})
		src := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{"inv"}, Live: kafka.LiveStayIdle},
			kafka.WithMetadata(kafka.JSON[ev]()))
		// No watermarks from the data: everything stays held.
		data := fromKafka(weir.FromSource(env, "inv", src, watermark.NoWatermarks[kafka.Message[ev]]()).UID("inv"))
		in := data
		if withClock {
			in = weir.Union(data, Clock[ev](env, "clock", 0, 10*time.Millisecond).UID("clock"))
		}
		// Held encoded before the savepoint, as values after it: the
		// snapshot format is the same.
		opts := SortOptions[ev]{Tiebreak: tiebreak}
		if restore == "" {
			opts.HeldCodec = state.JSONCodec[ev]()
		}
		sorted := Sort(weir.KeyBy(in, func(e ev) string { return e.Key }), "sort", opts)
		return env, src, sinkTo(sorted.UID("sort"))
	}
	env, src, o := build(2, "", false)
	job, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "the catch-up", src.CaughtUp)
	// Everything the source emitted precedes the savepoint's barrier.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if checkpoint {
		var err error
		if _, sp, err = job.TriggerCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := ckpt.Read(sp)
		if err != nil {
			t.Fatal(err)
		}
		if m.Operator("sort").Subtasks[0].Native == nil {
			t.Fatal("the checkpoint of the Pebble mode is not native")
		}
	} else if _, err := job.TriggerSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	stop()
	if got := o.records(); len(got) != 0 {
		t.Fatalf("without watermarks the sort released %d records", len(got))
	}
	// Restored at parallelism 3 with a clock at processing time: the
	// held history is released, sorted, exactly once.
	env, _, o = build(3, sp, true)
	_, stop = weirtest.Start(t, env)
	weirtest.Eventually(t, "the held records", func() bool { return len(o.records()) >= n })
	time.Sleep(50 * time.Millisecond)
	stop()
	got := o.records()
	if len(got) != n {
		t.Fatalf("released %d records after the restore, want %d", len(got), n)
	}
	checkSorted(t, got)
}
