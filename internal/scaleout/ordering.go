package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// OrderEvent is a record of the ordering run: a key, a unique id, and its
// event time (also the Kafka record's timestamp).
type OrderEvent struct {
	Key string `json:"k"`
	ID  int64  `json:"i"`
	TS  int64  `json:"t"`
}

// flushKey marks the records written after the counted ones (a tail of
// live traffic, then one far ahead in event time per partition, which
// releases everything before it from the sort); they are not counted.
const flushKey = "~flush"

// LiveLag is the ordering job's watermark bound. Each partition's event
// times ascend, so the bound matters only for live records: written at
// "now" to several partitions, they reach the job in any order, and a
// partition that goes quiet between two of them leaves the minimum (kafka
// K8), so without a bound one partition's live record could be a few
// milliseconds behind another's watermark. A bound is how a live job says
// how late a live record may be; it does not excuse the history, which is
// an hour old (a partition going idle too early makes its history late
// by far more than LiveLag).
const LiveLag = 2 * time.Second

// OrderingJob sorts events per key by event time (ordering.Sort) and writes
// them, in that order, to outTopic with the exactly-once sink (keyed by
// key, so one key's records keep their order in one partition). pace, if
// positive, bounds the records per second of each source subtask, so that
// a small input replays for long enough.
func OrderingJob(outTopic string, pace int) cluster.Job[OrderEvent, OrderEvent, string, OrderEvent] {
	return cluster.Job[OrderEvent, OrderEvent, string, OrderEvent]{
		Source:     kafka.JSON[OrderEvent](),
		Watermarks: watermark.ForBoundedOutOfOrderness[OrderEvent](LiveLag),
		Upstream: func(s weir.Stream[OrderEvent]) weir.Stream[OrderEvent] {
			if pace <= 0 {
				return s
			}
			return weir.Transform(s, "pace", func() runtime.OneInputOperator[OrderEvent, OrderEvent] { return &pacer[OrderEvent]{perSec: pace} })
		},
		Key: func(e OrderEvent) string { return e.Key },
		Keyed: func(ks weir.KeyedStream[string, OrderEvent]) weir.Stream[OrderEvent] {
			return ordering.Sort(ks, "sort", ordering.SortOptions[OrderEvent]{})
		},
		Sink: kafka.SinkOptions[OrderEvent]{Topic: outTopic,
			Serialize: kafka.SerializeJSON[OrderEvent](func(e OrderEvent) []byte { return []byte(e.Key) })},
	}
}

// OrderingResult is what the ordering run measured: the same input, with
// the same loader and live traffic, read by the clustered job (Processes
// worker processes) and by one local job. Violations are records that
// came out of the sort after a record of the same key with a later event
// time: the sort had released past them when they arrived (late).
type OrderingResult struct {
	Processes int `json:"processes"`
	// Records per run (history, loaded and live; the flush records not
	// counted): BigPartition records in partition 1, a tenth of that in
	// each other partition but 0, which starts with SmallHistory records
	// and gets Loaded more during the first seconds of the run.
	Records      int `json:"records"`
	BigPartition int `json:"bigPartition"`
	SmallHistory int `json:"smallHistory"`
	Loaded       int `json:"loaded"`
	Live         int `json:"live"`
	// Pace is each source subtask's bound in records per second
	// (Config.OrderPace; by default the big partition replays for three
	// times LoadFor, so that the loader writes while it replays).
	Pace int `json:"pace"`
	// ClusteredViolations and LocalViolations must be 0; ...Missing and
	// ...Duplicated count ids not output, or output twice.
	ClusteredViolations int `json:"clusteredViolations"`
	LocalViolations     int `json:"localViolations"`
	ClusteredMissing    int `json:"clusteredMissing"`
	ClusteredDuplicated int `json:"clusteredDuplicated"`
	LocalMissing        int `json:"localMissing"`
	LocalDuplicated     int `json:"localDuplicated"`
	// ClusteredSeconds and LocalSeconds run from the start of the job to
	// the moment every record was in its output.
	ClusteredSeconds float64 `json:"clusteredSeconds"`
	LocalSeconds     float64 `json:"localSeconds"`
}

// OK reports whether both runs output every record once, in order per key.
func (r OrderingResult) OK() bool {
	return r.ClusteredViolations == 0 && r.LocalViolations == 0 && r.ClusteredMissing == 0 && r.ClusteredDuplicated == 0 &&
		r.LocalMissing == 0 && r.LocalDuplicated == 0
}

// orderInput is the ordering run's input plan (the same for both runs).
type orderInput struct {
	partitions, big, small, loaded, keys int
	loadFor, liveFor                     time.Duration
	seed                                 uint64
	t0, t1                               int64 // the history's event-time span
}

func (in orderInput) records(live int) int {
	return in.big + (in.partitions-2)*(in.big/10) + in.small + in.loaded + live
}

// RunOrdering runs the ordering run (issue 25): uneven partitions (a big
// one replaying for long, a small one reaching its end at once while a
// loader still writes its history to it for cfg.LoadFor), live traffic to
// every partition meanwhile, a sort per key, and the order of the output,
// clustered over cfg.Processes worker processes and as one local job.
func RunOrdering(ctx context.Context, cfg Config) (OrderingResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return OrderingResult{}, err
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "scaleout ordering: "+format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-scaleout-ordering-"); err != nil {
			return OrderingResult{}, err
		}
		defer os.RemoveAll(dir)
	}
	b, err := broker.Start(broker.Options{Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		return OrderingResult{}, err
	}
	defer b.Close()
	brokers := b.Addrs()
	now := time.Now().UnixMilli()
	in := orderInput{partitions: max(cfg.Partitions, 2), big: cfg.OrderRecords, small: max(cfg.OrderRecords/1000, 10), loaded: 100,
		keys: cfg.Keys, loadFor: cfg.LoadFor, liveFor: cfg.LoadFor + time.Second, seed: cfg.Seed,
		t0: now - 2*time.Hour.Milliseconds(), t1: now - time.Hour.Milliseconds()}
	if cfg.OrderPace == 0 {
		// The big partition must still replay while the loader writes:
		// history written after the topic has caught up is live, and late
		// in any job (kafka K5).
		cfg.OrderPace = max(int(float64(in.big)/(3*cfg.LoadFor.Seconds())), 1)
	}
	res := OrderingResult{Processes: cfg.Processes, BigPartition: in.big, SmallHistory: in.small, Loaded: in.loaded, Pace: cfg.OrderPace}

	// The clustered run.
	spec := WorkerSpec{Brokers: brokers, Group: "order", SourceTopic: "order-in", OutTopic: "order-out", KeyedTasks: cfg.KeyedTasks,
		CheckpointBase: filepath.Join(dir, "order"), CheckpointInterval: cfg.CheckpointInterval, Ordering: true, Pace: cfg.OrderPace}
	var g *gang
	r, err := orderRun(ctx, brokers, in, spec.SourceTopic, spec.OutTopic, logf, func() (func() error, error) {
		g = newGang(ctx, cfg, spec)
		for range cfg.Processes {
			g.start()
		}
		return func() error {
			g.terminate()
			return g.waitAll(cfg.Timeout)
		}, nil
	})
	if err != nil {
		if g != nil {
			g.killAll()
		}
		return res, fmt.Errorf("scaleout: ordering run, clustered: %w", err)
	}
	res.Records, res.Live = r.records, r.live
	res.ClusteredViolations, res.ClusteredMissing, res.ClusteredDuplicated, res.ClusteredSeconds = r.violations, r.missing, r.duplicated, r.seconds
	logf("clustered (%d processes): %d records, %d out of order, %d missing, %d duplicated, %.1fs",
		cfg.Processes, r.records, r.violations, r.missing, r.duplicated, r.seconds)

	// The same as one local job.
	r, err = orderRun(ctx, brokers, in, "order-local-in", "order-local-out", logf, func() (func() error, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: slog.New(slog.DiscardHandler),
			Checkpoint: runtime.CheckpointConfig{Interval: cfg.CheckpointInterval, Dir: filepath.Join(dir, "order-local")}})
		ccfg := cluster.Config{Brokers: brokers, Group: "order-local", SourceTopic: "order-local-in"}
		if err := cluster.BuildLocal(env, ccfg, OrderingJob("order-local-out", cfg.OrderPace), nil); err != nil {
			return nil, err
		}
		jctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- env.Execute(jctx) }()
		return func() error {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}, nil
	})
	if err != nil {
		return res, fmt.Errorf("scaleout: ordering run, local: %w", err)
	}
	res.LocalViolations, res.LocalMissing, res.LocalDuplicated, res.LocalSeconds = r.violations, r.missing, r.duplicated, r.seconds
	logf("local: %d records, %d out of order, %d missing, %d duplicated, %.1fs", r.records, r.violations, r.missing, r.duplicated, r.seconds)
	return res, nil
}

type orderRunResult struct {
	records, live, violations, missing, duplicated int
	seconds                                        float64
}

// orderRun writes the history to topic, starts the job (start returns how
// to stop it), writes the loader's records and the live traffic while it
// runs, then the flush records, waits until out holds every record, stops
// the job and measures out.
func orderRun(ctx context.Context, brokers []string, in orderInput, topic, out string, logf func(string, ...any),
	start func() (stop func() error, err error)) (orderRunResult, error) {
	var res orderRunResult
	if err := createTopic(ctx, brokers, topic, in.partitions); err != nil {
		return res, err
	}
	if err := createTopic(ctx, brokers, out, 2); err != nil {
		return res, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	var mu sync.Mutex
	var firstErr error
	var id int64
	rng := rand.New(rand.NewPCG(in.seed, 25))
	send := func(p int, ts int64, key string) {
		mu.Lock()
		id++
		e := OrderEvent{Key: key, ID: id, TS: ts}
		if key == "" {
			e.Key = fmt.Sprintf("key-%03d", rng.IntN(in.keys))
		}
		mu.Unlock()
		v, _ := json.Marshal(e)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: v, Timestamp: time.UnixMilli(ts)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	// History: partition 1 over the whole span, partitions 2.. a tenth of
	// it as densely spread, partition 0 the span's first tenth only; the
	// loader writes partition 0's second tenth. Partition 1's replay passes
	// that second tenth while the loader still writes (it replays its
	// whole span over three times LoadFor, by default): a partition 0 that
	// left the minimum when it first caught up would see its loaded
	// records come late.
	span := in.t1 - in.t0
	mid, end0 := in.t0+span/10, in.t0+span/5
	for p := range in.partitions {
		n := in.big / 10
		switch p {
		case 0:
			n = in.small
		case 1:
			n = in.big
		}
		from, to := in.t0, in.t1
		if p == 0 {
			to = mid
		}
		for i := range n {
			send(p, from+int64(i)*(to-from)/int64(n), "")
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return res, err
	}
	logf("%s: history written (%d records in partition 1); starting the job", topic, in.big)
	begin := time.Now()
	stop, err := start()
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	// The loader: the rest of partition 0's history, over loadFor. Live
	// traffic to every partition meanwhile, at now.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range in.loaded {
			send(0, mid+int64(i+1)*(end0-mid)/int64(in.loaded), "")
			time.Sleep(in.loadFor / time.Duration(in.loaded))
		}
	}()
	live := 0
	go func() {
		defer wg.Done()
		for t := time.Now(); time.Since(t) < in.liveFor; time.Sleep(50 * time.Millisecond) {
			ts := time.Now().UnixMilli()
			for p := range in.partitions {
				if p == 0 { // after the loader's records, in partition 0's order
					continue
				}
				send(p, ts, "")
				live++
			}
		}
	}()
	wg.Wait()
	// Partition 0's live records, after its loaded history.
	for range 5 {
		send(0, time.Now().UnixMilli(), "")
		live++
		time.Sleep(20 * time.Millisecond)
	}
	// A tail of uncounted live traffic for longer than LiveLag, then a
	// record far ahead per partition, which releases everything before it
	// from the sort. (The far record moves its partition's watermark at
	// once; the tail gives the counted records time to be read first, so
	// that it cannot make them late.)
	for t := time.Now(); time.Since(t) < LiveLag+time.Second; time.Sleep(50 * time.Millisecond) {
		ts := time.Now().UnixMilli()
		for p := range in.partitions {
			send(p, ts, flushKey)
		}
	}
	far := time.Now().Add(time.Hour).UnixMilli()
	for p := range in.partitions {
		send(p, far, flushKey)
	}
	if err := cl.Flush(ctx); err != nil {
		return res, err
	}
	if firstErr != nil {
		return res, firstErr
	}
	res.live = live
	res.records = in.records(live)
	var got []OrderEvent
	for {
		if got, err = readOrdered(ctx, brokers, out); err != nil {
			return res, err
		}
		if len(got) >= res.records {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	res.seconds = time.Since(begin).Seconds()
	stopped = true
	if err := stop(); err != nil {
		return res, err
	}
	if got, err = readOrdered(ctx, brokers, out); err != nil {
		return res, err
	}
	var examples []string
	res.violations, res.missing, res.duplicated, examples = orderViolations(got, res.records)
	if len(examples) > 0 {
		logf("%s: records out of order, the first: %v (ids: history up to %d)", out, examples, in.records(0)-in.loaded)
	}
	return res, nil
}

// orderViolations counts, in the output order, the records whose event
// time is below one already output for their key, how many of the records
// written were never output (records: how many, the flush records aside),
// and the copies of records output more than once.
func orderViolations(got []OrderEvent, records int) (violations, missing, duplicated int, examples []string) {
	last := map[string]int64{}
	seen := map[int64]int{}
	for _, e := range got {
		if e.Key == flushKey {
			continue
		}
		if l, ok := last[e.Key]; ok && e.TS < l {
			violations++
			if violations <= 5 {
				examples = append(examples, fmt.Sprintf("%s id %d at %d after %d", e.Key, e.ID, e.TS, l))
			}
		} else {
			last[e.Key] = e.TS
		}
		seen[e.ID]++
	}
	for _, n := range seen {
		if n > 1 {
			duplicated += n - 1
		}
	}
	missing = max(records-len(seen), 0)
	return violations, missing, duplicated, examples
}

// readOrdered reads every committed record of topic in offset order per
// partition (one key's records are in one partition).
func readOrdered(ctx context.Context, brokers []string, topic string) ([]OrderEvent, error) {
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.JSON[OrderEvent]())
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[OrderEvent]()))
	if err := env.Execute(ctx); err != nil {
		return nil, err
	}
	return got.Values(), nil
}
