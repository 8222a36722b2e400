package asyncio

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// elem is one element a recording sink received.
type elem struct {
	kind byte // 'r' record, 'w' watermark, 'i' idle, 'a' active
	v    int
	ts   int64
}

// recording keeps, per sink subtask, the interleaving of records,
// watermarks and status changes it received.
type recording struct {
	mu  sync.Mutex
	per map[int][]elem
}

func (r *recording) subtask(i int) []elem {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.per[i]
}

func (r *recording) values() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var vs []int
	for _, log := range r.per {
		for _, e := range log {
			if e.kind == 'r' {
				vs = append(vs, e.v)
			}
		}
	}
	return vs
}

// record ends s in a sink that records the interleaving.
func record(s weir.Stream[int]) *recording {
	rec := &recording{per: map[int][]elem{}}
	weir.Transform(s, "record", func() runtime.OneInputOperator[int, struct{}] { return &recordOp{rec: rec} })
	return rec
}

type recordOp struct {
	runtime.Base[struct{}]
	rec *recording
	log []elem
}

func (o *recordOp) ProcessRecord(r runtime.Record[int]) error {
	o.log = append(o.log, elem{kind: 'r', v: r.Value, ts: r.Timestamp})
	return nil
}

func (o *recordOp) ProcessWatermark(ts int64) error {
	o.log = append(o.log, elem{kind: 'w', ts: ts})
	return nil
}

func (o *recordOp) ProcessIdle(idle bool) error {
	k := byte('a')
	if idle {
		k = 'i'
	}
	o.log = append(o.log, elem{kind: k})
	return nil
}

func (o *recordOp) EndInput() error { return nil }

func (o *recordOp) Close() error {
	o.rec.mu.Lock()
	o.rec.per[o.Ctx.Subtask] = o.log
	o.rec.mu.Unlock()
	return nil
}

// checkNotLate checks that no record follows a watermark >= its timestamp
// and returns the number of watermarks.
func checkNotLate(t testing.TB, log []elem) int {
	t.Helper()
	wm, n := watermark.Min, 0
	for i, e := range log {
		switch e.kind {
		case 'w':
			if e.ts <= wm {
				t.Fatalf("element %d: watermark %d after %d", i, e.ts, wm)
			}
			wm = e.ts
			n++
		case 'r':
			if e.ts <= wm {
				t.Fatalf("element %d: record %d with timestamp %d after watermark %d", i, e.v, e.ts, wm)
			}
		}
	}
	return n
}

func execute(env *weir.Environment) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return env.Execute(ctx)
}

// maxTracker counts concurrent calls and remembers the maximum.
type maxTracker struct{ cur, max, calls atomic.Int64 }

func (m *maxTracker) enter() {
	m.calls.Add(1)
	c := m.cur.Add(1)
	for {
		old := m.max.Load()
		if c <= old || m.max.CompareAndSwap(old, c) {
			return
		}
	}
}

func (m *maxTracker) leave() { m.cur.Add(-1) }

type mode struct {
	name string
	add  func(s weir.Stream[int], name string, f Func[int, int], opts Options) weir.Stream[int]
}

var modes = []mode{{"ordered", Ordered[int, int]}, {"unordered", Unordered[int, int]}}

// punctuatedEvery makes a strategy whose splits emit ts-1 after every
// record whose value/2 is a multiple of k.
func punctuatedEvery(k int) watermark.Strategy[int] {
	return watermark.ForGenerator(func() watermark.Generator[int] {
		return watermark.Punctuated(func(v int, ts int64) (int64, bool) { return ts - 1, (v/2)%k == 0 })
	})
}

func TestRandomLatencies(t *testing.T) {
	const n = 600
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = time.Duration(rng.IntN(300)) * time.Microsecond
	}
	// Input v has v%3 results, 3v, 3v+1; timestamps never decrease.
	f := func(_ context.Context, v int) ([]int, error) {
		time.Sleep(lat[v])
		out := make([]int, v%3)
		for k := range out {
			out[k] = 3*v + k
		}
		return out, nil
	}
	var want []int
	recs := make([]runtime.Record[int], n)
	for v := range n {
		recs[v] = runtime.Record[int]{Value: v, Timestamp: int64(v / 3)}
		for k := range v % 3 {
			want = append(want, 3*v+k)
		}
	}
	for _, m := range modes {
		for _, par := range []int{1, 2} {
			for _, chained := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/p%d/chained=%v", m.name, par, chained), func(t *testing.T) {
					env := weir.NewEnvironment(weir.Config{Parallelism: par, DisableChaining: !chained})
					src := weir.FromRecords(env, "src", recs, punctuatedEvery(3))
					rec := record(m.add(src, "enrich", f, Options{Capacity: 8}))
					if err := execute(env); err != nil {
						t.Fatal(err)
					}
					got := rec.values()
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Fatalf("got %d results, want %d (each exactly once)", len(got), len(want))
					}
					inversions := 0
					for s := range par {
						log := rec.subtask(s)
						if nwm := checkNotLate(t, log); nwm < 10 {
							t.Fatalf("subtask %d: only %d watermarks; the test wants many", s, nwm)
						}
						if last := log[len(log)-1]; last.kind != 'w' || last.ts != watermark.Max {
							t.Fatalf("subtask %d: last element %+v, want the final watermark", s, last)
						}
						prev := -1
						for _, e := range log {
							if e.kind != 'r' {
								continue
							}
							if e.v < prev {
								inversions++
								if m.name == "ordered" {
									t.Fatalf("subtask %d: %d after %d in ordered mode", s, e.v, prev)
								}
							}
							prev = e.v
						}
					}
					t.Logf("%d results, %d out of input order", len(got), inversions)
					if sum := env.Metrics().Sum("enrich", "completed"); sum != n {
						t.Fatalf("completed = %d, want %d", sum, n)
					}
					if g := env.Metrics().Sum("enrich", "inFlight"); g != 0 {
						t.Fatalf("inFlight = %d at the end", g)
					}
				})
			}
		}
	}
}

func TestCapacityBoundsCallsInFlight(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			const n = 20
			var track maxTracker
			release := make(chan struct{})
			f := func(ctx context.Context, v int) ([]int, error) {
				track.enter()
				defer track.leave()
				select {
				case <-release:
					return []int{v}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			env := weir.NewEnvironment(weir.Config{})
			vals := make([]int, n)
			for i := range vals {
				vals[i] = i
			}
			src := weir.FromSlice(env, "src", vals, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
			rec := record(m.add(src, "blocked", f, Options{Capacity: 3}))
			done := make(chan error, 1)
			go func() { done <- execute(env) }()
			// Wait (a liveness bound, not a timing assertion) until the
			// operator is full, then give it the chance to overrun.
			for deadline := time.Now().Add(30 * time.Second); track.cur.Load() < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("only %d calls started", track.cur.Load())
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if c := track.calls.Load(); c != 3 {
				t.Fatalf("%d calls started while 3 were blocked, want 3", c)
			}
			if g := env.Metrics().Sum("blocked", "inFlight"); g != 3 {
				t.Fatalf("inFlight gauge = %d, want 3", g)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if mx := track.max.Load(); mx != 3 {
				t.Fatalf("max calls in flight = %d, want 3", mx)
			}
			got := rec.values()
			slices.Sort(got)
			if !slices.Equal(got, vals) {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestCallErrorFailsJob(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var track maxTracker
			boom := errors.New("boom")
			f := func(ctx context.Context, v int) ([]int, error) {
				track.enter()
				defer track.leave()
				if v == 7 {
					return nil, boom
				}
				<-ctx.Done() // every other call hangs until cancelled
				return nil, ctx.Err()
			}
			env := weir.NewEnvironment(weir.Config{})
			src := weir.FromSlice(env, "src", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
			record(m.add(src, "lookup-customer", f, Options{}))
			err := execute(env)
			if err == nil {
				t.Fatal("job succeeded")
			}
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), `"lookup-customer"`) || !strings.Contains(err.Error(), "input 7") {
				t.Fatalf("error %q should wrap boom and name the operator and the input", err)
			}
			if c := track.cur.Load(); c != 0 {
				t.Fatalf("%d calls still running after Execute returned", c)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	f := func(ctx context.Context, v int) ([]int, error) {
		if v == 2 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []int{v}, nil
	}
	env := weir.NewEnvironment(weir.Config{})
	src := weir.FromSlice(env, "src", []int{0, 1, 2, 3}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
	record(Ordered(src, "slow", f, Options{Timeout: 10 * time.Millisecond, Retries: 1}))
	err := execute(env)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "timed out after 10ms") ||
		!strings.Contains(err.Error(), "attempt 2 of 2") || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("error %v, want a time-out of operator slow after 2 attempts", err)
	}
}

func TestRetries(t *testing.T) {
	for _, retries := range []int{2, 1} {
		t.Run(fmt.Sprint(retries), func(t *testing.T) {
			var mu sync.Mutex
			attempts := map[int]int{}
			f := func(_ context.Context, v int) ([]int, error) {
				mu.Lock()
				attempts[v]++
				a := attempts[v]
				mu.Unlock()
				if a <= 2 {
					return nil, fmt.Errorf("flaky %d", a)
				}
				return []int{v}, nil
			}
			env := weir.NewEnvironment(weir.Config{})
			vals := []int{0, 1, 2, 3, 4}
			src := weir.FromSlice(env, "src", vals, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
			rec := record(Unordered(src, "flaky", f, Options{Retries: retries, Backoff: time.Millisecond}))
			err := execute(env)
			if retries == 2 {
				if err != nil {
					t.Fatal(err)
				}
				got := rec.values()
				slices.Sort(got)
				if !slices.Equal(got, vals) {
					t.Fatalf("got %v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "flaky 2") || !strings.Contains(err.Error(), "attempt 2 of 2") {
				t.Fatalf("error %v, want the second attempt's failure", err)
			}
		})
	}
}

func TestPanicInFuncFailsJob(t *testing.T) {
	f := func(_ context.Context, v int) ([]int, error) {
		if v == 1 {
			panic("oops")
		}
		return []int{v}, nil
	}
	env := weir.NewEnvironment(weir.Config{})
	src := weir.FromSlice(env, "src", []int{0, 1, 2}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
	record(Ordered(src, "panicky", f, Options{}))
	if err := execute(env); err == nil || !strings.Contains(err.Error(), "panic: oops") {
		t.Fatalf("error %v, want the panic", err)
	}
}

func TestCancelStopsCalls(t *testing.T) {
	var track maxTracker
	f := func(ctx context.Context, v int) ([]int, error) {
		track.enter()
		defer track.leave()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.Generate(env, "src", -1, func(i int64) runtime.Record[int] { return runtime.Record[int]{Value: int(i), Timestamp: i} }, watermark.ForMonotonous[int]())
	record(Unordered(src, "hang", f, Options{Capacity: 5}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); track.cur.Load() < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls started", track.cur.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	if c := track.cur.Load(); c != 0 {
		t.Fatalf("%d calls still running after Execute returned", c)
	}
	if c := track.max.Load(); c != 10 {
		t.Fatalf("max in flight %d, want 2 subtasks × 5", c)
	}
}

// TestChainedAsyncOperators runs two async operators back to back; when
// chained, the second receives records inside the first's mailbox letters
// and must wait for its own completions without yielding.
func TestChainedAsyncOperators(t *testing.T) {
	const n = 400
	rng := rand.New(rand.NewPCG(3, 4))
	lat1, lat2 := make([]time.Duration, n), make([]time.Duration, 3*n)
	for i := range lat1 {
		lat1[i] = time.Duration(rng.IntN(200)) * time.Microsecond
	}
	for i := range lat2 {
		lat2[i] = time.Duration(rng.IntN(400)) * time.Microsecond
	}
	recs := make([]runtime.Record[int], n)
	var want []int
	for v := range n {
		recs[v] = runtime.Record[int]{Value: v, Timestamp: int64(v / 2)}
		for k := range v % 3 {
			want = append(want, 2*(3*v+k))
		}
	}
	for _, m1 := range modes {
		for _, m2 := range modes {
			for _, chained := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s-%s/chained=%v", m1.name, m2.name, chained), func(t *testing.T) {
					var t1, t2 maxTracker
					f1 := func(_ context.Context, v int) ([]int, error) {
						t1.enter()
						defer t1.leave()
						time.Sleep(lat1[v])
						out := make([]int, v%3)
						for k := range out {
							out[k] = 3*v + k
						}
						return out, nil
					}
					f2 := func(_ context.Context, v int) ([]int, error) {
						t2.enter()
						defer t2.leave()
						time.Sleep(lat2[v])
						return []int{2 * v}, nil
					}
					env := weir.NewEnvironment(weir.Config{Parallelism: 2, DisableChaining: !chained})
					src := weir.FromRecords(env, "src", recs, punctuatedEvery(4))
					s := m1.add(src, "first", f1, Options{Capacity: 4})
					s = m2.add(s, "second", f2, Options{Capacity: 2})
					rec := record(s)
					if err := execute(env); err != nil {
						t.Fatal(err)
					}
					got := rec.values()
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Fatalf("got %d results, want %d", len(got), len(want))
					}
					for s := range 2 {
						log := rec.subtask(s)
						checkNotLate(t, log)
						if m1.name == "ordered" && m2.name == "ordered" {
							prev := -1
							for _, e := range log {
								if e.kind == 'r' {
									if e.v < prev {
										t.Fatalf("subtask %d: %d after %d", s, e.v, prev)
									}
									prev = e.v
								}
							}
						}
					}
					if a, b := t1.max.Load(), t2.max.Load(); a > 2*4 || b > 2*2 {
						t.Fatalf("max in flight %d and %d over 2 subtasks, want at most 8 and 4", a, b)
					}
				})
			}
		}
	}
}

// TestPendingInInputOrder checks pending() from a sink chained behind the
// operator (so on the same subtask goroutine).
func TestPendingInInputOrder(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(5, 6))
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = time.Duration(rng.IntN(300)) * time.Microsecond
	}
	f := func(_ context.Context, v int) ([]int, error) {
		time.Sleep(lat[v])
		return []int{v}, nil
	}
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{})
			vals := make([]int, n)
			for i := range vals {
				vals[i] = i
			}
			src := weir.FromSlice(env, "src", vals, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
			var op *operator[int, int]
			s := weir.Transform(src, "async", func() runtime.OneInputOperator[int, int] {
				op = newOperator(f, Options{Capacity: 10}.withDefaults("async"), ordered)
				return op
			})
			var checked, nonEmpty int
			var failure error
			weir.Transform(s, "check", func() runtime.OneInputOperator[int, struct{}] {
				return &funcSink{f: func(v int) {
					p := op.pending()
					checked++
					if len(p) > 1 {
						nonEmpty++
					}
					// The record being emitted is still queued.
					if !slices.ContainsFunc(p, func(r runtime.Record[int]) bool { return r.Value == v }) && failure == nil {
						failure = fmt.Errorf("pending %v does not hold %d, whose results are being emitted", p, v)
					}
					if len(p) > 11 && failure == nil {
						failure = fmt.Errorf("pending holds %d records, capacity is 10", len(p))
					}
					if !slices.IsSortedFunc(p, func(a, b runtime.Record[int]) int { return a.Value - b.Value }) && failure == nil {
						failure = fmt.Errorf("pending %v not in input order", p)
					}
					if ordered && p[0].Value != v && failure == nil {
						failure = fmt.Errorf("ordered: pending %v does not start with %d", p, v)
					}
				}}
			})
			if err := execute(env); err != nil {
				t.Fatal(err)
			}
			if failure != nil {
				t.Fatal(failure)
			}
			if checked != n {
				t.Fatalf("checked %d", checked)
			}
			t.Logf("%d of %d checks saw other pending inputs", nonEmpty, n)
		})
	}
}

type funcSink struct {
	runtime.Base[struct{}]
	f func(int)
}

func (s *funcSink) ProcessRecord(r runtime.Record[int]) error { s.f(r.Value); return nil }
func (s *funcSink) EndInput() error                           { return nil }

func TestBadArgumentsPanic(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{})
	src := weir.FromSlice(env, "src", []int{1}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
	for name, build := range map[string]func(){
		"nil func": func() { Ordered[int, int](src, "x", nil, Options{}) },
		"negative capacity": func() {
			Unordered(src, "x", func(context.Context, int) ([]int, error) { return nil, nil }, Options{Capacity: -1})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			build()
		}()
	}
}

// timerDriver emits 2v for every input v at once and 2v+1 followed by a
// watermark from a processing-time timer. Its timers fall due while the
// async operator behind it waits for room; they then wait for the task
// loop (Context.Yield runs nothing upstream), where older runtimes fired
// them inside the wait (re-entrant input). It logs what it sent, in order.
type timerDriver struct {
	runtime.Base[int]
	sent    []elem
	wm      int64
	pending int
}

func (d *timerDriver) emit(v int) {
	ts := d.wm + 1
	d.sent = append(d.sent, elem{kind: 'r', v: v, ts: ts})
	d.Out.Collect(runtime.Record[int]{Value: v, Timestamp: ts})
}

func (d *timerDriver) ProcessRecord(r runtime.Record[int]) error {
	d.emit(2 * r.Value)
	d.pending++
	d.Ctx.RegisterProcessingTimer(0, func(int64) {
		d.pending--
		d.emit(2*r.Value + 1)
		d.wm++
		d.sent = append(d.sent, elem{kind: 'w', ts: d.wm})
		d.Out.EmitWatermark(d.wm)
	})
	return nil
}

func (d *timerDriver) ProcessWatermark(int64) error { return nil }
func (d *timerDriver) ProcessIdle(bool) error       { return nil }
func (d *timerDriver) EndInput() error {
	for d.pending > 0 {
		if err := d.Ctx.Yield(); err != nil {
			return err
		}
	}
	return nil
}

func TestReentrantInputKeepsOrder(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(7, 8))
	lat := make([]time.Duration, 2*n)
	for i := range lat {
		lat[i] = time.Duration(rng.IntN(200)) * time.Microsecond
	}
	f := func(_ context.Context, v int) ([]int, error) {
		time.Sleep(lat[v])
		return []int{v}, nil
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{})
			vals := make([]int, n)
			for i := range vals {
				vals[i] = i
			}
			src := weir.FromSlice(env, "src", vals, watermark.NoWatermarks[int]().WithTimestamp(func(int, int64) (int64, bool) { return 0, true }))
			var d *timerDriver
			driven := weir.Transform(src, "drive", func() runtime.OneInputOperator[int, int] { d = &timerDriver{}; return d })
			rec := record(m.add(driven, "async", f, Options{Capacity: 2}))
			if err := execute(env); err != nil {
				t.Fatal(err)
			}
			got := rec.subtask(0)
			checkNotLate(t, got)
			sent := d.sent
			if m.name == "ordered" {
				if !slices.Equal(got, sent) {
					t.Fatalf("received %d elements, not what was sent (%d) in order", len(got), len(sent))
				}
				return
			}
			// Unordered: the same markers, with the same set of records
			// between each pair.
			segs := func(log []elem) (marks []elem, sets [][]int) {
				var cur []int
				for _, e := range log {
					if e.kind == 'r' {
						cur = append(cur, e.v)
						continue
					}
					marks, sets, cur = append(marks, e), append(sets, cur), nil
				}
				return marks, append(sets, cur)
			}
			gm, gs := segs(got)
			sm, ss := segs(sent)
			if !slices.Equal(gm, sm) || len(gs) != len(ss) {
				t.Fatalf("markers differ: got %d, sent %d", len(gm), len(sm))
			}
			for i := range gs {
				if !sameSet(gs[i], ss[i]) {
					t.Fatalf("segment %d: got %v, sent %v", i, gs[i], ss[i])
				}
			}
		})
	}
}

// TestRetryOnJobClock: the per-attempt Timeout and the back-off between
// retries are measured on the job's clock: with a manual clock, a hung
// attempt times out and a failed one is retried only when the test
// advances the clock, by the time-out and the back-off (I7), never in
// real time.
func TestRetryOnJobClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clk := testenv.NewLongTimers(time.Unix(1_000_000, 0), 16)
	var attempts atomic.Int32
	f := func(ctx context.Context, v int) ([]int, error) {
		switch attempts.Add(1) {
		case 1:
			<-ctx.Done() // hangs until its time-out
			return nil, ctx.Err()
		case 2:
			return nil, errors.New("flaky")
		}
		return []int{v}, nil
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk})
	src := weir.FromSlice(env, "src", []int{7}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
	rec := record(Ordered(src, "lookup", f, Options{Timeout: 3 * time.Hour, Retries: 2, Backoff: 2 * time.Hour}))
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	// expect waits for the next long timer, which must be want, then
	// advances the clock to a nanosecond before it and checks that the
	// attempt count has not moved, then to it.
	expect := func(want time.Duration, attemptsBefore int32) {
		t.Helper()
		select {
		case d := <-clk.Armed:
			if d != want {
				t.Fatalf("armed %v on the job's clock, want %v", d, want)
			}
		case <-ctx.Done():
			t.Fatalf("nothing armed on the job's clock, want %v (after %d attempts)", want, attempts.Load())
		}
		clk.Advance(want - time.Nanosecond)
		if n := attempts.Load(); n != attemptsBefore {
			t.Fatalf("%d attempts before the clock reached %v, want %d", n, want, attemptsBefore)
		}
		clk.Advance(time.Nanosecond)
	}
	expect(3*time.Hour, 1) // attempt 1's time-out
	expect(2*time.Hour, 1) // the first back-off
	// Attempt 2 arms its time-out and fails at once; the second back-off
	// is twice the first.
	select {
	case d := <-clk.Armed:
		if d != 3*time.Hour {
			t.Fatalf("armed %v, want attempt 2's time-out of 3h", d)
		}
	case <-ctx.Done():
		t.Fatal("attempt 2 armed no time-out")
	}
	expect(4*time.Hour, 2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if got := rec.values(); !slices.Equal(got, []int{7}) {
		t.Fatalf("output %v, want [7]", got)
	}
}
