package cluster

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// W4: a restored keyed task starts at the minimum of its producers'
// checkpointed watermarks. (A bug applied each producer's watermark as it
// added the producer, so the first producer's alone, 1000, went out, and a
// record at 500 of the second, held at 100, came late.)
func TestRestoredKeyedTaskKeepsTheMinimum(t *testing.T) {
	b, send := exchangeBroker(t)
	ctx := context.Background()
	control := func(p int32, wm int64) *kgo.Record {
		return &kgo.Record{Key: producerKey(p), Headers: controlHeaders, Value: encodeControl(kindWatermark, wm), Timestamp: time.UnixMilli(wm)}
	}
	send(control(0, 1000))
	send(control(1, 100))
	cfg, err := Config{Brokers: b.Addrs(), Group: "g", SourceTopic: "unused", KeyedTasks: 1, CheckpointBase: t.TempDir(),
		CheckpointInterval: 5 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var got *weir.Collected[int64]
	job := Job[int64, int64, int64, int64]{Source: kafka.JSON[int64](), Key: func(v int64) int64 { return v },
		Keyed: func(ks weir.KeyedStream[int64, int64]) weir.Stream[int64] {
			got = weir.Collect(ks.Stream)
			return ks.Stream
		},
		Sink: kafka.SinkOptions[int64]{Topic: "out", Serialize: kafka.SerializeJSON[int64](nil)}}
	start := func() *runtime.Job {
		env, _, err := taskEnv(cfg, "keyed-0")
		if err != nil {
			t.Fatal(err)
		}
		job.buildKeyedTask(env, cfg, 0, 2)
		j, err := env.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := start()
	weirtest.Eventually(t, "watermark 100 (the minimum)", func() bool {
		w := got.Watermarks(0)
		return len(w) > 0 && w[len(w)-1] == 100
	})
	if _, _, err := first.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	first.Cancel()
	first.Wait()

	send(&kgo.Record{Key: producerKey(1), Value: []byte(strconv.Itoa(7)), Timestamp: time.UnixMilli(500)})
	send(control(1, 600))
	second := start()
	defer func() { second.Cancel(); second.Wait() }()
	weirtest.Eventually(t, "the record at 500", func() bool { return len(got.Records()) == 1 })
	for _, w := range got.Watermarks(0) {
		if w > 600 {
			t.Fatalf("the restored task emitted watermark %d while producer 1 was at 100, then 600: its record at 500 came late", w)
		}
	}
}

// W6: a producer that has caught up and gone idle keeps holding a keyed
// task's watermark while another producer still replays (its partition may
// get more history, which must not be late), and goes idle only once every
// producer has caught up. (Before, its idleness let the replaying
// producer's watermark, 1000, through at once.)
func TestCaughtUpProducerHoldsUntilEveryProducerHasCaughtUp(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"g-exchange": 1, "out": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("g-exchange"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	send := func(p int32, kind byte, wm int64) {
		t.Helper()
		r := &kgo.Record{Key: producerKey(p), Headers: controlHeaders, Value: encodeControl(kind, wm), Timestamp: time.UnixMilli(max(wm, 0))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	env, got := keyedTaskOf2(t, b.Addrs())
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Cancel(); j.Wait() }()
	last := func() int64 {
		w := got.Watermarks(0)
		if len(w) == 0 {
			return -1
		}
		return w[len(w)-1]
	}
	send(0, kindBehind, watermark.Min)
	send(1, kindBehind, watermark.Min)
	send(0, kindWatermark, 100)
	send(0, kindCaughtUp, 100)
	send(0, kindIdle, 100)
	send(1, kindWatermark, 50)
	weirtest.Eventually(t, "watermark 50", func() bool { return last() == 50 })
	send(1, kindWatermark, 1000)
	weirtest.Eventually(t, "watermark 100 (producer 0's, held)", func() bool { return last() == 100 })
	// A data record after the watermark: once it is out, everything
	// before it has been read.
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: producerKey(1), Value: []byte("7"), Timestamp: time.UnixMilli(1001)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	send(0, kindWatermark, 101) // moves the watermark, which flushes the record through
	weirtest.Eventually(t, "producer 1's record", func() bool { return len(got.Records()) == 1 && last() == 101 })
	for _, w := range got.Watermarks(0) {
		if w > 101 {
			t.Fatalf("watermark %d while producer 0, caught up at 100 (then 101), waited for producer 1 to catch up", w)
		}
	}
	send(1, kindCaughtUp, 1001)
	send(1, kindIdle, 1001)
	send(1, kindActive, 1001)
	send(1, kindWatermark, 2000)
	weirtest.Eventually(t, "watermark 2000 (every producer caught up: producer 0 idle)", func() bool { return last() == 2000 })
}

// W7: an idle producer whose source partition has records past the
// position it went idle at holds the keyed task's watermark where it
// stands, until it reports again. (Before, a source task killed while
// idle, with records arriving after its last checkpoint, left its
// idleness in force: the other producers carried event time past those
// records, which its restored task then sent late, and its windows lost
// them.)
func TestIdleProducerWithUnsentRecordsHolds(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"g-exchange": 1, "out": 1, "events": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("g-exchange"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	produce := func(r *kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	send := func(p int32, kind byte, wm int64) {
		t.Helper()
		produce(&kgo.Record{Key: producerKey(p), Headers: controlHeaders, Value: encodeControl(kind, wm), Timestamp: time.UnixMilli(max(wm, 0))})
	}
	idle := func(p int32, wm, pos int64) {
		t.Helper()
		produce(&kgo.Record{Key: producerKey(p), Headers: controlHeaders, Value: encodeIdle(wm, pos), Timestamp: time.UnixMilli(wm)})
	}
	event := func() { // one record in partition 0 of the source topic
		t.Helper()
		produce(&kgo.Record{Topic: "events", Partition: 0, Value: []byte("1")})
	}
	for range 3 {
		event()
	}
	cfg, err := Config{Brokers: b.Addrs(), Group: "g", SourceTopic: "events", KeyedTasks: 1, CheckpointBase: t.TempDir(),
		CheckpointInterval: 5 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var got *weir.Collected[int64]
	var seen atomic.Int64 // records through the keyed steps (Collected shows them at the next watermark)
	job := Job[int64, int64, int64, int64]{Source: kafka.JSON[int64](), Key: func(v int64) int64 { return v },
		Keyed: func(ks weir.KeyedStream[int64, int64]) weir.Stream[int64] {
			got = weir.Collect(weir.Map(ks.Stream, "count", func(v int64) int64 { seen.Add(1); return v }))
			return ks.Stream
		},
		Sink: kafka.SinkOptions[int64]{Topic: "out", Serialize: kafka.SerializeJSON[int64](nil)}}
	env, _, err := taskEnv(cfg, "keyed-0")
	if err != nil {
		t.Fatal(err)
	}
	job.buildKeyedTask(env, cfg, 0, 2)
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Cancel(); j.Wait() }()
	last := func() int64 {
		w := got.Watermarks(0)
		if len(w) == 0 {
			return -1
		}
		return w[len(w)-1]
	}
	data := func(p int32, v, ts int64) {
		t.Helper()
		produce(&kgo.Record{Key: producerKey(p), Value: []byte(strconv.FormatInt(v, 10)), Timestamp: time.UnixMilli(ts)})
	}

	// Producer 0 caught up and idle at offset 3, the end of its partition:
	// producer 1's watermark goes through.
	send(0, kindBehind, watermark.Min)
	send(1, kindBehind, watermark.Min)
	send(0, kindWatermark, 100)
	send(0, kindCaughtUp, 100)
	idle(0, 100, 3)
	send(1, kindWatermark, 50)
	send(1, kindCaughtUp, 50)
	send(1, kindWatermark, 1000)
	weirtest.Eventually(t, "watermark 1000 (producer 0 idle at the end of its partition)", func() bool { return last() == 1000 })

	// A record reaches producer 0's partition, and producer 0 sends
	// nothing (its task is down): it holds the watermark at 1000.
	event()
	send(1, kindWatermark, 2000)
	data(1, 1, 2001)
	weirtest.Eventually(t, "producer 1's record", func() bool { return seen.Load() == 1 })
	if w := last(); w != 1000 {
		t.Fatalf("watermark %d; want 1000: producer 0, idle at offset 3, has a record at 3 it has not sent", w)
	}

	// Its task starts again: the record it replays, at 1200, is not late.
	send(0, kindBehind, 100)
	data(0, 2, 1200)
	send(0, kindWatermark, 1500)
	weirtest.Eventually(t, "watermark 1500 (producer 0's)", func() bool { return last() == 1500 })
	send(0, kindCaughtUp, 1500)
	idle(0, 1500, 4)
	weirtest.Eventually(t, "watermark 2000 (producer 0 idle again at the end of its partition)", func() bool { return last() == 2000 })
	var ws []int64
	for _, w := range got.Watermarks(0) {
		if w > 1000 {
			ws = append(ws, w)
		}
	}
	if !slices.Equal(ws, []int64{1500, 2000}) {
		t.Fatalf("watermarks past 1000: %v; want [1500 2000] (held at 1000 until producer 0 reported again)", ws)
	}
	if n := len(got.Records()); n != 2 {
		t.Fatalf("%d records; want 2", n)
	}
}

// A keyed task reads batch records (each value at its own timestamp, in
// order, a value that does not decode a dead letter and not the end of
// its batch) and the single-value data records written before batches.
func TestKeyedTaskReadsBatchesAndSingleRecords(t *testing.T) {
	b, send := exchangeBroker(t)
	ctx := context.Background()
	send(&kgo.Record{Key: producerKey(0), Value: []byte("7"), Timestamp: time.UnixMilli(500)})
	batch := []byte{batchVersion}
	prev := int64(0)
	for _, v := range []struct {
		ts  int64
		enc string
	}{{900, "1"}, {880, "2"}, {950, "not a number"}, {1200, "3"}} {
		batch = appendBatchValue(batch, v.ts, prev, []byte(v.enc))
		prev = v.ts
	}
	send(&kgo.Record{Key: producerKey(1), Headers: batchHeaders, Value: batch, Timestamp: time.UnixMilli(900)})
	for p := range int32(2) {
		send(&kgo.Record{Key: producerKey(p), Headers: controlHeaders, Value: encodeControl(kindEnd, watermark.Max), Timestamp: time.UnixMilli(maxKafkaTs)})
	}
	env, got := keyedTaskOf2(t, b.Addrs())
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	var vals, tss []int64
	for _, r := range got.Records() {
		vals, tss = append(vals, r.Value), append(tss, r.Timestamp)
	}
	if !slices.Equal(vals, []int64{7, 1, 2, 3}) || !slices.Equal(tss, []int64{500, 900, 880, 1200}) {
		t.Fatalf("values %v at %v; want [7 1 2 3] at [500 900 880 1200]", vals, tss)
	}
}

// An upgrade keeps the exchange readable: a keyed task of this build
// (Job.Codec nil, so its source tasks write binary batches, version 2)
// reads the JSON batches (version 1) the previous build's source tasks
// wrote with the same job, from the same exchange operator with no binary
// codec, next to binary ones.
func TestKeyedTaskReadsBatchesOfBothVersions(t *testing.T) {
	b, send := exchangeBroker(t)
	const maxPar = 128
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: maxPar})
	ks := weir.KeyBy(weir.FromSlice(env, "src", []int64{0}, watermark.NoWatermarks[int64]()), func(v int64) int64 { return v })
	cfg, err := Config{Brokers: b.Addrs(), Group: "g", SourceTopic: "unused", KeyedTasks: 1, CheckpointBase: t.TempDir()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	// The previous build's batches, as a new build writes them with
	// Config.ExchangeVersion 1 (a rolling upgrade), then the newest.
	for p, version := range []int{1, 0} {
		vcfg := cfg
		vcfg.ExchangeVersion = version
		bin := Job[int64, int64, int64, int64]{}.binCodec(vcfg)
		op := newExchangeOut(ks, JSON[int64](), bin, maxPar, 1, time.Millisecond, nil, nil)().(*exchangeOut[int64, int64])
		out := &outRecs[int64]{}
		op.Out, op.announced = out, true
		for i := range int64(50) {
			v := int64(p)*1000 + i
			if err := op.ProcessRecord(runtime.Record[int64]{Value: v, Timestamp: 100 + v}); err != nil {
				t.Fatal(err)
			}
			want = append(want, v)
		}
		op.sendAll()
		op.control(kindEnd, watermark.Max)
		ser := exchangeSinkOptions(cfg, JSON[int64](), "g-exchange", int32(p), "x").Serialize
		for i, r := range out.recs {
			if i == 0 && r.Value.batch[0] != []byte{batchVersion, batchVersionBinary}[p] {
				t.Fatalf("producer %d wrote a batch of version %d", p, r.Value.batch[0])
			}
			rec, err := ser(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			send(rec)
		}
	}
	kenv, got := keyedTaskOf2(t, b.Addrs())
	if err := kenv.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	var vals []int64
	for _, r := range got.Records() {
		if r.Timestamp != 100+r.Value {
			t.Fatalf("value %d at %d, want at %d", r.Value, r.Timestamp, 100+r.Value)
		}
		vals = append(vals, r.Value)
	}
	if !slices.Equal(vals, want) {
		t.Fatalf("values %v, want %v", vals, want)
	}
}

// keyedTaskOf2 builds keyed task 0 of a job of one keyed task whose
// exchange has two producers, over the brokers, and returns its
// environment and what it collects.
func keyedTaskOf2(t *testing.T, brokers []string) (*weir.Environment, *weir.Collected[int64]) {
	t.Helper()
	cfg, err := Config{Brokers: brokers, Group: "g", SourceTopic: "unused", KeyedTasks: 1, CheckpointBase: t.TempDir(),
		CheckpointInterval: 5 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var got *weir.Collected[int64]
	job := Job[int64, int64, int64, int64]{Source: kafka.JSON[int64](), Key: func(v int64) int64 { return v },
		Keyed: func(ks weir.KeyedStream[int64, int64]) weir.Stream[int64] {
			got = weir.Collect(ks.Stream)
			return ks.Stream
		},
		Sink: kafka.SinkOptions[int64]{Topic: "out", Serialize: kafka.SerializeJSON[int64](nil)}}
	env, _, err := taskEnv(cfg, "keyed-0")
	if err != nil {
		t.Fatal(err)
	}
	job.buildKeyedTask(env, cfg, 0, 2)
	return env, got
}

// exchangeBroker starts a broker with the exchange topic of group "g" and
// an output topic, one partition each, and returns it with a function that
// writes a record to the exchange topic (both closed when the test ends).
func exchangeBroker(t *testing.T) (*broker.Broker, func(*kgo.Record)) {
	t.Helper()
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"g-exchange": 1, "out": 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("g-exchange"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, func(r *kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}
