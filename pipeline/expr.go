package pipeline

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/weirproject/weir/runtime"
)

// Expressions are expr-lang/expr programs (https://expr-lang.org), compiled
// once when the pipeline is built and run by one vm.VM per operator subtask,
// which reuses its stack from one record to the next. A record's fields
// are the program's variables: `kind == "order" && qty > 3`. A field the
// record lacks is nil.

// exprKind is what an expression must return.
type exprKind int

const (
	exprAny  exprKind = iota
	exprBool          // filter
)

// compileExpr compiles src; vars are the variables known at compile time
// (nil: the record's fields, unknown until run time).
func compileExpr(src string, kind exprKind) (*vm.Program, error) {
	opts := []expr.Option{expr.Env(map[string]any{}), expr.AllowUndefinedVariables()}
	if kind == exprBool {
		opts = append(opts, expr.AsBool())
	}
	return expr.Compile(src, opts...)
}

// exprErrorColumn returns the 1-based column of a compile error inside the
// expression's first line, or 0.
func exprErrorColumn(err error) (line, col int) {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fe.Line, fe.Column + 1
	}
	return 0, 0
}

// exprMessage is the first line of an expr error (its message without the
// snippet, which names positions inside the expression only).
func exprMessage(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}

// filterOp keeps the records for which its program returns true; a record
// the program fails on (or returns something else than a bool or nil for)
// is a dead letter of the step (P7).
type filterOp struct {
	runtime.Base[Record]
	prog *vm.Program
	src  string // the expression, for reasons
	vm   vm.VM
	at   string // the step's position
	tag  *runtime.OutputTag[Record]
	dead stepDeadLetters
}

func (o *filterOp) Open(ctx *runtime.Context, out runtime.Output[Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, o.tag, o.at)
	return nil
}

func (o *filterOp) ProcessRecord(r runtime.Record[Record]) error {
	out, err := o.vm.Run(o.prog, r.Value)
	if err != nil {
		o.dead.fail(r, fmt.Sprintf("filter at %s (%s): %v", o.at, o.src, exprMessage(err)))
		return nil
	}
	keep, ok := out.(bool)
	if !ok && out != nil {
		o.dead.fail(r, fmt.Sprintf("filter at %s (%s): returned %T %v, want a bool", o.at, o.src, out, out))
		return nil
	}
	if keep {
		o.Out.Collect(r)
	}
	return nil
}

// mapField is one field a map step sets.
type mapField struct {
	name string
	prog *vm.Program
}

// mapOp emits a copy of each record with its fields set (or, with drop,
// removed); the programs all see the input record. A record a program
// fails on, or for which one returns a value JSON cannot hold (NaN, an
// infinity), is a dead letter of the step (P7).
type mapOp struct {
	runtime.Base[Record]
	fields []mapField
	drop   []string
	vm     vm.VM
	at     string
	tag    *runtime.OutputTag[Record]
	dead   stepDeadLetters
}

func (o *mapOp) Open(ctx *runtime.Context, out runtime.Output[Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, o.tag, o.at)
	return nil
}

func (o *mapOp) ProcessRecord(r runtime.Record[Record]) error {
	out := cloneRecord(r.Value, len(o.fields))
	for _, f := range o.fields {
		v, err := o.vm.Run(f.prog, r.Value)
		if err != nil {
			o.dead.fail(r, fmt.Sprintf("map at %s: field %s: %v", o.at, f.name, exprMessage(err)))
			return nil
		}
		if !jsonable(v) {
			o.dead.fail(r, fmt.Sprintf("map at %s: field %s is %v, which JSON cannot hold", o.at, f.name, v))
			return nil
		}
		out[f.name] = v
	}
	for _, d := range o.drop {
		delete(out, d)
	}
	o.Out.Collect(runtime.Record[Record]{Value: out, Timestamp: r.Timestamp})
	return nil
}

// sortedKeys returns m's keys in order (map steps set fields in name order,
// so a run is reproducible).
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// vmProgram is a compiled program with a pool of VMs for callers on
// several goroutines.
type vmProgram struct {
	prog *vm.Program
	pool sync.Pool
}

func (r *progRef) run(env any) (any, error) {
	m, _ := r.p.pool.Get().(*vm.VM)
	if m == nil {
		m = &vm.VM{}
	}
	v, err := m.Run(r.p.prog, env)
	r.p.pool.Put(m)
	return v, err
}
