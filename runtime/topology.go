package runtime

// Topology is the shape of a running job, for tools that show it (a
// dashboard): its operators in the order they were added (every operator
// after its inputs), the edges between them, and how they are chained
// into tasks.
type Topology struct {
	MaxParallelism int            `json:"maxParallelism"`
	Operators      []OperatorInfo `json:"operators"`
}

// OperatorInfo is one operator of a Topology.
type OperatorInfo struct {
	Name        string `json:"name"`
	UID         string `json:"uid"`
	Parallelism int    `json:"parallelism"`
	Source      bool   `json:"source,omitempty"`
	// Task is the name of the operator heading the chain this operator
	// runs in (its own name when it heads one): the operators of one task
	// run on one goroutine per subtask, and back-pressure
	// (MetricBackPressuredMicros) is measured per task, under this name.
	Task string `json:"task"`
	// Inputs are the edges into the operator, by input (0, or 1 for the
	// second input of a two-input operator).
	Inputs []EdgeInfo `json:"inputs,omitempty"`
}

// EdgeInfo is one edge into an operator.
type EdgeInfo struct {
	// From and FromUID name the operator the edge comes from (names may
	// repeat in a job; UIDs do not).
	From    string `json:"from"`
	FromUID string `json:"fromUid"`
	Input   int    `json:"input"`
	// Partitioning is forward, rebalance, broadcast or key-by (a
	// forward-or-rebalance edge resolved for the parallelisms the job
	// runs at).
	Partitioning string `json:"partitioning"`
	// SideOutput is set on an edge from a side output of From (late
	// records, dead letters, ...).
	SideOutput bool `json:"sideOutput,omitempty"`
	// Chained: the edge is a function call inside one task, not a channel.
	Chained bool `json:"chained,omitempty"`
}

// Topology returns the job's operators and edges.
func (j *Job) Topology() Topology {
	b := j.current()
	head := map[*Node]*Node{}
	var headOf func(n *Node) *Node
	headOf = func(n *Node) *Node {
		if h, ok := head[n]; ok {
			return h
		}
		h := n
		if len(n.inputs) == 1 && len(n.inputs[0]) == 1 && b.chained[n.inputs[0][0]] {
			h = headOf(n.inputs[0][0].src())
		}
		head[n] = h
		return h
	}
	t := Topology{MaxParallelism: b.maxParallelism}
	for _, n := range b.g.nodes {
		op := OperatorInfo{Name: n.name, UID: b.uid(n), Parallelism: b.par(n), Source: n.IsSource(), Task: headOf(n).name}
		for i, in := range n.inputs {
			for _, e := range in {
				op.Inputs = append(op.Inputs, EdgeInfo{From: e.src().name, FromUID: b.uid(e.src()), Input: i, Partitioning: b.kindOf(e).String(),
					SideOutput: e.tagID() != 0, Chained: b.chained[e]})
			}
		}
		t.Operators = append(t.Operators, op)
	}
	return t
}
