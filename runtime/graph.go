package runtime

import (
	"fmt"

	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/watermark"
)

// Graph is a job's logical plan: operators (nodes) and the edges between
// them. The root package builds it; Execute runs it. A Graph is not safe
// for concurrent modification and must not change once executed.
type Graph struct {
	nodes []*Node
}

// Node is one operator of the logical plan.
type Node struct {
	id          int
	name        string
	uid         string
	parallelism int
	inputs      [][]edge // per input index, the edges feeding it
	outputs     []edge
	impl        nodeImpl
}

// ID returns the node's index in its graph.
func (n *Node) ID() int { return n.id }

// Name returns the operator name.
func (n *Node) Name() string { return n.name }

// SetName renames the operator.
func (n *Node) SetName(name string) { n.name = name }

// UID returns the stable id of the operator (its name when unset).
func (n *Node) UID() string {
	if n.uid == "" {
		return n.name
	}
	return n.uid
}

// SetUID sets the stable id under which the operator's state is stored.
func (n *Node) SetUID(uid string) { n.uid = uid }

// Parallelism returns the operator's parallelism (0: the job default).
func (n *Node) Parallelism() int { return n.parallelism }

// SetParallelism sets the number of subtasks (0: the job default).
func (n *Node) SetParallelism(p int) { n.parallelism = p }

// IsSource reports whether the node is a source.
func (n *Node) IsSource() bool { return len(n.inputs) == 0 }

// Nodes returns the graph's nodes in the order they were added.
func (g *Graph) Nodes() []*Node { return g.nodes }

func (g *Graph) add(name string, inputs int, impl nodeImpl) *Node {
	n := &Node{id: len(g.nodes), name: name, inputs: make([][]edge, inputs), impl: impl}
	g.nodes = append(g.nodes, n)
	return n
}

// AddSource adds a source operator that reads src and derives timestamps and
// watermarks with strategy (one generator per split).
func AddSource[T any](g *Graph, name string, src Source[T], strategy watermark.Strategy[T]) *Node {
	return g.add(name, 0, &sourceImpl[T]{src: src, strategy: strategy})
}

// AddOneInput adds an operator with one input; newOp is called once per
// subtask.
func AddOneInput[IN, OUT any](g *Graph, name string, newOp func() OneInputOperator[IN, OUT]) *Node {
	return g.add(name, 1, &oneInputImpl[IN, OUT]{newOp: newOp})
}

// AddTwoInput adds an operator with two inputs; newOp is called once per
// subtask.
func AddTwoInput[IN1, IN2, OUT any](g *Graph, name string, newOp func() TwoInputOperator[IN1, IN2, OUT]) *Node {
	return g.add(name, 2, &twoInputImpl[IN1, IN2, OUT]{newOp: newOp})
}

// Partitioner says how records of type T are spread over the subtasks of
// the consuming operator. Use Forward, Rebalance, Broadcast or KeyGroups.
type Partitioner[T any] struct {
	kind partitioning
	// keyGroupFor makes the key-group function of one max parallelism,
	// once per writer (KeyGroups).
	keyGroupFor func(maxParallelism int) func(v T) int
}

// Forward sends subtask i's records to subtask i of the consumer (which
// must have the same parallelism); such edges are chained into one
// goroutine where possible.
func Forward[T any]() Partitioner[T] { return Partitioner[T]{kind: partForward} }

// ForwardOrRebalance is Forward when the producer and the consumer have the
// same parallelism and Rebalance when they differ, decided when the job is
// built (as Flink does), so that a parallelism set after the edge was added
// still chains equal operators.
func ForwardOrRebalance[T any]() Partitioner[T] { return Partitioner[T]{kind: partAuto} }

// Rebalance spreads records round-robin over the consumer's subtasks.
func Rebalance[T any]() Partitioner[T] { return Partitioner[T]{kind: partRebalance} }

// Broadcast sends every record to every consumer subtask.
func Broadcast[T any]() Partitioner[T] { return Partitioner[T]{kind: partBroadcast} }

// KeyGroups sends each record to the consumer subtask that owns its key
// group. keyGroupFor is called once per upstream subtask with the job's max
// parallelism and returns the function computing a value's key group under
// it; it may check the max parallelism there rather than for every record
// (keygroup.Assigner, weir.KeyedStream.KeyGroupFunc).
func KeyGroups[T any](keyGroupFor func(maxParallelism int) func(v T) int) Partitioner[T] {
	return Partitioner[T]{kind: partKey, keyGroupFor: keyGroupFor}
}

// Connect adds an edge from an output of from (its main output when tag is
// nil) to input number input of to. T must be from's output type (or the
// tag's type) and to's input type; a mismatch panics, since it is a bug in
// the code that builds the graph.
func Connect[T any](from *Node, tag *OutputTag[T], to *Node, input int, p Partitioner[T]) {
	if input < 0 || input >= len(to.inputs) {
		panic(fmt.Sprintf("runtime: operator %q has no input %d", to.name, input))
	}
	e := &typedEdge[T]{from: from, to: to, in: input, p: p}
	if tag != nil {
		e.tag = tag.id
	}
	from.outputs = append(from.outputs, e)
	to.inputs[input] = append(to.inputs[input], e)
}

// edge is the untyped view of a typedEdge.
type edge interface {
	src() *Node
	dst() *Node
	input() int
	tagID() int
	kind() partitioning
	// newGate creates the gate of one consumer subtask for this edge's
	// input (all edges of one input share it).
	newGate(channels, credits, size int) any
	// newWriter creates the network output of producer subtask u.
	newWriter(t *task, chans []chanRef, counter *Counter) (any, flusher)
	// combine merges several Output[T] (as any) into one.
	combine(outs []any) any
}

type chanRef struct {
	gate any // *gate[T]
	idx  int
}

type typedEdge[T any] struct {
	from, to *Node
	in       int
	tag      int
	p        Partitioner[T]
}

func (e *typedEdge[T]) src() *Node         { return e.from }
func (e *typedEdge[T]) dst() *Node         { return e.to }
func (e *typedEdge[T]) input() int         { return e.in }
func (e *typedEdge[T]) tagID() int         { return e.tag }
func (e *typedEdge[T]) kind() partitioning { return e.p.kind }

func (e *typedEdge[T]) newGate(channels, credits, size int) any {
	return newGate[T](channels, credits, size)
}

func (e *typedEdge[T]) newWriter(t *task, chans []chanRef, counter *Counter) (any, flusher) {
	b := t.job
	w := &writer[T]{kind: b.kindOf(e), records: counter}
	for _, c := range chans {
		g, ok := c.gate.(*gate[T])
		if !ok {
			panic(fmt.Sprintf("runtime: edge %q -> %q: input type mismatch", e.from.name, e.to.name))
		}
		w.chans = append(w.chans, &outChannel[T]{idx: int32(c.idx), g: g, done: b.done, records: counter, task: t})
	}
	if e.p.kind == partKey {
		w.route = keygroup.NewRouter(b.maxParallelism, b.par(e.to))
		w.keyGroup = e.p.keyGroupFor(b.maxParallelism)
	}
	return Output[T](w), w
}

func (e *typedEdge[T]) combine(outs []any) any {
	typed := make([]Output[T], len(outs))
	for i, o := range outs {
		t, ok := o.(Output[T])
		if !ok {
			panic(fmt.Sprintf("runtime: edge %q -> %q: output type mismatch (%T)", e.from.name, e.to.name, o))
		}
		typed[i] = t
	}
	return outputOf(typed)
}
