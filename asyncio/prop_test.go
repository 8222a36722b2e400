package asyncio

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"pgregory.net/rapid"
)

// step is one element of a generated input sequence: a record (with its
// call's latency and number of results), a watermark, or a status change.
type step struct {
	Kind    byte // 'r', 'w', 'i' (idle), 'a' (active)
	ID      int  // records: index of the record
	TS      int64
	Latency time.Duration
	NOut    int
}

// driveOp turns the generated steps into exactly that sequence of records,
// watermarks and status changes, ignoring the source's own.
type driveOp struct{ runtime.Base[step] }

func (o *driveOp) ProcessRecord(r runtime.Record[step]) error {
	switch s := r.Value; s.Kind {
	case 'r':
		o.Out.Collect(runtime.Record[step]{Value: s, Timestamp: s.TS})
	case 'w':
		o.Out.EmitWatermark(s.TS)
	case 'i', 'a':
		o.Out.EmitIdle(s.Kind == 'i')
	}
	return nil
}
func (o *driveOp) ProcessWatermark(int64) error { return nil }
func (o *driveOp) ProcessIdle(bool) error       { return nil }
func (o *driveOp) EndInput() error              { return nil }

func genSteps(t *rapid.T) []step {
	n := rapid.IntRange(0, 40).Draw(t, "n")
	var steps []step
	wm := int64(0)
	idle := false
	ids := 0
	for range n {
		switch k := rapid.IntRange(0, 9).Draw(t, "kind"); {
		case k < 6:
			steps = append(steps, step{Kind: 'r', ID: ids,
				TS:      wm + 1 + rapid.Int64Range(0, 5).Draw(t, "ts"),
				Latency: time.Duration(rapid.IntRange(0, 400).Draw(t, "latency")) * time.Microsecond,
				NOut:    rapid.IntRange(0, 2).Draw(t, "nout")})
			ids++
		case k < 9:
			wm += 1 + rapid.Int64Range(0, 5).Draw(t, "wm")
			steps = append(steps, step{Kind: 'w', TS: wm})
		default:
			idle = !idle
			kind := byte('a')
			if idle {
				kind = 'i'
			}
			steps = append(steps, step{Kind: kind})
		}
	}
	return steps
}

// TestWatermarkBarrierProperty runs random sequences of records (with
// random call latencies) and watermarks through both modes and checks, at
// the sink, that each marker separates exactly the results of the inputs
// before it from those of the inputs after it.
func TestWatermarkBarrierProperty(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				steps := genSteps(t)
				capacity := rapid.IntRange(1, 5).Draw(t, "capacity")
				f := func(_ context.Context, s step) ([]int, error) {
					time.Sleep(s.Latency)
					out := make([]int, s.NOut)
					for k := range out {
						out[k] = 10*s.ID + k
					}
					return out, nil
				}
				env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: -1})
				src := weir.FromSlice(env, "src", steps, watermark.NoWatermarks[step]().WithTimestamp(func(step, int64) (int64, bool) { return 0, true }))
				driven := weir.Transform(src, "drive", func() runtime.OneInputOperator[step, step] { return &driveOp{} })
				add := Unordered[step, int]
				if ordered {
					add = Ordered[step, int]
				}
				rec := record(add(driven, "async", f, Options{Capacity: capacity}))
				if err := execute(env); err != nil {
					t.Fatal(err)
				}
				checkBarriers(t, steps, rec.subtask(0), ordered)
			})
		})
	}
}

func checkBarriers(t *rapid.T, steps []step, log []elem, ordered bool) {
	// Expected results, and for every marker the set of results before it.
	var want []int
	var markers []int // indices into steps
	for i, s := range steps {
		switch s.Kind {
		case 'r':
			for k := range s.NOut {
				want = append(want, 10*s.ID+k)
			}
		default:
			markers = append(markers, i)
		}
	}
	resultsBefore := func(i int) []int {
		var out []int
		for _, s := range steps[:i] {
			if s.Kind == 'r' {
				for k := range s.NOut {
					out = append(out, 10*s.ID+k)
				}
			}
		}
		return out
	}

	var got []int
	wm := watermark.Min
	next := 0 // next input marker to match
	for p, e := range log {
		if e.kind == 'r' {
			got = append(got, e.v)
			if e.ts <= wm {
				t.Fatalf("output %d: record %d with timestamp %d after watermark %d", p, e.v, e.ts, wm)
			}
			continue
		}
		// Match the output marker with the next input marker; input
		// watermarks may be skipped only if directly followed by another
		// watermark (coalesced).
		for {
			if next == len(markers) {
				t.Fatalf("output %d: unexpected marker %+v", p, e)
			}
			in := steps[markers[next]]
			if in.Kind == e.kind && (e.kind != 'w' || in.TS == e.ts) {
				break
			}
			i := markers[next]
			if in.Kind != 'w' || i+1 >= len(steps) || steps[i+1].Kind != 'w' {
				t.Fatalf("output %d: marker %+v, but input marker %+v (step %d) was not emitted", p, e, in, i)
			}
			next++
		}
		if e.kind == 'w' {
			wm = e.ts
		}
		before := resultsBefore(markers[next])
		if !sameSet(got, before) {
			t.Fatalf("output %d: marker %+v (step %d) after results %v, want %v", p, e, markers[next], got, before)
		}
		next++
	}
	// A superseded watermark is skipped when the later one is matched, so
	// an unmatched input marker was never emitted.
	if next < len(markers) {
		t.Fatalf("input marker %+v (step %d) never emitted", steps[markers[next]], markers[next])
	}
	if ordered {
		if !slices.Equal(got, want) {
			t.Fatalf("ordered: got %v, want %v", got, want)
		}
		return
	}
	if !sameSet(got, want) {
		t.Fatalf("got %v, want %v in any order", got, want)
	}
}

func sameSet(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
