package pipeline

import (
	"testing"

	"github.com/expr-lang/expr/vm"

	"github.com/weirproject/weir/runtime"
)

// The per-record cost of an expression against the same logic written in
// Go, on the same record (BENCHMARKS.md, lab notes):
//
//	go test -run '^$' -bench 'Expr|FilterStep' -benchmem -count 5 ./pipeline/

var benchRec = Record{"id": "o-0001", "kind": "order", "item": "item-042", "customer": "customer-07",
	"qty": 5.0, "amount": 120.0, "time": 1767225600000.0, "live": true}

var sinkBool bool
var sinkAny any

func BenchmarkExprFilter(b *testing.B) {
	prog, err := compileExpr(`kind == "order" && amount >= 100`, exprBool)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("expr", func(b *testing.B) {
		var m vm.VM
		b.ReportAllocs()
		for b.Loop() {
			v, err := m.Run(prog, benchRec)
			if err != nil {
				b.Fatal(err)
			}
			sinkBool = v.(bool)
		}
	})
	b.Run("go", func(b *testing.B) {
		keep := func(r Record) bool {
			k, _ := r["kind"].(string)
			a, _ := r["amount"].(float64)
			return k == "order" && a >= 100
		}
		b.ReportAllocs()
		for b.Loop() {
			sinkBool = keep(benchRec)
		}
	})
}

func BenchmarkExprMap(b *testing.B) {
	prog, err := compileExpr(`amount * 1.2`, exprAny)
	if err != nil {
		b.Fatal(err)
	}
	// The field's value only: the record copy a map step makes is the same
	// for both and measured by the "step" pair.
	b.Run("expr", func(b *testing.B) {
		var m vm.VM
		b.ReportAllocs()
		for b.Loop() {
			v, err := m.Run(prog, benchRec)
			if err != nil {
				b.Fatal(err)
			}
			sinkAny = v
		}
	})
	b.Run("go", func(b *testing.B) {
		f := func(r Record) any {
			a, _ := r["amount"].(float64)
			return a * 1.2
		}
		b.ReportAllocs()
		for b.Loop() {
			sinkAny = f(benchRec)
		}
	})
	b.Run("step-expr", func(b *testing.B) {
		op := &mapOp{fields: []mapField{{"gross", prog}}}
		b.ReportAllocs()
		for b.Loop() {
			out := cloneRecord(benchRec, 1)
			v, _ := op.vm.Run(prog, benchRec)
			out["gross"] = v
			sinkAny = out
		}
	})
	b.Run("step-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out := cloneRecord(benchRec, 1)
			a, _ := benchRec["amount"].(float64)
			out["gross"] = a * 1.2
			sinkAny = out
		}
	})
}

// nopOut is an operator output that drops everything.
type nopOut struct{}

func (nopOut) Collect(runtime.Record[Record]) {}
func (nopOut) EmitWatermark(int64)            {}
func (nopOut) EmitIdle(bool)                  {}

// BenchmarkFilterStep is the filter step's operator on a record it keeps
// ("keep") and one it drops ("drop"): the good path of P7, which must
// allocate nothing (TestFilterStepAllocatesNothing).
func BenchmarkFilterStep(b *testing.B) {
	prog, err := compileExpr(`kind == "order" && amount >= 100`, exprBool)
	if err != nil {
		b.Fatal(err)
	}
	drop := cloneRecord(benchRec, 0)
	drop["amount"] = 5.0
	for _, c := range []struct {
		name string
		rec  Record
	}{{"keep", benchRec}, {"drop", drop}} {
		b.Run(c.name, func(b *testing.B) {
			op := &filterOp{prog: prog}
			op.Out = nopOut{}
			r := runtime.Record[Record]{Value: c.rec, Timestamp: 1}
			b.ReportAllocs()
			for b.Loop() {
				if err := op.ProcessRecord(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFilterStepAllocatesNothing (P4, P7): the filter step allocates
// nothing per record it keeps or drops.
func TestFilterStepAllocatesNothing(t *testing.T) {
	prog, err := compileExpr(`kind == "order" && amount >= 100`, exprBool)
	if err != nil {
		t.Fatal(err)
	}
	op := &filterOp{prog: prog}
	op.Out = nopOut{}
	drop := cloneRecord(benchRec, 0)
	drop["amount"] = 5.0
	for _, rec := range []Record{benchRec, drop} {
		r := runtime.Record[Record]{Value: rec, Timestamp: 1}
		if n := testing.AllocsPerRun(100, func() { op.ProcessRecord(r) }); n != 0 {
			t.Errorf("%v allocations per record (amount %v), want 0", n, rec["amount"])
		}
	}
}
