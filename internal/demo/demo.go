// Package demo is the job behind `weir demo`: event-time ordering of
// catch-up and live traffic on the
// embedded Kafka broker. It produces a few days of history of an inventory
// and order stream into several topics and partitions at uneven rates,
// starts a job that reads them from the beginning with catch-up by end
// offsets, sorts every item's events by event time (ordering.Sort), sums
// them in tumbling windows per customer (late records to a side output,
// undecodable ones to dead letters), runs a short live phase, and stops.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/internal/lockedwriter"
	"github.com/weirproject/weir/internal/progress"
	"github.com/weirproject/weir/internal/shutdown"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Event is one record of the inventory and order stream, as JSON in Kafka.
type Event struct {
	Kind     string `json:"kind"` // receipt, order, return
	Item     string `json:"item"`
	Customer string `json:"customer"`
	Qty      int64  `json:"qty"`
	Amount   int64  `json:"amount"`
	// Time is the event time in Unix ms, also the Kafka record timestamp.
	Time int64 `json:"time"`
	Live bool  `json:"live,omitempty"`
	// HeldBack marks a live record its producer held back for two hours
	// (it cannot be put in order any more).
	HeldBack bool `json:"heldBack,omitempty"`

	// From the Kafka record, for the sort's tiebreak and the agent's order
	// ids: set by the deserializer (the producer leaves them zero, so they
	// are not written), and kept in snapshots of the sort's held records,
	// so that a restored record keeps its place and its id.
	Partition int32 `json:"partition,omitempty"`
	Offset    int64 `json:"offset,omitempty"`
	TopicNo   int   `json:"topicNo,omitempty"`
}

// Order is a live order as the inventory agent receives it. ID names its
// Kafka record (topic/partition@offset): it identifies the order across
// runs, also inside the agent's checkpointed state.
type Order struct {
	ID   string `json:"id"`
	Item string `json:"item"`
	Qty  int64  `json:"qty"`
}

// Decision is the inventory agent's output for one order.
type Decision struct {
	Order string `json:"order"`
	Text  string `json:"text"`
}

// Total is the sum of one customer's events in one window.
type Total struct {
	Customer    string `json:"customer"`
	WindowStart int64  `json:"windowStart"`
	Events      int64  `json:"events"`
	Amount      int64  `json:"amount"`
}

// Topics are the demo's topics and their partitions.
var Topics = []struct {
	Name       string
	Partitions int32
	Kind       string
}{{"inventory-receipts", 3, "receipt"}, {"orders", 3, "order"}, {"returns", 2, "return"}}

// Options scale the demo.
type Options struct {
	// Orders is the number of history records over all topics; 0 means
	// 120,000.
	Orders int64
	// Days of history; 0 means 3.
	Days int
	// Customers and Items; 0 means 50 and 500.
	Customers, Items int
	// Parallelism of the job; 0 means 2.
	Parallelism int
	// Seed of the generator.
	Seed uint64
	// Window size; 0 means 1h.
	Window time.Duration
	// OutOfOrder is the watermark bound of the Kafka source (how far live
	// records of different partitions may be apart); 0 means 1s.
	OutOfOrder time.Duration
	// Show is how many totals to print; 0 means 8.
	Show int
	// Live is how long the live phase lasts; 0 means 3s (negative: none).
	Live time.Duration
	// Rate is live records per second; 0 means 2,000.
	Rate int
	// Malformed is how many undecodable records the history holds; 0 means
	// 5 (negative: none).
	Malformed int
	// HeldBack is how many live records a producer holds back for two
	// hours; 0 means 3 (negative: none).
	HeldBack int
	// KafkaData, when set, persists the embedded broker there. On a
	// restart with data, history is not produced again.
	KafkaData string
	// CheckpointDir enables a checkpoint every second into this directory.
	CheckpointDir string
	// Resume restores from the newest checkpoint in CheckpointDir.
	Resume bool
	// StateBackend is the keyed-state backend: "memory" (default) or
	// "pebble" (incremental checkpoints).
	StateBackend string
	// RestoreFrom is a savepoint (or checkpoint) directory to start from.
	RestoreFrom string
	// SavepointAfter, with SavepointDir, takes a savepoint after that long
	// and stops the job.
	SavepointAfter time.Duration
	// SavepointDir is where the savepoint of SavepointAfter or Stop is
	// written; "" with Stop means shutdown.DefaultDir("", now).
	SavepointDir string
	// Stop, when closed (the first SIGINT or SIGTERM), stops the job with a
	// savepoint (Flink's "stop"): the narrative says where it is and the
	// command that resumes from it, and Run returns the summary with
	// Stopped and Savepoint set. Closed before the job starts, Run stops
	// without one (there is no state yet). nil: never.
	Stop <-chan struct{}
	// Progress receives the progress display (catch-up, long checkpoints,
	// the restore): a status line on a terminal, plain lines elsewhere
	// (package internal/progress). nil: none.
	Progress io.Writer
	// MetricsAddr, when set, serves Prometheus metrics on this address
	// (for example 127.0.0.1:9464) while the job runs.
	MetricsAddr string
	// UIAddr, when set, serves the live dashboard (package dashboard) on
	// this address (for example 127.0.0.1:8081; no host means loopback)
	// while the job runs.
	UIAddr string
}

// MaxParallelism is the demo job's number of key groups, the largest
// parallelism it runs at (and restores savepoints at).
const MaxParallelism = 128

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Orders == 0 {
		o.Orders = 120_000
	}
	def(&o.Days, 3)
	def(&o.Customers, 50)
	def(&o.Items, 500)
	def(&o.Parallelism, 2)
	def(&o.Show, 8)
	def(&o.Rate, 2000)
	def(&o.Malformed, 5)
	def(&o.HeldBack, 3)
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.OutOfOrder == 0 {
		o.OutOfOrder = time.Second
	}
	if o.Live == 0 {
		o.Live = 3 * time.Second
	}
	return o
}

// Summary is what a run produced and what the job made of it.
type Summary struct {
	// Produced by this run: decodable records (History + Live + HeldBack),
	// their amount, and the malformed ones.
	Produced       int64 `json:"produced"`
	History        int64 `json:"history"`
	Live           int64 `json:"live"`
	HeldBack       int64 `json:"heldBack"`
	ProducedAmount int64 `json:"producedAmount"`
	Malformed      int64 `json:"malformed"`
	// CaughtUp is the time from job start until every topic had caught
	// up with its end offsets; HistoryPerSec the history records over it.
	CaughtUp      time.Duration `json:"caughtUpNs"`
	HistoryPerSec float64       `json:"historyPerSec"`
	// Sorted records left the sort; OrderViolations arrived behind its
	// watermark, HistoryViolations of them were history records.
	Sorted            int64 `json:"sorted"`
	OrderViolations   int64 `json:"orderViolations"`
	HistoryViolations int64 `json:"historyViolations"`
	// OutOfOrder counts records the sort released below an earlier one of
	// the same item (checked independently of the sort).
	OutOfOrder int64 `json:"outOfOrder"`
	// AgentInputs are the live orders this run sent to the inventory
	// agent; AgentResumed the orders an earlier run had sent it, unfinished
	// in the checkpoint this run restored (0 after a run that finished);
	// AgentDecisions the agent's outputs in this run, and AgentDecided the
	// distinct orders they decide, at most AgentInputs + AgentResumed
	// (one decision per order: all four add up when no order is decided
	// twice).
	AgentInputs    int64 `json:"agentInputs"`
	AgentResumed   int64 `json:"agentResumed"`
	AgentDecisions int64 `json:"agentDecisions"`
	AgentDecided   int64 `json:"agentDecided"`
	// Totals are window totals; Windowed and Amount what they add up to.
	Totals      int64         `json:"totals"`
	Windowed    int64         `json:"windowed"`
	Amount      int64         `json:"amount"`
	Late        int64         `json:"late"`
	LateAmount  int64         `json:"lateAmount"`
	DeadLetters int64         `json:"deadLetters"`
	Elapsed     time.Duration `json:"elapsedNs"`
	// Windows are the window totals as they were emitted, LateRecords the
	// records the windows sent to the late output, and Decisions the
	// inventory agent's outputs (not in the JSON summary: tests compare
	// them window by window and order by order).
	Windows     []Total    `json:"-"`
	LateRecords []Event    `json:"-"`
	Decisions   []Decision `json:"-"`
	// Stopped is set when the run stopped before the end (interrupted or
	// after a savepoint); Savepoint names the savepoint taken.
	Stopped   bool   `json:"stopped,omitempty"`
	Savepoint string `json:"savepoint,omitempty"`
}

// weights gives every partition (in Topics order) its share of the
// history: log-uniform over two decades, so rates are uneven.
func weights(seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	var w []float64
	for _, t := range Topics {
		for range t.Partitions {
			w = append(w, math.Pow(10, rng.Float64()*2))
		}
	}
	return w
}

// Counts returns the number of history records of every partition (in
// Topics order).
func Counts(o Options) []int64 {
	o = o.withDefaults()
	w := weights(o.Seed)
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	out := make([]int64, len(w))
	var n int64
	for i, x := range w {
		out[i] = int64(float64(o.Orders) * x / sum)
		n += out[i]
	}
	out[0] += o.Orders - n // the rounding
	return out
}

// Generate returns history record i of partition p (global index in
// Topics order) of n records, for a history ending at end (Unix ms):
// timestamps ascend within the partition over the history's days.
func Generate(o Options, p int, i, n, end int64) Event {
	o = o.withDefaults()
	r := rand.New(rand.NewPCG(o.Seed, uint64(p)<<40|uint64(i)))
	span := int64(o.Days) * 24 * 3600 * 1000
	step := max(span/max(n, 1), 1)
	ts := end - span + i*span/max(n, 1) + r.Int64N(step)
	return event(o, r, kindOf(p), ts)
}

func kindOf(p int) string {
	for _, t := range Topics {
		if p < int(t.Partitions) {
			return t.Kind
		}
		p -= int(t.Partitions)
	}
	return ""
}

func event(o Options, r *rand.Rand, kind string, ts int64) Event {
	e := Event{Kind: kind, Item: fmt.Sprintf("item-%03d", r.IntN(o.Items)),
		Customer: fmt.Sprintf("customer-%02d", r.IntN(o.Customers)), Qty: 1 + r.Int64N(10), Time: ts}
	e.Amount = e.Qty * (1 + r.Int64N(50))
	return e
}

// kafkaLogs passes the Kafka source's catch-up lines (and warnings) to the
// narrative.
type kafkaLogs struct{ slog.Handler }

func (h kafkaLogs) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && !strings.HasPrefix(r.Message, "kafka") {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}
func (h kafkaLogs) WithAttrs(as []slog.Attr) slog.Handler { return kafkaLogs{h.Handler.WithAttrs(as)} }
func (h kafkaLogs) WithGroup(n string) slog.Handler       { return kafkaLogs{h.Handler.WithGroup(n)} }

// checker counts, per item, records the sort released below an earlier
// one (the sort is keyed by item and the checker chained to it, but a
// shared map keeps it independent of that).
type checker struct {
	mu         sync.Mutex
	last       map[string]int64
	outOfOrder int64
	sorted     atomic.Int64
}

func (c *checker) see(e Event, ts int64) {
	c.sorted.Add(1)
	c.mu.Lock()
	if l, ok := c.last[e.Item]; ok && ts < l {
		c.outOfOrder++
	} else {
		c.last[e.Item] = ts
	}
	c.mu.Unlock()
}

// Run starts the broker, produces the history, runs the job through the
// catch-up and a live phase, stops it and reports, writing a narrative to w.
func Run(ctx context.Context, w io.Writer, o Options) (Summary, error) {
	var s Summary
	if err := o.validate(); err != nil {
		return s, err
	}
	o = o.withDefaults()
	rep := progress.New(progress.Options{Out: o.Progress})
	defer rep.Close()
	lw := lockedwriter.New(rep.Wrap(w)) // serializes the narrative and the log lines
	w = lw
	// A resume needs a checkpoint: look for it before any work.
	var resumeDir string
	var resumeID int64
	if o.Resume && o.RestoreFrom == "" {
		var err error
		resumeDir, resumeID, err = checkpoint.Latest(o.CheckpointDir)
		if errors.Is(err, checkpoint.ErrNoSnapshot) {
			return s, fmt.Errorf("demo: --resume: %s holds no complete checkpoint (the earlier run stopped before its first one): run without --resume", o.CheckpointDir)
		}
		if err != nil {
			return s, fmt.Errorf("demo: --resume: %w", err)
		}
	}

	// 1. The broker and the history.
	topics := map[string]int32{}
	var names []string
	for _, t := range Topics {
		topics[t.Name] = t.Partitions
		names = append(names, t.Name)
	}
	b, err := broker.Start(broker.Options{Topics: topics, DataDir: o.KafkaData})
	if err != nil {
		return s, fmt.Errorf("demo: %w", err)
	}
	defer b.Close()
	where := "in memory"
	if o.KafkaData != "" {
		where = "data in " + o.KafkaData
	}
	fmt.Fprintf(w, "weir demo: embedded Kafka broker on %s (%s); topics %s\n", b.Addr(), where, topicList())
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return s, fmt.Errorf("demo: producer: %w", err)
	}
	defer cl.Close()
	existing, err := recordsIn(ctx, cl, names)
	if err != nil {
		return s, fmt.Errorf("demo: %w", err)
	}
	t0 := time.Now()
	// A stop before the job has started has nothing to save: it ends the
	// production of the history.
	prodCtx, prodCancel := context.WithCancel(ctx)
	defer prodCancel()
	go func() {
		select {
		case <-o.Stop:
			prodCancel()
		case <-prodCtx.Done():
		}
	}()
	stoppedEarly := func() bool {
		select {
		case <-o.Stop:
			fmt.Fprintf(w, "stopped before the job started: no savepoint (there is no state yet)\n")
			s.Stopped = true
			return true
		default:
			return false
		}
	}
	if existing > 0 {
		if o.KafkaData != "" && !historyComplete(o.KafkaData) {
			return s, fmt.Errorf("%w: %s holds %d records but not the mark of a complete history (%s): an earlier run was interrupted while producing it; delete the directory or use a new --kafka-data",
				errIncompleteHistory, o.KafkaData, existing, HistoryMarker)
		}
		fmt.Fprintf(w, "the broker already holds %d records (from an earlier run): not producing history again\n", existing)
	} else {
		if err := produceHistory(prodCtx, w, cl, o, t0.UnixMilli(), &s); err != nil {
			if stoppedEarly() {
				return s, nil
			}
			return s, err
		}
		if o.KafkaData != "" {
			if err := markHistoryComplete(o.KafkaData, s.History); err != nil {
				return s, err
			}
		}
	}

	// 2. The job.
	cfg := weir.Config{Parallelism: o.Parallelism, MaxParallelism: MaxParallelism, AutoWatermarkInterval: 10 * time.Millisecond,
		Logger: slog.New(kafkaLogs{slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})})}
	if o.CheckpointDir != "" {
		cfg.Checkpoint = runtime.CheckpointConfig{Interval: time.Second, Dir: o.CheckpointDir}
	}
	cfg.StateBackend = runtime.StateBackendConfig{Kind: o.StateBackend}
	switch {
	case o.RestoreFrom != "":
		cfg.Checkpoint.RestoreFrom = o.RestoreFrom
	case o.Resume:
		fmt.Fprintf(w, "resuming from checkpoint %d (%s): the Kafka source continues from its offsets\n", resumeID, resumeDir)
		cfg.Checkpoint.RestoreFrom = resumeDir
	}
	if cfg.Checkpoint.RestoreFrom != "" && o.KafkaData == "" && existing == 0 {
		fmt.Fprintf(w, "note: the in-memory broker holds a new history (same offsets, new times); use --kafka-data to keep the broker's data across runs\n")
	}
	if o.SavepointDir != "" && cfg.Checkpoint.Dir == "" {
		cfg.Checkpoint.Dir = siblingLocation(o.SavepointDir, ".checkpoints")
	}
	env := weir.NewEnvironment(cfg)
	rep.Watch(env.Metrics().Snapshot)
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return s, fmt.Errorf("demo: metrics: %w", err)
		}
		srv := &http.Server{Handler: metrics.Handler(env.Metrics())}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(w, "metrics on http://%s/metrics\n", ln.Addr())
	}
	stop := make(chan struct{})
	var stopOnce sync.Once
	closeStop := func() { stopOnce.Do(func() { close(stop) }) }
	defer closeStop()
	src := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: names, Stop: stop}, kafka.WithMetadata(kafka.JSON[Event]()))
	topicNo := map[string]int{}
	for i, t := range Topics {
		topicNo[t.Name] = i
	}
	msgs := weir.FromSource(env, "events", src, watermark.ForBoundedOutOfOrderness[kafka.Message[Event]](o.OutOfOrder)).UID("events")
	events := weir.Map(msgs, "metadata", func(m kafka.Message[Event]) Event {
		e := m.Value
		e.TopicNo, e.Partition, e.Offset = topicNo[m.Topic], m.Partition, m.Offset
		return e
	})
	violations := weir.NewOutputTag[Event]("order-violations")
	sorted := ordering.Sort(weir.KeyBy(events, func(e Event) string { return e.Item }), "sort-by-item",
		ordering.SortOptions[Event]{Violations: violations,
			Tiebreak: func(e Event) (int64, int64) { return int64(e.TopicNo)<<32 | int64(e.Partition), e.Offset }}).UID("sort-by-item")
	chk := &checker{last: map[string]int64{}}
	checked := weir.Transform(sorted, "check-order", func() runtime.OneInputOperator[Event, Event] {
		return &checkOp{c: chk}
	})
	late := weir.NewOutputTag[Event]("late")
	sum := window.AggregateFuncs[Event, [2]int64, [2]int64]{
		AddFn:    func(v Event, acc [2]int64) [2]int64 { return [2]int64{acc[0] + 1, acc[1] + v.Amount} },
		ResultFn: func(acc [2]int64) [2]int64 { return acc },
		MergeFn:  func(a, b [2]int64) [2]int64 { return [2]int64{a[0] + b[0], a[1] + b[1]} },
	}
	windowed := window.AggregateKeyed(weir.KeyBy(checked, func(e Event) string { return e.Customer }), "window-totals",
		window.Tumbling(o.Window), sum, window.LateOutput(late)).UID("window-totals")
	totals := weir.Map(windowed, "to-total", func(r window.Result[string, [2]int64]) Total {
		return Total{Customer: r.Key, WindowStart: r.Window.Start, Events: r.Value[0], Amount: r.Value[1]}
	})
	out := weir.Collect(totals)
	lateOut := weir.Collect(weir.SideOutput(windowed, late))

	// The inventory agent: every live order, in event-time order per item,
	// goes to an agent that keeps the item's recent demand in its memory and
	// asks a model (the offline one: no endpoint is reachable here) whether
	// to reorder. Model calls run off the subtask goroutine; the agent holds
	// back watermarks until every order before them has been decided.
	liveOrders := weir.FlatMap(checked, "live-orders", func(e Event, emit func(Order)) {
		if e.Live && e.Kind == "order" {
			emit(Order{ID: fmt.Sprintf("%s/%d@%d", Topics[e.TopicNo].Name, e.Partition, e.Offset), Item: e.Item, Qty: e.Qty})
		}
	})
	decisions := agent.Apply[string, Order, Decision](weir.KeyBy(liveOrders, func(e Order) string { return e.Item }),
		"inventory-agent", inventoryAgent(o.Seed), agent.Options{}).UID("inventory-agent")
	agentIn := weir.Collect(liveOrders)
	agentOut := weir.Collect(decisions)
	violOut := weir.Collect(weir.SideOutput(sorted, violations))
	dead := weir.Collect(weir.DeadLetters(msgs))

	fmt.Fprintf(w, "job: Kafka source (catch-up by end offsets, parallelism %d) -> sort by event time per item -> %v windows per customer (late records to a side output)\n",
		o.Parallelism, o.Window)
	if stoppedEarly() {
		return s, nil
	}
	start := time.Now()
	endRestore := func() {}
	if cfg.Checkpoint.RestoreFrom != "" {
		endRestore = rep.Phase("restoring from " + cfg.Checkpoint.RestoreFrom)
	}
	job, err := env.Start(ctx)
	endRestore()
	if err != nil {
		return s, err
	}
	if o.UIAddr != "" {
		ui, err := dashboard.Start(o.UIAddr, job, dashboard.Options{})
		if err != nil {
			job.Cancel()
			job.Wait()
			return s, fmt.Errorf("demo: %w", err)
		}
		defer ui.Close()
		fmt.Fprintf(w, "dashboard on %s\n", ui.URL())
	}
	savepoint, bySignal := stopTrigger(o, job.Done())
	takeSavepoint := func() error {
		dir := o.SavepointDir
		if dir == "" {
			dir = shutdown.DefaultDir("", time.Now())
		}
		end := rep.Phase("taking a savepoint into " + dir)
		id, err := shutdown.StopWithSavepoint(ctx, job, dir)
		end()
		switch {
		case errors.Is(err, shutdown.ErrFinished):
			return nil // the job ended on its own: its summary follows
		case err != nil:
			return fmt.Errorf("demo: %w", err)
		}
		s.Stopped, s.Savepoint = true, dir
		if bySignal.Load() {
			fmt.Fprint(w, shutdown.ResumeLine(id, dir, Command(o, "--restore", dir)))
			return nil
		}
		fmt.Fprintf(w, "savepoint %d written to %s; stopping. Restart from it with (at any parallelism: change --parallelism):\n  %s\n",
			id, dir, Command(o, "--restore", dir))
		return nil
	}

	// 3. Wait for the catch-up, then the live phase, then stop.
	phase := func() error {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for !src.CaughtUp() {
			select {
			case <-tick.C:
			case <-savepoint:
				return takeSavepoint()
			case <-job.Done():
				return nil
			}
		}
		s.CaughtUp = caughtUpAt(src).Sub(start)
		if s.History > 0 && s.CaughtUp > 0 {
			s.HistoryPerSec = float64(s.History) / s.CaughtUp.Seconds()
		}
		fmt.Fprintf(w, "every topic caught up %v after the start (%.0f history records/s); live for %v at %d records/s\n",
			s.CaughtUp.Round(time.Millisecond), s.HistoryPerSec, max(o.Live, 0), o.Rate)
		if err := produceLive(ctx, cl, o, &s, savepoint, job.Done()); err != nil {
			if errors.Is(err, errSavepoint) {
				return takeSavepoint()
			}
			return err
		}
		fmt.Fprintf(w, "live phase over; stopping the source at the end offsets Kafka reports now\n")
		closeStop()
		select {
		case <-savepoint:
			return takeSavepoint()
		case <-job.Done():
		}
		return nil
	}
	if err := phase(); err != nil {
		job.Cancel()
		job.Wait()
		return s, err
	}
	err = job.Wait()
	s.Elapsed = time.Since(start)
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) && (s.Stopped || ctx.Err() != nil):
		s.Stopped = true
		if o.CheckpointDir != "" && s.Savepoint == "" {
			fmt.Fprintf(w, "interrupted; resume from the latest checkpoint with:\n  %s\n", Command(o, "--resume"))
		}
	default:
		return s, err
	}

	// 4. The summary.
	recs := out.Values()
	s.Totals = int64(len(recs))
	for _, t := range recs {
		s.Windowed += t.Events
		s.Amount += t.Amount
	}
	s.Windows = recs
	s.LateRecords = lateOut.Values()
	for _, l := range s.LateRecords {
		s.Late++
		s.LateAmount += l.Amount
	}
	for _, v := range violOut.Values() {
		s.OrderViolations++
		if !v.Live {
			s.HistoryViolations++
		}
	}
	s.DeadLetters = int64(len(dead.Values()))
	s.AgentInputs = int64(len(agentIn.Values()))
	s.AgentResumed = job.Metrics().Sum("inventory-agent", "inputsRestored")
	decided := agentOut.Values()
	s.Decisions = decided
	s.AgentDecisions = int64(len(decided))
	orders := map[string]bool{}
	for _, d := range decided {
		orders[d.Order] = true
	}
	s.AgentDecided = int64(len(orders))
	s.Sorted = chk.sorted.Load()
	chk.mu.Lock()
	s.OutOfOrder = chk.outOfOrder
	chk.mu.Unlock()
	fmt.Fprintf(w, "first %d window totals (emitted when the watermark passed each window's end):\n", min(o.Show, len(recs)))
	for _, t := range recs[:min(o.Show, len(recs))] {
		fmt.Fprintf(w, "  %s  window %s  events %4d  amount %6d\n", t.Customer,
			time.UnixMilli(t.WindowStart).UTC().Format("2006-01-02 15:04"), t.Events, t.Amount)
	}
	fmt.Fprintf(w, "summary:\n")
	fmt.Fprintf(w, "  records produced     %d (history %d, live %d, held back %d) + %d malformed\n", s.Produced, s.History, s.Live, s.HeldBack, s.Malformed)
	if s.CaughtUp > 0 {
		fmt.Fprintf(w, "  caught up after      %v (%.0f history records/s)\n", s.CaughtUp.Round(time.Millisecond), s.HistoryPerSec)
	} else {
		fmt.Fprintf(w, "  caught up after      (stopped before every topic caught up)\n")
	}
	fmt.Fprintf(w, "  sorted by item       %d records; order violations %d (history %d, live %d), out of order after the sort %d\n",
		s.Sorted, s.OrderViolations, s.HistoryViolations, s.OrderViolations-s.HistoryViolations, s.OutOfOrder)
	fmt.Fprintf(w, "  window totals        %d, over %d records, amount %d\n", s.Totals, s.Windowed, s.Amount)
	fmt.Fprintf(w, "  inventory agent      %d live orders decided (of %d: %d read in this run, %d unfinished in the restored checkpoint); %d decisions, model calls off the mailbox thread\n",
		s.AgentDecided, s.AgentInputs+s.AgentResumed, s.AgentInputs, s.AgentResumed, s.AgentDecisions)
	shown := 0
	for _, d := range decided {
		if strings.Contains(d.Text, "reorder (") && shown < 3 {
			fmt.Fprintf(w, "    %s\n", d.Text)
			shown++
		}
	}
	fmt.Fprintf(w, "  late (side output)   %d records, amount %d\n", s.Late, s.LateAmount)
	fmt.Fprintf(w, "  dead letters         %d (undecodable records)\n", s.DeadLetters)
	fmt.Fprintf(w, "  throughput           %.0f records/s over %v\n", float64(s.Sorted+s.DeadLetters)/s.Elapsed.Seconds(), s.Elapsed.Round(time.Millisecond))
	if n := job.Metrics().Sum("job", "checkpointsCompleted"); n > 0 {
		fmt.Fprintf(w, "  checkpoints          %d completed\n", n)
	}
	if s.HeldBack > 0 {
		fmt.Fprintf(w, "the %d live records held back for two hours arrived behind the watermark: no processor can sort what it has not seen, so they are counted as order violations and the windows send them to the late output\n", s.HeldBack)
	}
	return s, nil
}

// stopTrigger returns a channel that is closed when the job must stop with
// a savepoint: after o.SavepointAfter, or when o.Stop is closed (then
// bySignal is set before the close). It is nil when neither can happen.
func stopTrigger(o Options, done <-chan struct{}) (fire <-chan time.Time, bySignal *atomic.Bool) {
	bySignal = new(atomic.Bool)
	var after <-chan time.Time
	if o.SavepointAfter > 0 && o.SavepointDir != "" {
		after = time.After(o.SavepointAfter)
	}
	if after == nil && o.Stop == nil {
		return nil, bySignal
	}
	ch := make(chan time.Time)
	go func() {
		select {
		case <-after:
		case <-o.Stop:
			bySignal.Store(true)
		case <-done:
			return
		}
		close(ch)
	}()
	return ch, bySignal
}

type checkOp struct {
	runtime.Base[Event]
	c *checker
}

func (o *checkOp) ProcessRecord(r runtime.Record[Event]) error {
	o.c.see(r.Value, r.Timestamp)
	o.Out.Collect(r)
	return nil
}

func topicList() string {
	var parts []string
	for _, t := range Topics {
		parts = append(parts, fmt.Sprintf("%s×%d", t.Name, t.Partitions))
	}
	return strings.Join(parts, ", ")
}

func caughtUpAt(src *kafka.Source[kafka.Message[Event]]) time.Time {
	var at time.Time
	for _, p := range src.Status() {
		if p.TopicCaughtUpAt.After(at) {
			at = p.TopicCaughtUpAt
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	return at
}

func recordsIn(ctx context.Context, cl *kgo.Client, topics []string) (int64, error) {
	l, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("list end offsets: %w", err)
	}
	var n int64
	l.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// partitionOf returns the topic and partition of global partition p.
func partitionOf(p int) (string, int32) {
	for _, t := range Topics {
		if p < int(t.Partitions) {
			return t.Name, int32(p)
		}
		p -= int(t.Partitions)
	}
	panic("demo: no partition")
}

func produceHistory(ctx context.Context, w io.Writer, cl *kgo.Client, o Options, end int64, s *Summary) error {
	t := time.Now()
	counts := Counts(o)
	// The malformed records go to the orders topic, spread over the history.
	malformedAt := map[[2]int64]bool{}
	if o.Malformed > 0 {
		rng := rand.New(rand.NewPCG(o.Seed, 9))
		for range o.Malformed {
			p := int(Topics[0].Partitions) + rng.IntN(int(Topics[1].Partitions))
			malformedAt[[2]int64{int64(p), rng.Int64N(max(counts[p], 1))}] = true
		}
	}
	var recs []*kgo.Record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		recs = recs[:0]
		if err != nil {
			return fmt.Errorf("demo: produce: %w", err)
		}
		return nil
	}
	var desc []string
	for p, n := range counts {
		topic, part := partitionOf(p)
		desc = append(desc, fmt.Sprintf("%s/%d:%d", topic, part, n))
		for i := range n {
			e := Generate(o, p, i, n, end)
			v, _ := jsonEvent(e)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Key: []byte(e.Item), Value: v, Timestamp: time.UnixMilli(e.Time)})
			s.History++
			s.Produced++
			s.ProducedAmount += e.Amount
			if malformedAt[[2]int64{int64(p), i}] {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(`{"kind":"order","item":`), Timestamp: time.UnixMilli(e.Time)})
				s.Malformed++
			}
			if len(recs) >= 10_000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "produced %d history records over %d days (%s) and %d malformed ones, in %v\n",
		s.History, o.Days, strings.Join(desc, " "), s.Malformed, time.Since(t).Round(time.Millisecond))
	return nil
}

var errSavepoint = errors.New("savepoint due")

// produceLive produces live records stamped with the wall clock for
// o.Live, then the held-back ones (stamped two hours ago), and flushes.
func produceLive(ctx context.Context, cl *kgo.Client, o Options, s *Summary, savepoint <-chan time.Time, done <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(o.Seed, 11))
	nParts := 0
	for _, t := range Topics {
		nParts += int(t.Partitions)
	}
	var mu sync.Mutex
	var perr error
	send := func(e Event, p int) {
		topic, part := partitionOf(p)
		v, _ := jsonEvent(e)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Key: []byte(e.Item), Value: v, Timestamp: time.UnixMilli(e.Time)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
			})
		s.Produced++
		s.ProducedAmount += e.Amount
	}
	if o.Live > 0 && o.Rate > 0 {
		per := max(o.Rate/100, 1) // 100 bursts a second
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(o.Live)
		for time.Now().Before(deadline) {
			select {
			case <-tick.C:
			case <-savepoint:
				return errSavepoint
			case <-done:
				return nil
			case <-ctx.Done():
				return nil
			}
			now := time.Now().UnixMilli()
			for range per {
				p := rng.IntN(nParts)
				e := event(o, rng, kindOf(p), now)
				e.Live = true
				send(e, p)
				s.Live++
			}
		}
	}
	if o.HeldBack > 0 {
		now := time.Now().UnixMilli()
		for range o.HeldBack {
			p := rng.IntN(nParts)
			e := event(o, rng, kindOf(p), now-2*3600*1000)
			e.Live, e.HeldBack = true, true
			send(e, p)
			s.HeldBack++
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil // interrupted
	}
	mu.Lock()
	defer mu.Unlock()
	if perr != nil {
		return fmt.Errorf("demo: produce live: %w", perr)
	}
	return nil
}

func jsonEvent(e Event) ([]byte, error) { return json.Marshal(e) }

// inventoryAgent keeps each item's ordered quantity in short-term memory
// and asks the model whether to reorder when it passes a threshold.
func inventoryAgent(seed uint64) *agent.Agent {
	const reorderAt = 20
	return &agent.Agent{
		Models: map[string]model.ChatModel{"planner": &model.Offline{Seed: int64(seed),
			Latency: model.Latency{Dist: "exponential", Mean: 2 * time.Millisecond}}},
		Actions: []agent.Action{agent.NewAction("review-order", func(c *agent.RunnerContext, ev agent.Event) error {
			e, err := agent.Input[Order](ev)
			if err != nil {
				return err
			}
			demand, _, err := agent.Recall[int64](c.ShortTerm(), "demand")
			if err != nil {
				return err
			}
			demand += e.Qty
			if demand < reorderAt {
				if err := c.ShortTerm().Set("demand", demand); err != nil {
					return err
				}
				c.Output(Decision{Order: e.ID, Text: fmt.Sprintf("%s: demand %d, no reorder yet", e.Item, demand)})
				return nil
			}
			resp, err := c.Chat("planner", model.Request{Messages: []model.Message{model.User(
				fmt.Sprintf("Item %s sold %d units since the last reorder; draft a purchase order.", e.Item, demand))}})
			if err != nil {
				return err
			}
			if err := c.ShortTerm().Set("demand", int64(0)); err != nil {
				return err
			}
			c.Output(Decision{Order: e.ID, Text: fmt.Sprintf("%s: demand %d, reorder (%.40s)", e.Item, demand, resp.Message.Content)})
			return nil
		}, agent.TypeInput)},
	}
}

// siblingLocation returns loc (a directory path or a URL) with suffix
// appended to its last path element, keeping a URL's query.
func siblingLocation(loc, suffix string) string {
	if !checkpoint.IsURL(loc) {
		return loc + suffix
	}
	u, err := url.Parse(loc)
	if err != nil {
		return loc + suffix
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + suffix
	u.RawPath = ""
	return u.String()
}
