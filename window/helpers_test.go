package window_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// ev is the record type of most tests.
type ev struct {
	Key string
	TS  int64
	N   int64
}

func evKey(e ev) string { return e.Key }
func sumEv(a, b ev) ev  { a.N += b.N; return a }

// eagerBounded is BoundedOutOfOrderness(b) that emits its watermark after
// every record instead of periodically, so the watermark each record sees
// is exactly max(timestamps so far) - b - 1: deterministic, whatever the
// scheduling. Run it with AutoWatermarkInterval < 0.
func eagerBounded(b time.Duration) watermark.Strategy[ev] {
	return watermark.ForGenerator(func() watermark.Generator[ev] {
		g := watermark.BoundedOutOfOrderness[ev](b)
		return watermark.GeneratorFuncs[ev]{Event: func(e ev, ts int64, out watermark.Output) {
			g.OnEvent(e, ts, out)
			g.OnPeriodicEmit(out)
		}}
	}).WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true })
}

// tb is what run needs of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// run executes env with a generous deadline and fails the test on error.
func run(t tb, env *weir.Environment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
}

// feed is a source the test pushes records into while the job runs. It
// has one split (use it with parallelism 1) and ends when closed.
type feed[T any] struct {
	mu      sync.Mutex
	pending []runtime.Record[T]
	closed  bool
	notify  chan struct{}
}

func newFeed[T any]() *feed[T] { return &feed[T]{notify: make(chan struct{}, 1)} }

func (f *feed[T]) push(recs ...runtime.Record[T]) {
	f.mu.Lock()
	f.pending = append(f.pending, recs...)
	f.mu.Unlock()
	f.signal()
}

func (f *feed[T]) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.signal()
}

func (f *feed[T]) signal() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *feed[T]) CreateReader(runtime.SourceContext) (runtime.Reader[T], error) { return f, nil }

func (f *feed[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	f.mu.Lock()
	recs, closed := f.pending, f.closed
	f.pending = nil
	f.mu.Unlock()
	for _, r := range recs {
		out.Collect(0, r.Value, r.Timestamp)
	}
	switch {
	case closed:
		out.FinishSplit(0)
		return runtime.Done, nil
	case len(recs) > 0:
		return runtime.More, nil
	}
	return runtime.Wait, nil
}

func (f *feed[T]) Ready() <-chan struct{} { return f.notify }
func (f *feed[T]) Close() error           { return nil }

// entry is one element a logSink saw: a record or a watermark.
type entry[T any] struct {
	Rec       runtime.Record[T]
	Watermark int64
	IsWM      bool
}

func (e entry[T]) String() string {
	if e.IsWM {
		return fmt.Sprintf("wm(%d)", e.Watermark)
	}
	return fmt.Sprintf("%v@%d", e.Rec.Value, e.Rec.Timestamp)
}

// logSink records, in order and visible at once (no hand-over at
// watermarks as with weir.Collect), every record and watermark its
// subtasks receive. Use it with parallelism 1 for a total order.
type logSink[T any] struct {
	mu  sync.Mutex
	log []entry[T]
}

func sinkTo[T any](s weir.Stream[T]) *logSink[T] {
	l := &logSink[T]{}
	weir.Transform(s, "log", func() runtime.OneInputOperator[T, struct{}] { return &logOp[T]{l: l} })
	return l
}

func (l *logSink[T]) entries() []entry[T] {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]entry[T](nil), l.log...)
}

func (l *logSink[T]) records() []runtime.Record[T] {
	var out []runtime.Record[T]
	for _, e := range l.entries() {
		if !e.IsWM {
			out = append(out, e.Rec)
		}
	}
	return out
}

type logOp[T any] struct {
	runtime.Base[struct{}]
	l *logSink[T]
}

func (o *logOp[T]) ProcessRecord(r runtime.Record[T]) error {
	o.l.mu.Lock()
	o.l.log = append(o.l.log, entry[T]{Rec: r})
	o.l.mu.Unlock()
	return nil
}

func (o *logOp[T]) ProcessWatermark(ts int64) error {
	o.l.mu.Lock()
	o.l.log = append(o.l.log, entry[T]{Watermark: ts, IsWM: true})
	o.l.mu.Unlock()
	return nil
}

func (o *logOp[T]) EndInput() error { return nil }

func rec(key string, ts, n int64) runtime.Record[ev] {
	return runtime.Record[ev]{Value: ev{Key: key, TS: ts, N: n}, Timestamp: ts}
}
