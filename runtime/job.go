package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/keygroup"
)

// Config is how a job runs. Its zero value is usable: every field documents
// its default.
type Config struct {
	// Parallelism is the default number of subtasks per operator.
	// 0 means 1.
	Parallelism int
	// MaxParallelism is the number of key groups. 0 means Flink's default
	// for the largest parallelism in the job (at least 128). It is fixed
	// for the life of the job's state.
	MaxParallelism int
	// AutoWatermarkInterval is how often sources call their generators'
	// OnPeriodicEmit. 0 means 200ms; a negative value disables periodic
	// emission (Flink uses 0 for that; weir keeps 0 for the default).
	AutoWatermarkInterval time.Duration
	// BufferSize is the number of records per batch between subtasks.
	// 0 means 512.
	BufferSize int
	// BuffersPerChannel bounds each channel's in-flight batches (the
	// back-pressure threshold). 0 means 4.
	BuffersPerChannel int
	// BufferTimeout is the longest a partly filled batch waits before it is
	// sent while its producer is busy (a producer that has nothing to do
	// sends at once). 0 means 100ms; negative disables the timer.
	BufferTimeout time.Duration
	// DisableChaining runs every operator in its own goroutines.
	DisableChaining bool
	// Clock is processing time. nil means clock.Real.
	Clock clock.Clock
	// Logger receives the runtime's logs. nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the job's counters and gauges. nil means a new set.
	Metrics *Metrics
	// Checkpoint configures checkpoints, savepoints and restore.
	Checkpoint CheckpointConfig
	// Restart says whether a job whose task failed is started again from
	// its newest checkpoint, and when; the zero value never restarts.
	Restart RestartStrategy
	// StateBackend selects the keyed-state backend (memory by default).
	StateBackend StateBackendConfig
	// Slice, when Slice.Count > 0, declares the job one of Count jobs that
	// split the key groups of one larger keyed job (package cluster runs
	// each keyed task of a clustered job so). MaxParallelism must then be
	// set. The runtime does not route by it; it tells operators through
	// Context.OwnedKeyGroups. Zero: the job is whole.
	Slice Slice
}

// Slice places a job among Count jobs that split the MaxParallelism key
// groups of one keyed job the way the subtasks of one job of parallelism
// Count would: job Index receives only keys of the key groups
// keygroup.RangeFor(MaxParallelism, Count, Index). Whatever the jobs keep
// per key group outside their own checkpoints (an action-state store
// shared by all of them) must be kept for those key groups only, or one
// job would rebuild, or prune, another's.
type Slice struct {
	// Index is the job's slice, in [0, Count).
	Index int
	// Count is the number of slices; 0 means the job is whole.
	Count int
}

// withDefaults returns c with every default applied, the only place they
// are (each field's comment names its default): the job, its builder, its
// coordinator and its restarts read only the result. MaxParallelism's
// default depends on the largest parallelism among g's operators (g may
// be nil: then on Parallelism).
func (c Config) withDefaults(g *Graph) Config {
	if c.Parallelism <= 0 {
		c.Parallelism = 1
	}
	if c.MaxParallelism == 0 {
		maxPar := c.Parallelism // g == nil: every operator's
		if g != nil {
			maxPar = 0
			for _, n := range g.nodes {
				p := n.parallelism
				if p <= 0 {
					p = c.Parallelism
				}
				maxPar = max(maxPar, p)
			}
		}
		c.MaxParallelism = keygroup.DefaultMaxParallelism(maxPar)
	}
	if c.AutoWatermarkInterval == 0 {
		c.AutoWatermarkInterval = 200 * time.Millisecond
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 512
	}
	if c.BuffersPerChannel <= 0 {
		c.BuffersPerChannel = 4
	}
	if c.BufferTimeout == 0 {
		c.BufferTimeout = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = &Metrics{}
	}
	c.Checkpoint = c.Checkpoint.withDefaults()
	c.Restart = c.Restart.withDefaults()
	return c
}

// ErrEmptyJob is returned by Execute for a graph without operators.
var ErrEmptyJob = errors.New("runtime: the job has no operators; add a source and a sink")

// Execute runs the graph until every source has ended and all data has
// drained, or until ctx is cancelled (then it returns ctx's error), or until
// an operator fails (then it returns an *OperatorError naming the operator,
// subtask and phase and wrapping its error, after cancelling the rest).
func Execute(ctx context.Context, g *Graph, cfg Config) error {
	j, err := Start(ctx, g, cfg)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Job is a running job: its current attempt and, with a RestartStrategy,
// the ones that replace it after a failure (restart.go).
type Job struct {
	g      *Graph
	cfg    Config // with defaults
	cancel context.CancelCauseFunc
	done   chan struct{}
	err    error
	// restored is what the first attempt restored (Restored).
	restored RestoredFrom
	restarts *Counter
	mu       struct {
		sync.Mutex
		// b is the builder of the current attempt (written by the
		// supervising goroutine when it starts another).
		b *builder
		// restarting is the failure the job is restarting after, from
		// the failure until the next attempt has started (Restarting).
		restarting error
	}
}

// Restarting returns the failure the job is restarting after while it is
// between attempts (the restart strategy's pause, then the next attempt's
// restore), and nil otherwise. A readiness probe answers "not ready"
// meanwhile.
func (j *Job) Restarting() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.restarting
}

// current returns the builder of the current attempt.
func (j *Job) current() *builder {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.b
}

// Start builds the graph's tasks (restoring state if configured) and starts
// them; the job runs until Wait returns. After a task fails, the job is
// started again as Config.Restart says, from its newest checkpoint.
//
// Start first checks cfg and every operator's parallelism (see
// ValidateConfig), and fails with one error naming each bad field, its
// value and what is accepted, before any work is done.
func Start(ctx context.Context, g *Graph, cfg Config) (*Job, error) {
	if len(g.nodes) == 0 {
		return nil, ErrEmptyJob
	}
	if err := cfg.validate(g); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(g)
	ctx, cancel := context.WithCancelCause(ctx)
	j := &Job{g: g, cfg: cfg, cancel: cancel, done: make(chan struct{}),
		restarts: cfg.Metrics.counter("job", 0, "restarts")} // MetricRestarts
	a, err := j.startAttempt(ctx, cfg)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	j.mu.b = a.b
	j.restored = a.b.restored
	go j.supervise(ctx, a)
	return j, nil
}

// attempt is one run of the job's tasks; done is closed when every task
// has ended and a checkpoint being persisted is finished, err is then the
// first task's error.
type attempt struct {
	b    *builder
	done chan struct{}
	err  error
}

// startAttempt builds the tasks of the graph with cfg and starts them,
// under a context of their own (a failing task cancels its attempt, not
// the job).
func (j *Job) startAttempt(parent context.Context, cfg Config) (*attempt, error) {
	ctx, cancel := context.WithCancelCause(parent)
	b, err := newBuilder(j.g, cfg, ctx.Done())
	if err != nil {
		cancel(nil)
		return nil, err
	}
	tasks, err := b.build()
	if err != nil {
		cancel(nil)
		return nil, err
	}
	a := &attempt{b: b, done: make(chan struct{})}
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		b.coord.run(ctx)
	}()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.run(ctx)
			if err != nil {
				once.Do(func() {
					first = err
					cancel(err)
				})
			}
		}()
	}
	go func() {
		wg.Wait()
		if first != nil && ctx.Err() != nil && errors.Is(first, context.Canceled) {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				first = cause
			}
		}
		a.err = first
		cancel(nil)
		// A checkpoint being persisted finishes before the attempt ends,
		// so that a restart sees it (or its absence) for certain.
		<-coordDone
		close(a.done)
	}()
	return a, nil
}

// Wait waits for the job to end and returns its error.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Cancel stops the job; Wait then returns context.Canceled.
func (j *Job) Cancel() { j.cancel(context.Canceled) }

// TriggerCheckpoint takes a checkpoint now (into CheckpointConfig.Dir) and
// returns its id and directory once it is complete. On a job that has
// ended it returns ErrJobStopped at once.
// On a job without CheckpointConfig.Dir it returns ErrNoCheckpointDir at
// once, before any task snapshots anything.
func (j *Job) TriggerCheckpoint(ctx context.Context) (int64, string, error) {
	if j.cfg.Checkpoint.Dir == "" {
		return 0, "", ErrNoCheckpointDir
	}
	return j.current().coord.trigger(ctx, checkpoint.KindCheckpoint, "")
}

// ErrNoCheckpointDir is what TriggerCheckpoint returns on a job configured
// without CheckpointConfig.Dir.
var ErrNoCheckpointDir = errors.New("runtime: checkpoint has no directory; set CheckpointConfig.Dir")

// TriggerSavepoint takes a savepoint into dir (a directory path or a URL,
// see CheckpointConfig.Dir; it must not hold one) and returns its id once
// it is complete. Savepoints work whether or not
// periodic checkpoints are configured. On a job that has ended it returns
// ErrJobStopped at once.
func (j *Job) TriggerSavepoint(ctx context.Context, dir string) (int64, error) {
	b := j.current()
	if b.cfg.Checkpoint.Storage.Store == nil {
		if err := checkpoint.CheckLocation(dir); err != nil {
			return 0, fmt.Errorf("runtime: savepoint: %w", err)
		}
	}
	id, _, err := b.coord.trigger(ctx, checkpoint.KindSavepoint, dir)
	return id, err
}

// Restored says which snapshot the job was started from (a zero Path:
// none, it started fresh); restarts after failures are not counted.
func (j *Job) Restored() RestoredFrom { return j.restored }

// Metrics returns the job's metrics (one set over all its attempts).
func (j *Job) Metrics() *Metrics { return j.cfg.Metrics }

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

// task is one chain of operators of one subtask, run by one goroutine.
type task struct {
	job         *builder
	node        *Node
	index       int // in the job's tasks (the coordinator's numbering)
	subtask     int
	parallelism int
	head        instance
	chain       []instance // head first, in topological order
	gates       []any
	writers     []flusher
	mailbox     mailbox
	timers      procTimers
	align       aligner
	// idleGates are the gates of the chain's Holder operators (idlehold.go).
	idleGates []*idleGate
	// finalCheckpointDone is set (by a mailbox letter) when the final
	// checkpoint of a bounded job has completed.
	finalCheckpointDone bool
	// current is the chain index of the operator being called (-1: none),
	// for panic reports.
	current int
	done    <-chan struct{}
	err     error
	// onBackpressure, if set, is told when an output blocks the task
	// (true) and when it may go on (false).
	onBackpressure func(blocked bool)
	// bpMicros adds up the time outputs blocked the task, bpNow is 1
	// while one does, and bpSince is when the current block began.
	bpMicros *Counter
	bpNow    *Gauge
	bpSince  time.Time
}

// Back-pressure metrics of a task, under the name of the operator heading
// its chain (a task is blocked as a whole: whichever of its outputs has
// no free buffer stops every operator of the chain).
const (
	// MetricBackPressuredMicros counts the microseconds the task spent
	// blocked on an output with no free buffer (its consumer is slower),
	// added when each block ends.
	MetricBackPressuredMicros = "backPressuredMicros"
	// MetricBackPressured is 1 while the task is blocked so, else 0.
	MetricBackPressured = "backPressured"
)

// backpressured is told when an output blocks the task and when it may go
// on: once per buffer that was not free, never per record.
func (t *task) backpressured(blocked bool) {
	if t.onBackpressure != nil {
		t.onBackpressure(blocked)
	}
	if t.bpMicros == nil {
		return
	}
	if blocked {
		t.bpSince = time.Now() // lint:allow-time a measurement of the block, not a decision
		t.bpNow.Set(1)
		return
	}
	t.bpMicros.Add(time.Since(t.bpSince).Microseconds()) // lint:allow-time as above
	t.bpNow.Set(0)
}

func (t *task) flushAll() {
	for _, w := range t.writers {
		w.flush()
	}
	for _, inst := range t.chain {
		if p, ok := inst.(interface{ publish() }); ok {
			p.publish()
		}
	}
}

func (t *task) run(ctx context.Context) (err error) {
	t.done = ctx.Done()
	opened := 0
	defer func() {
		if r := recover(); r != nil {
			name := t.node.name
			if t.current >= 0 && t.current < len(t.chain) {
				name = t.chain[t.current].name()
			}
			err = t.opError(name, PhasePanic, &PanicError{Value: r, Stack: debug.Stack()})
		}
		for i := range opened {
			if cerr := t.chain[i].close(); cerr != nil && err == nil {
				err = t.opError(t.chain[i].name(), PhaseClose, cerr)
			}
		}
	}()
	// Open tail first so that every operator's consumers are ready before
	// it can emit.
	for i := len(t.chain) - 1; i >= 0; i-- {
		if err := t.chain[i].open(); err != nil {
			// Close everything instantiated, opened or not (close is
			// idempotent and releases what instantiation acquired, such as
			// a source's reader).
			for j := range t.chain {
				t.chain[j].close()
			}
			return t.opError(t.chain[i].name(), PhaseOpen, err)
		}
	}
	opened = len(t.chain)
	// The periodic flush also publishes chained operators' record counts,
	// so every task has it.
	if t.job.cfg.BufferTimeout > 0 {
		t.scheduleFlush()
	}
	if err := t.head.run(t); err != nil {
		return err
	}
	if t.err != nil {
		return t.err
	}
	// The head's input ended: end the inputs of the chained operators in
	// order, so each can emit what it still holds.
	for _, inst := range t.chain[1:] {
		if err := inst.endInput(); err != nil {
			return t.opError(inst.name(), PhaseEndInput, err)
		}
		if t.err != nil {
			return t.err
		}
	}
	t.job.coord.taskFinished(t)
	t.flushAll()
	for _, w := range t.writers {
		w.end()
	}
	return ctx.Err()
}

func (t *task) scheduleFlush() {
	d := t.job.cfg.BufferTimeout.Milliseconds()
	if d <= 0 {
		d = 1
	}
	var tick func(now int64)
	tick = func(now int64) {
		t.flushAll()
		t.timers.register(now+d, posAny, tick)
	}
	// The flush calls no operator, so any Yield may run it: output keeps
	// flowing while an operator waits.
	t.timers.register(clock.NowMillis(t.job.cfg.Clock)+d, posAny, tick)
}

// serve runs the queued mailbox letters and the due timers without
// blocking; it reports whether the job is being cancelled. Both are served
// on every call (a select would pick one at random and leave the other for
// after the next, possibly long, poll).
func (t *task) serve() bool {
	select {
	case <-t.done:
		return false
	default:
	}
	select {
	case <-t.mailbox.wake:
		t.runLetters()
	default:
	}
	select {
	case <-t.timers.C():
		t.fireTimers()
	default:
	}
	return true
}

// yield blocks until a mailbox letter or a timer has run: any letter or
// timer, for the task's own waits (the final checkpoint). It returns the
// task's failure, if any, so a wait stops.
func (t *task) yield() error {
	if t.err != nil {
		return t.err
	}
	select {
	case <-t.mailbox.wake:
		t.runLetters()
	case <-t.timers.C():
		t.fireTimers()
	case <-t.done:
		return context.Canceled
	}
	return t.err
}

// yieldAt is Context.Yield of the operator at chain position p: it blocks
// until a letter or timer of position >= p has run, and runs no other
// (M2): neither upstream operators nor task letters run inside an
// operator's call. It returns the task's failure, if any, so an operator
// waiting for work stops waiting.
func (t *task) yieldAt(p int32) error {
	defer t.timers.settle()
	for {
		if t.err != nil {
			return t.err
		}
		if !t.mailbox.await(p) {
			t.mailbox.runFrom(p)
			return t.err
		}
		select {
		case <-t.mailbox.yieldWake:
			// The Post that woke us ended the wait; await finds its letter.
		case <-t.timers.C():
			t.mailbox.unawait()
			if t.timers.fireFrom(p) > 0 {
				return t.err
			}
		case <-t.done:
			t.mailbox.unawait()
			return context.Canceled
		}
	}
}

// errCancelled is what a loop returns when the job is cancelled under it.
var errCancelled = context.Canceled

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

// postTask queues f as a task letter (posTask): it runs from the task loop
// only, never inside an operator's Yield (M2). Any goroutine may call it.
func (t *task) postTask(f func()) { t.mailbox.post(f, posTask) }
