// Package demo is the job behind `weir demo`: an event-time pipeline over
// generated, out-of-order order events, run entirely in-process.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Order is one generated order event.
type Order struct {
	ID       int64  `json:"id"`
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
	// Time is the event time in Unix ms; 0 means the producer lost it.
	Time int64 `json:"time"`
}

// Total is the sum of one customer's orders in one window.
type Total struct {
	Customer    string `json:"customer"`
	WindowStart int64  `json:"windowStart"`
	Orders      int64  `json:"orders"`
	Amount      int64  `json:"amount"`
}

// Options scale the demo.
type Options struct {
	// Orders to generate; 0 means 200,000.
	Orders int64
	// Customers; 0 means 50.
	Customers int
	// Parallelism of the job; 0 means 2.
	Parallelism int
	// Seed of the generator.
	Seed uint64
	// Window size; 0 means 10s.
	Window time.Duration
	// OutOfOrder bounds how far back event time jumps; 0 means 2s.
	OutOfOrder time.Duration
	// Show is how many totals to print; 0 means 10.
	Show int
	// Rate limits orders per second (0: as fast as possible).
	Rate int
	// CheckpointDir enables a checkpoint every second into this directory.
	CheckpointDir string
	// Resume restores from the newest checkpoint in CheckpointDir.
	Resume bool
	// RestoreFrom is a savepoint (or checkpoint) directory to start from.
	RestoreFrom string
	// SavepointAfter, with SavepointDir, takes a savepoint after that long
	// and stops the job.
	SavepointAfter time.Duration
	SavepointDir   string
	// MetricsAddr, when set, serves Prometheus metrics on this address
	// (for example 127.0.0.1:9464) while the job runs.
	MetricsAddr string
}

// splits is the number of generator splits (the demo's "partitions").
const splits = 8

// Summary is what a run produced.
type Summary struct {
	Orders      int64         `json:"orders"`
	Totals      int64         `json:"totals"`
	Amount      int64         `json:"amount"`
	Late        int64         `json:"lateOrders"`
	LateAmount  int64         `json:"lateAmount"`
	DeadLetters int64         `json:"deadLetters"`
	Elapsed     time.Duration `json:"elapsedNs"`
	// Stopped is set when the run stopped before the end (interrupted or
	// after a savepoint); Savepoint names the savepoint taken.
	Stopped   bool   `json:"stopped,omitempty"`
	Savepoint string `json:"savepoint,omitempty"`
}

const base = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z

// Generate returns order i of a run with the given options: event time
// advances 10 ms per order with a random step back of up to OutOfOrder;
// one order in 1,000 is 30 s late and one in 5,000 has lost its time.
// Order i belongs to split i % 8.
func Generate(o Options, i int64) Order {
	o = o.withDefaults()
	r := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	t := base + i*10 - r.Int64N(o.OutOfOrder.Milliseconds()+1)
	switch {
	case i%5000 == 4999:
		t = 0
	case i%1000 == 999:
		t -= 30_000
	}
	return Order{ID: i, Customer: fmt.Sprintf("customer-%02d", r.IntN(o.Customers)), Amount: 1 + r.Int64N(100), Time: t}
}

func (o Options) withDefaults() Options {
	if o.Orders == 0 {
		o.Orders = 200_000
	}
	if o.Customers == 0 {
		o.Customers = 50
	}
	if o.Parallelism == 0 {
		o.Parallelism = 2
	}
	if o.Window == 0 {
		o.Window = 10 * time.Second
	}
	if o.OutOfOrder == 0 {
		o.OutOfOrder = 2 * time.Second
	}
	if o.Show == 0 {
		o.Show = 10
	}
	// Every split generates the same number of orders.
	o.Orders = (o.Orders + splits - 1) / splits * splits
	return o
}

// Run builds and runs the demo job, writing a narrative to w.
func Run(ctx context.Context, w io.Writer, o Options) (Summary, error) {
	o = o.withDefaults()
	// A short watermark interval lets event time advance while the demo runs
	// (at full speed the whole input takes well under a second).
	cfg := weir.Config{Parallelism: o.Parallelism, MaxParallelism: 128, AutoWatermarkInterval: 10 * time.Millisecond}
	if o.CheckpointDir != "" {
		cfg.Checkpoint = runtime.CheckpointConfig{Interval: time.Second, Dir: o.CheckpointDir}
	}
	switch {
	case o.RestoreFrom != "":
		cfg.Checkpoint.RestoreFrom = o.RestoreFrom
	case o.Resume:
		dir, id, err := checkpoint.Latest(o.CheckpointDir)
		if err != nil {
			return Summary{}, fmt.Errorf("demo: --resume: %w", err)
		}
		fmt.Fprintf(w, "resuming from checkpoint %d (%s)\n", id, dir)
		cfg.Checkpoint.RestoreFrom = dir
	}
	if o.SavepointDir != "" && cfg.Checkpoint.Dir == "" {
		cfg.Checkpoint.Dir = o.SavepointDir + ".checkpoints"
	}
	env := weir.NewEnvironment(cfg)
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return Summary{}, fmt.Errorf("demo: metrics: %w", err)
		}
		srv := &http.Server{Handler: metrics.Handler(env.Metrics())}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(w, "metrics on http://%s/metrics\n", ln.Addr())
	}
	strategy := watermark.ForBoundedOutOfOrderness[Order](o.OutOfOrder).
		WithTimestamp(func(v Order, _ int64) (int64, bool) { return v.Time, v.Time > 0 })
	perSplit := o.Orders / splits
	pause := int64(0)
	if o.Rate > 0 {
		pause = max(1, int64(o.Rate)/splits/1000) // orders per split per millisecond
	}
	orders := weir.GenerateSplits(env, "orders", splits, perSplit, func(split int, j int64) weir.Record[Order] {
		if pause > 0 && j%pause == 0 {
			time.Sleep(time.Millisecond)
		}
		return weir.Record[Order]{Value: Generate(o, j*splits+int64(split))}
	}, strategy).UID("orders")
	late := weir.NewOutputTag[Order]("late-orders")
	sum := window.AggregateFuncs[Order, [2]int64, [2]int64]{
		AddFn:    func(v Order, acc [2]int64) [2]int64 { return [2]int64{acc[0] + 1, acc[1] + v.Amount} },
		ResultFn: func(acc [2]int64) [2]int64 { return acc },
		MergeFn:  func(a, b [2]int64) [2]int64 { return [2]int64{a[0] + b[0], a[1] + b[1]} },
	}
	windowed := window.AggregateKeyed(weir.KeyBy(orders, func(v Order) string { return v.Customer }), "window-totals",
		window.Tumbling(o.Window), sum, window.LateOutput(late)).UID("window-totals")
	totals := weir.Map(windowed, "to-total", func(r window.Result[string, [2]int64]) Total {
		return Total{Customer: r.Key, WindowStart: r.Window.Start, Orders: r.Value[0], Amount: r.Value[1]}
	})
	out := weir.Collect(totals)
	lateOut := weir.Collect(weir.SideOutput(windowed, late))
	dead := weir.Collect(weir.DeadLetters(orders))

	fmt.Fprintf(w, "weir demo: %d orders from %d customers, event time out of order by up to %v, %v windows per customer, parallelism %d\n",
		o.Orders, o.Customers, o.OutOfOrder, o.Window, o.Parallelism)
	start := time.Now()
	job, err := env.Start(ctx)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Orders: o.Orders}
	if o.SavepointAfter > 0 && o.SavepointDir != "" {
		select {
		case <-time.After(o.SavepointAfter):
			id, err := job.TriggerSavepoint(ctx, o.SavepointDir)
			if err != nil {
				job.Cancel()
				job.Wait()
				return Summary{}, fmt.Errorf("demo: savepoint: %w", err)
			}
			fmt.Fprintf(w, "savepoint %d written to %s; stopping. Restart from it (at any parallelism) with:\n  weir demo --restore %s --parallelism 4\n", id, o.SavepointDir, o.SavepointDir)
			s.Stopped, s.Savepoint = true, o.SavepointDir
			job.Cancel()
		case <-job.Done():
		}
	}
	err = job.Wait()
	s.Elapsed = time.Since(start)
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) && (s.Stopped || ctx.Err() != nil):
		s.Stopped = true
		if o.CheckpointDir != "" && s.Savepoint == "" {
			fmt.Fprintf(w, "interrupted; resume from the latest checkpoint with:\n  weir demo --checkpoint-dir %s --resume\n", o.CheckpointDir)
		}
	default:
		return Summary{}, err
	}
	recs := out.Values()
	s.Totals = int64(len(recs))
	for _, t := range recs {
		s.Amount += t.Amount
	}
	for _, l := range lateOut.Values() {
		s.Late++
		s.LateAmount += l.Amount
	}
	s.DeadLetters = int64(len(dead.Values()))
	fmt.Fprintf(w, "first %d window totals (emitted when the watermark passed each window's end):\n", min(o.Show, len(recs)))
	for _, t := range recs[:min(o.Show, len(recs))] {
		fmt.Fprintf(w, "  %s  window %s  orders %3d  amount %5d\n", t.Customer,
			time.UnixMilli(t.WindowStart).UTC().Format("15:04:05"), t.Orders, t.Amount)
	}
	fmt.Fprintf(w, "summary: %d window totals, %d late orders sent to a side output, %d orders without a timestamp dead-lettered, %.0f orders/s\n",
		s.Totals, s.Late, s.DeadLetters, float64(s.Orders)/s.Elapsed.Seconds())
	if n := job.Metrics().Sum("job", "checkpointsCompleted"); n > 0 {
		fmt.Fprintf(w, "checkpoints completed: %d\n", n)
	}
	return s, nil
}
