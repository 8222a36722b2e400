package runtime

// Building a job: the builder turns the logical graph into tasks, numbers
// the channels between them, chains operators and instantiates each
// operator subtask.

import (
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/keygroup"
)

// builder turns the logical graph into tasks.
type builder struct {
	g              *Graph
	cfg            Config
	done           <-chan struct{}
	maxParallelism int
	chained        map[edge]bool
	// gates[node][input][subtask] is a *gate[T]
	gates map[*Node][][]any
	// chanIdx[edge][u][d] is the channel index of producer u at consumer d
	// (-1: not connected)
	chanIdx map[edge][][]int
	tasks   []*task
	uids    map[*Node]string
	restore *checkpoint.Snapshot
	// restored is what the job restored (loadRestore); firstID the id of
	// its first checkpoint.
	restored RestoredFrom
	firstID  int64
	// origin is what the job's snapshots record as their Origin: the
	// location first restored from.
	origin string
	coord  *coordinator
}

func (b *builder) uid(n *Node) string { return b.uids[n] }

func newBuilder(g *Graph, cfg Config, done <-chan struct{}) (*builder, error) {
	b := &builder{g: g, cfg: cfg, done: done, chained: map[edge]bool{},
		gates: map[*Node][][]any{}, chanIdx: map[edge][][]int{}}
	b.maxParallelism = cfg.MaxParallelism
	if err := b.loadRestore(); err != nil {
		return nil, err
	}
	for _, n := range g.nodes {
		if err := keygroup.Validate(b.maxParallelism, b.par(n)); err != nil {
			return nil, fmt.Errorf("runtime: operator %q: %w", n.name, err)
		}
		for i, in := range n.inputs {
			if len(in) == 0 {
				return nil, fmt.Errorf("runtime: input %d of operator %q is not connected", i+1, n.name)
			}
		}
	}
	for _, n := range g.nodes {
		for _, e := range n.outputs {
			if b.kindOf(e) == partForward && b.par(e.src()) != b.par(e.dst()) {
				return nil, fmt.Errorf("runtime: forward edge %q -> %q joins parallelism %d to %d; use a rebalance or key-by, or equal parallelism",
					e.src().name, e.dst().name, b.par(e.src()), b.par(e.dst()))
			}
			d := e.dst()
			// Between two single subtasks every partitioning is forward.
			forward := b.kindOf(e) == partForward || (b.par(e.src()) == 1 && b.par(d) == 1)
			b.chained[e] = !cfg.DisableChaining && forward && e.tagID() == 0 &&
				len(d.inputs) == 1 && len(d.inputs[0]) == 1
		}
	}
	return b, nil
}

// kindOf is e's partitioning in this job: ForwardOrRebalance edges are
// resolved by the parallelisms the job runs at.
func (b *builder) kindOf(e edge) partitioning {
	k := e.kind()
	if k != partAuto {
		return k
	}
	if b.par(e.src()) == b.par(e.dst()) {
		return partForward
	}
	return partRebalance
}

func (b *builder) par(n *Node) int {
	if n.parallelism > 0 {
		return n.parallelism
	}
	return b.cfg.Parallelism
}

func (b *builder) build() ([]*task, error) {
	// Channel numbering and gates of every consumer that is not chained.
	for _, n := range b.g.nodes {
		if len(n.inputs) == 0 || b.chained[n.inputs[0][0]] {
			continue
		}
		par := b.par(n)
		perInput := make([][]any, len(n.inputs))
		for i, in := range n.inputs {
			counts := make([]int, par)
			for _, e := range in {
				up := b.par(e.src())
				idx := make([][]int, up)
				for u := range idx {
					idx[u] = make([]int, par)
					for d := range idx[u] {
						idx[u][d] = -1
						if b.kindOf(e) != partForward || u == d {
							idx[u][d] = counts[d]
							counts[d]++
						}
					}
				}
				b.chanIdx[e] = idx
			}
			perInput[i] = make([]any, par)
			for d := range par {
				perInput[i][d] = in[0].newGate(counts[d], b.cfg.BuffersPerChannel, b.cfg.BufferSize)
			}
		}
		b.gates[n] = perInput
	}
	b.coord = newCoordinator(b, b.firstID)
	// One task per chain head and subtask.
	for _, n := range b.g.nodes {
		if len(n.inputs) > 0 && b.chained[n.inputs[0][0]] {
			continue
		}
		for s := range b.par(n) {
			t := &task{job: b, subtask: s, parallelism: b.par(n), node: n,
				bpMicros: b.cfg.Metrics.counter(n.name, s, MetricBackPressuredMicros),
				bpNow:    b.cfg.Metrics.gauge(n.name, s, MetricBackPressured)}
			t.align = aligner{t: t, blocking: b.cfg.Checkpoint.Mode == ExactlyOnce}
			t.mailbox.init()
			t.timers.init(b.cfg.Clock)
			head, err := b.instantiate(t, n, s)
			if err != nil {
				return nil, err
			}
			t.head = head
			// instantiate appends children first; put the head first.
			for i, j := 0, len(t.chain)-1; i < j; i, j = i+1, j-1 {
				t.chain[i], t.chain[j] = t.chain[j], t.chain[i]
			}
			t.current = -1
			for i, inst := range t.chain {
				if p, ok := inst.(interface{ setPos(int) }); ok {
					p.setPos(i)
				}
				inst.context().pos = int32(i) // tags its letters and timers (M1)
			}
			var gates []any
			for _, perInput := range b.gates[n] {
				gates = append(gates, perInput[s])
			}
			t.gates = gates
			b.tasks = append(b.tasks, t)
			t.index = len(b.coord.tasks)
			b.coord.tasks = append(b.coord.tasks, t)
			if n.IsSource() {
				b.coord.sources = append(b.coord.sources, t)
			}
		}
	}
	return b.tasks, nil
}

// instantiate creates subtask s of n and, recursively, the operators
// chained behind it, inside task t.
func (b *builder) instantiate(t *task, n *Node, s int) (instance, error) {
	var main []any
	sides := map[int][]any{}
	var sideEdges = map[int]edge{}
	var mainEdge edge
	for _, e := range n.outputs {
		var o any
		if b.chained[e] {
			child, err := b.instantiate(t, e.dst(), s)
			if err != nil {
				return nil, err
			}
			o = child.input(0)
		} else {
			idx := b.chanIdx[e]
			var refs []chanRef
			for d := range b.par(e.dst()) {
				if idx[s][d] >= 0 {
					refs = append(refs, chanRef{gate: b.gates[e.dst()][e.input()][d], idx: idx[s][d]})
				}
			}
			var f flusher
			o, f = e.newWriter(t, refs, b.cfg.Metrics.counter(n.name, s, "recordsOut"))
			t.writers = append(t.writers, f)
		}
		if e.tagID() == 0 {
			main = append(main, o)
			mainEdge = e
		} else {
			sides[e.tagID()] = append(sides[e.tagID()], o)
			sideEdges[e.tagID()] = e
		}
	}
	ctx := &Context{
		Name: n.name, UID: n.UID(), Subtask: s, Parallelism: b.par(n),
		MaxParallelism:      b.maxParallelism,
		KeyGroups:           keygroup.RangeFor(b.maxParallelism, b.par(n), s),
		Clock:               b.cfg.Clock,
		Logger:              b.cfg.Logger.With("operator", n.name, "subtask", s),
		RetainedCheckpoints: b.cfg.Checkpoint.Retain, // defaulted (withDefaults)
		Slice:               b.cfg.Slice.Index,
		Slices:              b.cfg.Slice.Count,
		task:                t,
		node:                n,
		sides:               map[int]any{},
		stateBackend:        b.cfg.StateBackend,
	}
	if b.restore != nil {
		ctx.restored = &Restored{CheckpointID: b.restore.ID, op: b.restore.Operator(b.uid(n)),
			index: s, par: b.par(n), rng: ctx.KeyGroups}
	}
	var sideCtl []control
	for id, outs := range sides {
		o := sideEdges[id].combine(outs)
		ctx.sides[id] = o
		sideCtl = append(sideCtl, o.(control))
	}
	var mainOut any
	if mainEdge != nil {
		mainOut = mainEdge.combine(main)
	}
	inst, err := n.impl.instantiate(ctx, mainOut, sideCtl)
	if err != nil {
		return nil, fmt.Errorf("runtime: operator %q subtask %d: %w", n.name, s, err)
	}
	for _, p := range inst.parts() {
		if v, ok := p.(Validator); ok {
			if err := v.Validate(); err != nil {
				inst.close()
				return nil, fmt.Errorf("runtime: operator %q: %w", n.name, err)
			}
		}
	}
	t.chain = append(t.chain, inst)
	return inst, nil
}

// instance is one operator subtask inside a task.
type instance interface {
	name() string
	open() error
	// input returns the Output[IN] through which records of input i reach
	// the operator (for chaining).
	input(i int) any
	endInput() error
	close() error
	// run is the task loop when this instance heads the task.
	run(t *task) error
	// context is the instance's runtime context.
	context() *Context
	// parts returns what may implement Snapshotter or
	// CheckpointListener: the operator, or a source's reader.
	parts() []any
}

// nodeImpl creates the instances of a node.
type nodeImpl interface {
	instantiate(ctx *Context, out any, sides []control) (instance, error)
}
