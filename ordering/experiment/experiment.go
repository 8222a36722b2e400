// Package experiment is the event-time ordering experiment: many Kafka
// topics with days of history at uneven rates, read from the start by one
// job that sorts every item's events by event time and then goes on with
// live traffic, under three idleness policies side by side. `weir
// experiment ordering` runs it; a test runs it small.
//
// For each policy the same history (same seed, a fresh embedded broker) is
// produced, then one job reads every topic (one Kafka source per topic, one
// source subtask per partition), unions them with a clock stream
// (ordering.Clock), keys by item and sorts (ordering.Sort). The readers of
// each partition start after a different delay (the staggered start of
// connections that the seed describes). Once the history is released, live
// records stamped with the wall clock are produced for a while.
//
// Policies:
//
//	end-offsets  catch-up by end offsets (kafka.CatchUpEndOffsets with
//	             kafka.LiveStayIdle): a topic leaves the minimum when every
//	             partition has read up to its end offset at start.
//	timeout      one tier: a partition (split) without records for Timeout
//	             goes idle (watermark.Strategy.WithIdleness).
//	two-tier     the partition tier of "timeout", plus a stream tier: a
//	             topic's stream without records for Timeout/2 is marked
//	             idle downstream.
//
// With Config.Timeouts the time-out policies run once per time-out (a
// sweep; `weir experiment ordering --timeouts 0.4s,2s,10s,60s`), so that
// the trade-off they force (order against latency) can be set beside end
// offsets, which need no time-out.
//
// Measures per policy: records (history + live), outOfOrder (records
// released with a timestamp below one already released for the same item),
// orderViolations (the sort's counter: records that arrived behind the
// watermark), releaseLatencyMs of live records (release wall time minus the
// record's timestamp, which is its production time), and
// historyEventsPerSec, the replay rate of the history, beside
// rawEventsPerSec, franz-go's consumer reading the same history in the same
// run.
//
// The replay rate is measured in a pass of its own: on the broker holding
// the history, before the staggered pass, the same job (same policy, same
// operators) runs once with every reader starting at once, and the rate is
// the history records over the time from the first record read by any
// reader (stamped by the first operator after the sources) to the release
// of the last history record by the sort (stamped by an operator chained
// to the sort's output).
// Under end offsets that is the moment every partition has caught up and
// its records have passed the sort. Job start-up and the deliberate start
// stagger are not in it; the time-out policies' wait for their time-outs
// is (they cannot release the tail of the history before it), which is why
// their rates are lower. The staggered pass reports its own wall time as
// historyStaggeredMs.
package experiment

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Config scales the experiment. Zero fields take the defaults of Defaults.
type Config struct {
	Topics, Partitions int
	// Items is the number of distinct keys (items) events are about.
	Items int
	// HistoryRecords is the total of history records over all partitions;
	// partitions get uneven shares (weights drawn log-uniformly over two
	// decades).
	HistoryRecords int
	// HistorySpan is the event-time span of the history, ending at the
	// start of the run.
	HistorySpan time.Duration
	// Stagger is the largest delay before a partition's reader starts.
	Stagger time.Duration
	// Timeout is the idleness time-out of the time-out policies.
	Timeout time.Duration
	// Timeouts, when set, sweep the time-out: each time-out policy runs
	// once per value (Result.TimeoutMs says which), end-offsets once, and
	// the replay passes (HistoryEventsPerSec, RawEventsPerSec) are left
	// out, since they measure the reader, not the policy.
	Timeouts []time.Duration
	// NoReplay leaves the replay passes out (as a sweep does).
	NoReplay bool
	// Lag and Tick are the clock stream's.
	Lag, Tick time.Duration
	// Live is how long live records are produced, LiveRate how many per
	// second (over all partitions).
	Live     time.Duration
	LiveRate int
	// SortParallelism is the parallelism of the sort.
	SortParallelism int
	// HeldEncoded makes the sort hold its records encoded by eventCodec
	// (ordering.SortOptions.HeldCodec) rather than as values, for
	// comparing the two: encoded, the GC does not scan the held history,
	// but each record costs an encode, a decode and the decoded Item's
	// allocation, which in this experiment cost more CPU than the scanning
	// saved (BENCHMARKS.md, "Ordering by event time").
	HeldEncoded bool
	// Seed makes the history (and the start delays) reproducible.
	Seed uint64
	// Policies to run, in order; empty means all three.
	Policies []string
	// Logger receives progress; nil means none.
	Logger *slog.Logger
}

// Defaults are the seed's shape (13 topics x 3 partitions, a week of
// history, uneven rates per partition, readers that start at different
// moments, then live traffic), scaled to run in about a minute. The history
// is a million records so that its replay lasts about a second: with
// fewer, the readers' start-up (39 clients, metadata, offset listings) and
// the sort's final release are a large part of the replay time, and
// historyEventsPerSec measures them rather than the replay (200k records
// give 10-20 % less).
//
// The time-out is what a careful user would set, following the usual
// advice for idleness time-outs (an order of magnitude above the longest normal silence of a
// partition): the longest normal silences here are the readers' start
// stagger (1.5 s) and the gaps of the sparsest partitions in live traffic
// (about a second at 2,000 records/s), so 15 s. A time-out below the
// stagger (the 0.4 s this experiment used before) makes the time-out
// policies fail at start-up by construction; the sweep (Timeouts) shows
// the whole trade-off: short time-outs lose order, long ones hold the
// history's tail and sparse live partitions back by up to the time-out.
var Defaults = Config{Topics: 13, Partitions: 3, Items: 2000, HistoryRecords: 1_000_000,
	HistorySpan: 7 * 24 * time.Hour, Stagger: 1500 * time.Millisecond, Timeout: 15 * time.Second,
	Lag: 50 * time.Millisecond, Tick: 10 * time.Millisecond, Live: 5 * time.Second, LiveRate: 2000,
	SortParallelism: 2, Seed: 3}

// Policies are the policy names, in the order they run by default.
var Policies = []string{"two-tier", "timeout", "end-offsets"}

func (c Config) withDefaults() Config {
	d := Defaults
	pick := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	pickD := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 {
			*v = dv
		}
	}
	pick(&c.Topics, d.Topics)
	pick(&c.Partitions, d.Partitions)
	pick(&c.Items, d.Items)
	pick(&c.HistoryRecords, d.HistoryRecords)
	pick(&c.LiveRate, d.LiveRate)
	pick(&c.SortParallelism, d.SortParallelism)
	pickD(&c.HistorySpan, d.HistorySpan)
	pickD(&c.Timeout, d.Timeout)
	pickD(&c.Lag, d.Lag)
	pickD(&c.Tick, d.Tick)
	if c.Stagger < 0 {
		c.Stagger = 0
	}
	if c.Live < 0 {
		c.Live = 0
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if len(c.Policies) == 0 {
		c.Policies = Policies
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Result is one policy's outcome.
type Result struct {
	Policy string `json:"policy"`
	// TimeoutMs is the idleness time-out the policy ran with (0 for
	// end-offsets, which has none).
	TimeoutMs          float64 `json:"timeoutMs"`
	Records            int64   `json:"records"`
	HistoryRecords     int64   `json:"historyRecords"`
	LiveRecords        int64   `json:"liveRecords"`
	OutOfOrder         int64   `json:"outOfOrder"`
	OutOfOrderFraction float64 `json:"outOfOrderFraction"`
	// HistoryOutOfOrder and LiveOutOfOrder split OutOfOrder by phase. A
	// live record that reaches the job more than the clock's lag after its
	// timestamp cannot be ordered (the clock's watermark has passed it), so live ones can
	// occur under any policy on a loaded machine; history ones must not
	// under end offsets.
	HistoryOutOfOrder int64 `json:"historyOutOfOrder"`
	LiveOutOfOrder    int64 `json:"liveOutOfOrder"`
	// HistoryOutOfOrderFraction is HistoryOutOfOrder over the history
	// records: the figure to set beside the seed's (its job was a week of
	// history and live traffic, dominated by the history), independent of
	// how long the live phase lasts.
	HistoryOutOfOrderFraction float64 `json:"historyOutOfOrderFraction"`
	// OrderViolations counts records that reached the sort behind its
	// watermark (ordering's "orderViolations").
	OrderViolations  int64   `json:"orderViolations"`
	ReleaseLatencyMs Latency `json:"releaseLatencyMs"`
	// HistoryEventsPerSec is the replay rate of the pre-loaded history:
	// history records over the time from the first record read by any
	// reader to the release by the sort of the last history record (every
	// partition has then caught up and its records have passed the sort).
	// It is measured in a replay pass of the policy's job without the
	// start stagger, before the staggered pass that measures the order;
	// see the package documentation.
	HistoryEventsPerSec float64 `json:"historyEventsPerSec"`
	// RawEventsPerSec is franz-go's own consumer reading the same history
	// from the same broker in the same run (one client, all partitions,
	// records counted, not decoded); HistoryVsRaw is
	// HistoryEventsPerSec / RawEventsPerSec.
	RawEventsPerSec float64 `json:"rawEventsPerSec"`
	HistoryVsRaw    float64 `json:"historyVsRaw"`
	// HistoryStaggeredMs is the wall time of the staggered pass from the
	// job's start to the release of its last history record: the stagger,
	// the wait for catch-up (or time-outs) and the replay together.
	HistoryStaggeredMs float64 `json:"historyStaggeredMs"`
}

// Event is one record of the experiment, as JSON in Kafka.
type Event struct {
	Item string `json:"item"`
	// TS is the event time (ms); also the Kafka record timestamp.
	TS   int64 `json:"ts"`
	Live bool  `json:"live,omitempty"`
	// Filled from the Kafka record for the tiebreak.
	Topic     int   `json:"-"`
	Partition int32 `json:"-"`
	Offset    int64 `json:"-"`
}

// eventCodec is a binary state.Codec for Event, with which the sort can
// hold the history encoded, out of the garbage collector's sight
// (Config.HeldEncoded, ordering.SortOptions.HeldCodec):
// uvarint(len(Item)) Item, then TS, Topic, Partition and Offset as varints
// and Live as one byte.
type eventCodec struct{}

func (eventCodec) Append(b []byte, e Event) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(e.Item)))
	b = append(b, e.Item...)
	b = binary.AppendVarint(b, e.TS)
	b = binary.AppendVarint(b, int64(e.Topic))
	b = binary.AppendVarint(b, int64(e.Partition))
	b = binary.AppendVarint(b, e.Offset)
	if e.Live {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

func (eventCodec) Decode(b []byte) (Event, error) {
	var e Event
	n, m := binary.Uvarint(b)
	if m <= 0 || uint64(len(b)-m) < n {
		return e, errors.New("experiment: event encoding cut short in its item")
	}
	e.Item, b = string(b[m:m+int(n)]), b[m+int(n):]
	var v [4]int64
	for i := range v {
		x, m := binary.Varint(b)
		if m <= 0 {
			return e, errors.New("experiment: event encoding cut short in its numbers")
		}
		v[i], b = x, b[m:]
	}
	if len(b) != 1 {
		return e, errors.New("experiment: event encoding has no live flag or bytes after it")
	}
	e.TS, e.Topic, e.Partition, e.Offset, e.Live = v[0], int(v[1]), int32(v[2]), v[3], b[0] == 1
	return e, nil
}

// Run runs the configured policies one after the other and writes one JSON
// object per policy to out (if not nil) as each finishes.
func Run(ctx context.Context, cfg Config, out io.Writer) ([]Result, error) {
	cfg = cfg.withDefaults()
	for _, p := range cfg.Policies {
		if !slices.Contains(Policies, p) {
			return nil, fmt.Errorf("experiment: unknown policy %q; choose from %v", p, Policies)
		}
	}
	for _, d := range cfg.Timeouts {
		if d < time.Millisecond {
			return nil, fmt.Errorf("experiment: time-out %v in the sweep; want 1ms or more", d)
		}
	}
	t0 := time.Now()
	hist := history(cfg, t0)
	var results []Result
	for _, p := range cfg.Policies {
		runs := []Config{cfg}
		if len(cfg.Timeouts) > 0 {
			runs = runs[:0]
			for _, d := range cfg.Timeouts {
				c := cfg
				c.Timeout, c.NoReplay = d, true
				runs = append(runs, c)
				if p == "end-offsets" {
					break // it has no time-out: once
				}
			}
		}
		for _, c := range runs {
			r, err := runPolicy(ctx, c, p, hist)
			if err != nil {
				return results, fmt.Errorf("experiment: policy %s: %w", p, err)
			}
			results = append(results, r)
			if out != nil {
				if err := json.NewEncoder(out).Encode(r); err != nil {
					return results, err
				}
			}
		}
	}
	return results, nil
}

func topicName(i int) string { return fmt.Sprintf("stream-%02d", i) }

// history generates every partition's history: uneven counts, timestamps
// ascending within a partition over [t0-span, t0).
func history(cfg Config, t0 time.Time) [][][]Event {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	weights, sum := partitionWeights(cfg, rng)
	end := t0.UnixMilli()
	start := end - cfg.HistorySpan.Milliseconds()
	out := make([][][]Event, cfg.Topics)
	for t := range cfg.Topics {
		out[t] = make([][]Event, cfg.Partitions)
		for p := range cfg.Partitions {
			n := int(float64(cfg.HistoryRecords) * weights[t*cfg.Partitions+p] / sum)
			ts := make([]int64, n)
			for i := range ts {
				ts[i] = start + rng.Int64N(end-start)
			}
			slices.Sort(ts)
			evs := make([]Event, n)
			for i := range evs {
				evs[i] = Event{Item: fmt.Sprintf("item-%d", rng.IntN(cfg.Items)), TS: ts[i]}
			}
			out[t][p] = evs
		}
	}
	return out
}

// partitionWeights draws each partition's share of the traffic, history
// and live alike: log-uniform over two decades (1 to 100), in the order
// topic by topic, partition by partition; sum is their total.
func partitionWeights(cfg Config, rng *rand.Rand) (weights []float64, sum float64) {
	weights = make([]float64, cfg.Topics*cfg.Partitions)
	for i := range weights {
		weights[i] = math.Pow(10, rng.Float64()*2) // 1..100
		sum += weights[i]
	}
	return weights, sum
}

// delays returns each (topic, partition) reader's start delay.
func delays(cfg Config) [][]time.Duration {
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	out := make([][]time.Duration, cfg.Topics)
	for t := range out {
		out[t] = make([]time.Duration, cfg.Partitions)
		for p := range out[t] {
			if cfg.Stagger > 0 {
				out[t][p] = time.Duration(rng.Int64N(int64(cfg.Stagger)))
			}
		}
	}
	return out
}

func produceAll(ctx context.Context, cl *kgo.Client, evs [][][]Event) error {
	var recs []*kgo.Record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		recs = recs[:0]
		return err
	}
	for t := range evs {
		for p := range evs[t] {
			for _, e := range evs[t][p] {
				b, _ := json.Marshal(e)
				recs = append(recs, &kgo.Record{Topic: topicName(t), Partition: int32(p), Key: []byte(e.Item),
					Value: b, Timestamp: time.UnixMilli(e.TS)})
				if len(recs) == 10_000 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	return flush()
}

// measure is the sink: it checks the order per item and times live
// releases.
type measure struct {
	mu         sync.Mutex
	last       map[string]int64
	outOfOrder [2]int64 // history, live
	history    atomic.Int64
	live       atomic.Int64
	latencies  []float64
	histDone   chan struct{}
	histWant   int64
	doneOnce   sync.Once
}

type measureOp struct {
	runtime.Base[struct{}]
	m *measure
}

func (o *measureOp) ProcessRecord(r runtime.Record[Event]) error {
	m := o.m
	e := r.Value
	var now int64
	if e.Live {
		now = time.Now().UnixMilli()
	}
	m.mu.Lock()
	if last, ok := m.last[e.Item]; ok && e.TS < last {
		if e.Live {
			m.outOfOrder[1]++
		} else {
			m.outOfOrder[0]++
		}
	} else {
		m.last[e.Item] = e.TS
	}
	if e.Live {
		m.latencies = append(m.latencies, float64(now-e.TS))
	}
	m.mu.Unlock()
	if e.Live {
		m.live.Add(1)
	} else if m.history.Add(1) == m.histWant {
		m.doneOnce.Do(func() { close(m.histDone) })
	}
	return nil
}

// streamIdle is the stream tier of the two-tier policy: it marks its output
// idle when no record has passed for the time-out, and active again at the
// next record. Its output is idle while it or its input says so.
type streamIdle struct {
	runtime.Base[Event]
	timeout  int64
	last     int64 // processing time of the last record
	timedOut bool  // this tier's verdict
	inIdle   bool  // the input's status
	outIdle  bool  // what was last forwarded
	armed    bool
}

func (o *streamIdle) Open(ctx *runtime.Context, out runtime.Output[Event]) error {
	o.Base.Open(ctx, out)
	o.last = time.Now().UnixMilli()
	o.arm(o.last + o.timeout)
	return nil
}

func (o *streamIdle) status() {
	if idle := o.timedOut || o.inIdle; idle != o.outIdle {
		o.outIdle = idle
		o.Out.EmitIdle(idle)
	}
}

func (o *streamIdle) arm(at int64) {
	o.armed = true
	o.Ctx.RegisterProcessingTimer(at, func(now int64) {
		o.armed = false
		if o.timedOut {
			return
		}
		if now-o.last >= o.timeout {
			o.timedOut = true
			o.status()
			return
		}
		o.arm(o.last + o.timeout)
	})
}

func (o *streamIdle) ProcessRecord(r runtime.Record[Event]) error {
	o.last = time.Now().UnixMilli()
	o.timedOut = false
	o.status()
	if !o.armed {
		o.arm(o.last + o.timeout)
	}
	o.Out.Collect(r)
	return nil
}

func (o *streamIdle) ProcessWatermark(ts int64) error {
	o.inIdle = false
	if !o.timedOut {
		o.status()
		o.Out.EmitWatermark(ts)
	}
	return nil
}

func (o *streamIdle) ProcessIdle(idle bool) error {
	o.inIdle = idle
	o.status()
	return nil
}

// job is one built job of a policy and what measures it.
type job struct {
	env *weir.Environment
	m   *measure
	// firstRead is the wall time (Unix ns) of the first record past any
	// source, sortedAt of the release of the last history record by the
	// sort; 0 until then.
	firstRead, sortedAt atomic.Int64
}

// buildJob builds the policy's job on the broker at addrs: one Kafka source
// per topic (readers delayed by dl, if not nil), the clock stream, the sort
// and the measuring sink.
func buildJob(cfg Config, policy string, addrs []string, dl [][]time.Duration, histN int64) *job {
	j := &job{}
	env := weir.NewEnvironment(weir.Config{Parallelism: cfg.SortParallelism, AutoWatermarkInterval: 20 * time.Millisecond,
		Logger: cfg.Logger})
	var streams []weir.Stream[Event]
	for t := range cfg.Topics {
		opts := kafka.Options{Brokers: addrs, Topics: []string{topicName(t)}, Live: kafka.LiveStayIdle}
		if dl != nil {
			opts.BeforeStart = func(ctx context.Context, subtask int) error {
				select {
				case <-time.After(dl[t][subtask%cfg.Partitions]):
				case <-ctx.Done():
				}
				return nil
			}
		}
		strategy := watermark.ForMonotonous[kafka.Message[Event]]()
		if policy != "end-offsets" {
			opts.CatchUp = kafka.CatchUpOff
			strategy = strategy.WithIdleness(cfg.Timeout)
		}
		src := kafka.NewSource(opts, kafka.WithMetadata(kafka.JSON[Event]()))
		s := weir.FromSource(env, topicName(t), src, strategy).Parallelism(cfg.Partitions)
		first := &j.firstRead
		ev := weir.Map(s, topicName(t)+"-meta", func(m kafka.Message[Event]) Event {
			if first.Load() == 0 {
				first.CompareAndSwap(0, time.Now().UnixNano())
			}
			e := m.Value
			e.Topic, e.Partition, e.Offset = t, m.Partition, m.Offset
			return e
		}).Parallelism(cfg.Partitions)
		if policy == "two-tier" {
			timeout := cfg.Timeout.Milliseconds() / 2
			// Rebalanced, so that each stream-tier subtask sees records of
			// all the topic's partitions (the topic's stream), not one
			// partition's (which would make it a second partition tier).
			ev = weir.Transform(weir.Rebalance(ev), topicName(t)+"-stream-idle", func() runtime.OneInputOperator[Event, Event] {
				return &streamIdle{timeout: max(timeout, 1)}
			}).Parallelism(cfg.Partitions)
		}
		streams = append(streams, ev)
	}
	streams = append(streams, ordering.Clock[Event](env, "clock", cfg.Lag, cfg.Tick))
	in := weir.Union(streams[0], streams[1:]...)
	sortOpts := ordering.SortOptions[Event]{
		Tiebreak: func(e Event) (int64, int64) { return int64(e.Topic)<<32 | int64(e.Partition), e.Offset }}
	if cfg.HeldEncoded {
		sortOpts.HeldCodec = eventCodec{}
	}
	sorted := ordering.Sort(weir.KeyBy(in, func(e Event) string { return e.Item }), "sort", sortOpts)
	m := &measure{last: map[string]int64{}, histDone: make(chan struct{}), histWant: histN}
	if histN == 0 {
		m.doneOnce.Do(func() { close(m.histDone) })
	}
	// Stamp the release of the last history record by the sort (chained
	// to it, so the stamp is not delayed by the hop to the sink).
	released := &atomic.Int64{}
	sorted = weir.Map(sorted, "released", func(e Event) Event {
		if !e.Live && released.Add(1) == histN {
			j.sortedAt.Store(time.Now().UnixNano())
		}
		return e
	})
	weir.Transform(weir.Rebalance(sorted), "measure", func() runtime.OneInputOperator[Event, struct{}] {
		return &measureOp{m: m}
	}).Parallelism(1)
	j.env, j.m = env, m
	return j
}

// awaitHistory waits until every history record has been released.
func awaitHistory(ctx context.Context, jb *runtime.Job, m *measure) error {
	select {
	case <-m.histDone:
		return nil
	case <-jb.Done():
		return fmt.Errorf("job ended early: %w", jb.Wait())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replay runs the policy's job without stagger until the history is
// released and returns the replay rate (see Result.HistoryEventsPerSec).
func replay(ctx context.Context, cfg Config, policy string, addrs []string, histN int64) (float64, error) {
	if histN == 0 {
		return 0, nil
	}
	j := buildJob(cfg, policy, addrs, nil, histN)
	jb, err := j.env.Start(ctx)
	if err != nil {
		return 0, err
	}
	defer func() {
		jb.Cancel()
		jb.Wait()
	}()
	if err := awaitHistory(ctx, jb, j.m); err != nil {
		return 0, err
	}
	elapsed := time.Duration(j.sortedAt.Load() - j.firstRead.Load())
	cfg.Logger.Info("replay", "policy", policy, "firstRead", time.Unix(0, j.firstRead.Load()), "sortedAt", time.Unix(0, j.sortedAt.Load()), "elapsed", elapsed)
	return float64(histN) / elapsed.Seconds(), nil
}

// rawConsume reads the history with franz-go's consumer alone (one client,
// every topic from its start) and returns records per second from the
// client's creation to the last record.
func rawConsume(ctx context.Context, cfg Config, addrs []string, histN int64) (float64, error) {
	if histN == 0 {
		return 0, nil
	}
	var topics []string
	for t := range cfg.Topics {
		topics = append(topics, topicName(t))
	}
	// From the client's creation: franz-go starts fetching in the
	// background then, and a first poll may return everything at once.
	first := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var n int64
	for n < histN {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, fmt.Errorf("raw consume: %v", errs[0].Err)
		}
		n += int64(fs.NumRecords())
	}
	return float64(n) / time.Since(first).Seconds(), nil
}

func runPolicy(ctx context.Context, cfg Config, policy string, hist [][][]Event) (Result, error) {
	log := cfg.Logger.With("policy", policy)
	topics := map[string]int32{}
	for t := range cfg.Topics {
		topics[topicName(t)] = int32(cfg.Partitions)
	}
	b, err := broker.Start(broker.Options{Topics: topics})
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	if err := produceAll(ctx, cl, hist); err != nil {
		return Result{}, err
	}
	var histN int64
	for t := range hist {
		for p := range hist[t] {
			histN += int64(len(hist[t][p]))
		}
	}
	log.Info("history produced", "records", histN)

	var raw, rate float64
	if !cfg.NoReplay {
		if raw, err = rawConsume(ctx, cfg, b.Addrs(), histN); err != nil {
			return Result{}, err
		}
		if rate, err = replay(ctx, cfg, policy, b.Addrs(), histN); err != nil {
			return Result{}, fmt.Errorf("replay pass: %w", err)
		}
		log.Info("history replayed", "eventsPerSec", rate, "rawEventsPerSec", raw)
	}

	j := buildJob(cfg, policy, b.Addrs(), delays(cfg), histN)
	env, m := j.env, j.m
	start := time.Now()
	job, err := env.Start(ctx)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		job.Cancel()
		job.Wait()
	}()
	if err := awaitHistory(ctx, job, m); err != nil {
		return Result{}, err
	}
	histElapsed := time.Since(start)
	log.Info("history released", "records", histN, "elapsed", histElapsed)

	// Live: records stamped with the wall clock, spread over partitions
	// with the history's uneven weights (the sparsest partitions get a
	// record every second or so at the default rate).
	var liveN int64
	if cfg.Live > 0 && cfg.LiveRate > 0 {
		weights, wsum := partitionWeights(cfg, rand.New(rand.NewPCG(cfg.Seed, 1)))
		cum := make([]float64, len(weights))
		acc := 0.0
		for i, w := range weights {
			acc += w / wsum
			cum[i] = acc
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, 3))
		interval := time.Second / 100 // produce in 100 bursts per second
		per := max(cfg.LiveRate/100, 1)
		tick := time.NewTicker(interval)
		deadline := time.Now().Add(cfg.Live)
		for time.Now().Before(deadline) {
			select {
			case <-tick.C:
			case <-ctx.Done():
				tick.Stop()
				return Result{}, ctx.Err()
			}
			recs := make([]*kgo.Record, 0, per)
			now := time.Now().UnixMilli()
			for range per {
				e := Event{Item: fmt.Sprintf("item-%d", rng.IntN(cfg.Items)), TS: now, Live: true}
				bs, _ := json.Marshal(e)
				i := min(sort.SearchFloat64s(cum, rng.Float64()), len(cum)-1)
				t, p := i/cfg.Partitions, i%cfg.Partitions
				recs = append(recs, &kgo.Record{Topic: topicName(t), Partition: int32(p), Key: []byte(e.Item),
					Value: bs, Timestamp: time.UnixMilli(now)})
			}
			for _, r := range recs {
				cl.Produce(ctx, r, nil)
			}
			liveN += int64(len(recs))
		}
		tick.Stop()
		if err := cl.Flush(ctx); err != nil {
			return Result{}, err
		}
		// A time-out policy may hold the last live records for the
		// time-out (a sparse partition's last record holds the watermark
		// until the partition is marked idle).
		wait := 30 * time.Second
		if policy != "end-offsets" {
			wait += cfg.Timeout
		}
		deadline = time.Now().Add(wait)
		for m.live.Load() < liveN {
			if time.Now().After(deadline) {
				return Result{}, fmt.Errorf("only %d of %d live records released after %v", m.live.Load(), liveN, wait)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	total := histN + liveN
	ooo := m.outOfOrder[0] + m.outOfOrder[1]
	r := Result{Policy: policy, Records: total, HistoryRecords: histN, LiveRecords: liveN, OutOfOrder: ooo,
		HistoryOutOfOrder: m.outOfOrder[0], LiveOutOfOrder: m.outOfOrder[1],
		OrderViolations:     env.Metrics().Sum("sort", "orderViolations"),
		HistoryEventsPerSec: rate, RawEventsPerSec: raw, ReleaseLatencyMs: latency(m.latencies),
		HistoryStaggeredMs: float64(histElapsed.Microseconds()) / 1000}
	if raw > 0 {
		r.HistoryVsRaw = rate / raw
	}
	if total > 0 {
		r.OutOfOrderFraction = float64(ooo) / float64(total)
	}
	if histN > 0 {
		r.HistoryOutOfOrderFraction = float64(m.outOfOrder[0]) / float64(histN)
	}
	if policy != "end-offsets" {
		r.TimeoutMs = float64(cfg.Timeout.Microseconds()) / 1000
	}
	log.Info("done", "outOfOrder", r.OutOfOrder, "violations", r.OrderViolations)
	return r, nil
}

func latency(xs []float64) Latency {
	if len(xs) == 0 {
		return Latency{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Latency{P50: q(0.5), P99: q(0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}
