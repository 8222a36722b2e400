package pipeline

import (
	"math"

	"github.com/weirproject/weir/window"
)

// aggSlot is the accumulator of one aggregate field. Sum, min, max and avg
// fold the values that are numbers (or strings holding numbers) and skip
// the others; first and last keep any value, in the order records reach
// the window (event-time order behind a sort).
type aggSlot struct {
	N     int64   `json:"n"`
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	First any     `json:"first,omitempty"`
	Last  any     `json:"last,omitempty"`
	Seen  bool    `json:"seen,omitempty"`
}

// aggAcc is a window's accumulator: the record count and one slot per
// aggregate. It is a plain struct so that the window's default state codec
// (JSON) writes it to checkpoints.
type aggAcc struct {
	Count int64     `json:"count"`
	Slots []aggSlot `json:"slots"`
}

// aggregator implements window.AggregateFunction over records for the
// aggregates of one window step.
type aggregator struct {
	aggs  []AggregateSpec
	paths []fieldPath
}

var _ window.AggregateFunction[Record, *aggAcc, Record] = (*aggregator)(nil)

func newAggregator(aggs []AggregateSpec) *aggregator {
	a := &aggregator{aggs: aggs, paths: make([]fieldPath, len(aggs))}
	for i, g := range aggs {
		if g.Field != "" {
			a.paths[i], _ = parseFieldPath(g.Field) // checked by Parse
		}
	}
	return a
}

func (a *aggregator) CreateAccumulator() *aggAcc {
	return &aggAcc{Slots: make([]aggSlot, len(a.aggs))}
}

func (a *aggregator) Add(r Record, acc *aggAcc) *aggAcc {
	if acc == nil {
		acc = a.CreateAccumulator()
	}
	acc.Count++
	for i := range a.aggs {
		p := a.paths[i]
		if p == nil {
			continue
		}
		v, ok := p.get(r)
		if !ok {
			continue
		}
		s := &acc.Slots[i]
		switch a.aggs[i].Fn {
		case "first":
			if !s.Seen {
				s.First, s.Seen = v, true
			}
		case "last":
			s.Last, s.Seen = v, true
		default:
			x, ok := number(v)
			if !ok {
				continue
			}
			if s.N == 0 {
				s.Min, s.Max = x, x
			} else {
				s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
			}
			s.N++
			s.Sum += x
		}
	}
	return acc
}

func (a *aggregator) Result(acc *aggAcc) Record {
	out := make(Record, len(a.aggs)+3)
	for i, g := range a.aggs {
		s := acc.Slots[i]
		var v any
		switch g.Fn {
		case "count":
			v = acc.Count
		case "sum":
			v = s.Sum
		case "min":
			if s.N > 0 {
				v = s.Min
			}
		case "max":
			if s.N > 0 {
				v = s.Max
			}
		case "avg":
			if s.N > 0 {
				v = s.Sum / float64(s.N)
			}
		case "first":
			v = s.First
		case "last":
			v = s.Last
		}
		out[g.Name] = v
	}
	return out
}

func (a *aggregator) Merge(x, y *aggAcc) *aggAcc {
	if x == nil {
		return y
	}
	if y == nil {
		return x
	}
	// Session windows merge an earlier window (x) with a later one (y).
	x.Count += y.Count
	for i := range a.aggs {
		s, t := &x.Slots[i], y.Slots[i]
		switch a.aggs[i].Fn {
		case "first":
			if !s.Seen && t.Seen {
				s.First, s.Seen = t.First, true
			}
		case "last":
			if t.Seen {
				s.Last, s.Seen = t.Last, true
			}
		default:
			if t.N == 0 {
				continue
			}
			if s.N == 0 {
				s.Min, s.Max = t.Min, t.Max
			} else {
				s.Min, s.Max = math.Min(s.Min, t.Min), math.Max(s.Max, t.Max)
			}
			s.N += t.N
			s.Sum += t.Sum
		}
	}
	return x
}
