package weir

import (
	"github.com/weirproject/weir/runtime"
)

// Stream is a typed stream of records. It is a handle into the job being
// built: functions that take a Stream add operators consuming it. A Stream
// may be consumed several times (each consumer sees every record).
type Stream[T any] struct {
	env   *Environment
	parts []producer[T]
	// exchange, when set, overrides how the next consumer receives the
	// records (Rebalance, Broadcast); the default is forward.
	exchange *runtime.Partitioner[T]
}

// producer is one operator output a Stream reads (a union has several).
type producer[T any] struct {
	node *runtime.Node
	tag  *runtime.OutputTag[T] // nil: main output
}

func newStream[T any](env *Environment, n *runtime.Node) Stream[T] {
	return Stream[T]{env: env, parts: []producer[T]{{node: n}}}
}

// Env returns the stream's environment.
func (s Stream[T]) Env() *Environment { return s.env }

func (s Stream[T]) node() *runtime.Node {
	if len(s.parts) != 1 {
		panic("weir: this stream is a union of several operators; name, uid and parallelism belong to one operator")
	}
	return s.parts[0].node
}

// Name names the operator that produces the stream.
func (s Stream[T]) Name(name string) Stream[T] { s.node().SetName(name); return s }

// UID sets the stable id under which the producing operator's state is
// stored in checkpoints and savepoints.
func (s Stream[T]) UID(uid string) Stream[T] { s.node().SetUID(uid); return s }

// Parallelism sets the number of subtasks of the producing operator.
func (s Stream[T]) Parallelism(p int) Stream[T] { s.node().SetParallelism(p); return s }

// connect feeds s into input `input` of n with partitioner p.
func connect[T any](s Stream[T], n *runtime.Node, input int, p runtime.Partitioner[T]) {
	for _, part := range s.parts {
		runtime.Connect(part.node, part.tag, n, input, p)
	}
}

// Union merges streams of the same type into one. The operator consuming a
// union takes the minimum watermark over all of them.
func Union[T any](first Stream[T], more ...Stream[T]) Stream[T] {
	out := Stream[T]{env: first.env, parts: append([]producer[T](nil), first.parts...)}
	for _, s := range more {
		if s.env != first.env {
			panic("weir: Union of streams from different environments")
		}
		out.parts = append(out.parts, s.parts...)
	}
	return out
}

// SideOutput returns the stream of side output tag of the operator that
// produces s.
func SideOutput[T, U any](s Stream[T], tag *OutputTag[U]) Stream[U] {
	return Stream[U]{env: s.env, parts: []producer[U]{{node: s.node(), tag: tag}}}
}

// DeadLetters returns the dead-letter stream of the source that produces s:
// input that did not decode or had no usable timestamp, with the reason.
func DeadLetters[T any](s Stream[T]) Stream[DeadLetter] {
	if !s.node().IsSource() {
		panic("weir: DeadLetters needs the stream a source produces (call it on what FromSource returned, before any transformation)")
	}
	return SideOutput(s, runtime.DeadLetterTag)
}

// Rebalance returns s spread round-robin over the subtasks of its next
// consumer.
func Rebalance[T any](s Stream[T]) Stream[T] {
	p := runtime.Rebalance[T]()
	s.exchange = &p
	return s
}

// Broadcast returns s with every record sent to every subtask of its next
// consumer.
func Broadcast[T any](s Stream[T]) Stream[T] {
	p := runtime.Broadcast[T]()
	s.exchange = &p
	return s
}

// Transform adds a custom operator consuming s. newOp is called once per
// subtask. This is how packages such as asyncio add operators; keyed
// operators use TransformKeyed.
//
// A forward edge between operators whose parallelisms differ when the job
// is built fails Execute, unless the input's parallelism was set
// explicitly before Transform, in which case the edge rebalances.
func Transform[IN, OUT any](s Stream[IN], name string, newOp func() runtime.OneInputOperator[IN, OUT]) Stream[OUT] {
	n := runtime.AddOneInput(&s.env.graph, name, newOp)
	p := runtime.Forward[IN]()
	if s.exchange != nil {
		p = *s.exchange
	} else if s.explicitParallelism() {
		// The input's parallelism was chosen; n's may be set after this
		// call (Map(...).Parallelism(p)). Decide when the job is built:
		// forward (chained) if they are equal then, rebalance if not.
		// (Deciding here compared against n's unset parallelism and
		// rebalanced always, which broke per-split order and chaining.)
		p = runtime.ForwardOrRebalance[IN]()
	}
	connect(s, n, 0, p)
	return newStream[OUT](s.env, n)
}

// explicitParallelism reports whether an operator producing s has its
// parallelism set.
func (s Stream[T]) explicitParallelism() bool {
	for _, p := range s.parts {
		if p.node.Parallelism() != 0 {
			return true
		}
	}
	return false
}
