package sim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
)

// agentWorld is what outlives the attempts of a run with the agent branch,
// and the observer of its side effects (S11), independent of the agent
// operator: the external systems the model and the tool call (every
// request with its idempotency key, in one global order), the machine's
// local disk holding the action-state WAL, the failures that struck, and
// which call results the store reported durable.
//
// A failure kills the process at the instant it strikes (strike): from
// then on the attempt's model and tool calls never return (they block
// until the operator cancels them, so nothing more is recorded), its store
// confirmations no longer count, and, when the failure crashes the machine
// too, the disk the next attempt sees is a crash clone taken at that
// instant: exactly what the WAL had synced. That is the window agent/doc.go
// documents (G10, Limits): a call that took effect before the
// crash and whose result was not yet durable runs again.
type agentWorld struct {
	spec *AgentSpec
	time agentTime // virtual time for the model's hangs and late answers
	// memory is the action-state store with AgentSpec.Store memory: a
	// store outside the process (a database's, say), which every attempt
	// opens as it was, every Put durable when it returns.
	memory *agent.MemoryStore
	// kafka is the Kafka store's cluster (AgentSpec.Store kafka), for the
	// run (agentkafka.go).
	kafka *agentKafka
	// await is the waits' external side (agentawait.go), or nil.
	await *awaitWorld
	mu    struct {
		sync.Mutex
		seq          int64 // global order of requests, confirmations and strikes
		attempt      int
		alive        bool
		disk         *vfs.MemFS // the WAL's, as the next attempt finds it
		keys         map[string]*keyLog
		byCall       map[callRef]string // the key of each (input, call)
		expired      map[int64]bool     // inputs whose action saw its deadline pass
		last         map[int64]lastCall // each input's last call with an outcome
		failure      *Failure           // the first violation of S11
		failureInput int64              // the input it is about, or -1
		// trace is what happened to the inputs' calls and action
		// states, in order, for a failure's report (traceOf).
		trace []traceEntry
		// inputs maps a key and an input's sequence number to the input
		// (setInputs), so that the store's operations, which name runs
		// by key and sequence number, can be traced to inputs.
		inputs map[string][]int64
		// durable holds, per run, the key and sequence number of every
		// run whose state the store reported durable, until a discard
		// or prune of the key may have removed it (S17).
		durable map[string]keySeq
		// Counters, for the report.
		executions, repeats, rejectedRequests, strikes int
		discards                                       int
	}
}

// callRef names one durable call of one input: the agent's action makes
// the model call, then the tool call (and, with AgentInput.Notify, a
// second action makes the notify calls).
type callRef struct {
	id   int64
	call string // "model", "tool", or "notify1", "notify2"
}

// lastCall is an input's last call that produced an outcome: its
// attempt and key.
type lastCall struct {
	attempt int
	key     string
}

// keyLog is what the world knows of one idempotency key.
type keyLog struct {
	ref callRef
	// execs are the attempts in which a request under the key produced an
	// outcome (an effect, or a permanent refusal).
	execs     []int
	effect    bool // the tool took effect at least once
	confirmed bool // the store reported its outcome durable since its last execution
	// allowance counts failures that struck after its last execution and
	// before its outcome was durable: the repeats S11 allows.
	allowance int
	requests  int // every request, transient failures included
}

// traceEntry is one line of the world's trace: it concerns input id (-1:
// every input, such as a strike) or, for an operation of the store on a
// key's runs from or up to a sequence number, the inputs of key with seq
// at or after (from) or at or before (upTo) it.
type traceEntry struct {
	seq     int64 // the world's global order
	attempt int
	id      int64
	key     string
	from    int64 // with key: the entry concerns seq >= from ...
	upTo    int64 // ... and seq <= upTo
	text    string
}

// walDir is the WAL's directory on the machine's disk (one log per agent
// subtask under it, per operator uid).
const walDir = "/agent-wal"

func newAgentWorld(spec *AgentSpec) *agentWorld {
	w := &agentWorld{spec: spec, memory: agent.NewMemoryStore()}
	w.mu.disk = vfs.NewCrashableMem()
	w.mu.keys = map[string]*keyLog{}
	w.mu.byCall = map[callRef]string{}
	w.mu.expired = map[int64]bool{}
	w.mu.last = map[int64]lastCall{}
	w.mu.failureInput = -1
	w.mu.durable = map[string]keySeq{}
	return w
}

type keySeq struct {
	key string
	seq int64
	id  agent.RunID // the run (for checkDiskWAL)
}

func runKey(id agent.RunID) string {
	return fmt.Sprintf("%x/%d/%d/%s/%x/%s", id.Key, id.Seq, id.EventID, id.EventType, id.EventDigest[:8], id.Action)
}

// gotNothing checks S17 when the store's Get (attempt n's) returned no
// state for run id: the store must not have reported a state of the run
// durable, unless a discard or prune of its key may have removed it.
func (w *agentWorld) gotNothing(n int, id agent.RunID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.mu.durable[runKey(id)]; !ok {
		return
	}
	ids := w.mu.inputs[string(id.Key)]
	input := int64(-1)
	if id.Seq >= 0 && id.Seq < int64(len(ids)) {
		input = ids[id.Seq]
	}
	if w.mu.failure == nil {
		w.mu.failure = &Failure{Invariant: InvAgentStore,
			Detail: fmt.Sprintf("attempt %d: the store has no state of run %s of key %s's input %d (input %d), which it reported durable, and no discard or prune of the key removed it",
				n, id.Action, id.Key, id.Seq, input)}
		w.mu.failureInput = input
	}
}

// setInputs names the agent's inputs by key and sequence number (the
// order in which the records of a key reach the operator, the source's:
// a restore keeps them), for the trace of the store's operations.
func (w *agentWorld) setInputs(spec *Spec) {
	m := map[string][]int64{}
	for _, st := range spec.Steps {
		if st.Kind == StepRecord && spec.Agent.takes(st.ID) {
			m[st.Key] = append(m[st.Key], st.ID)
		}
	}
	if spec.Agent.Await != nil {
		w.await = newAwaitWorld(spec)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.inputs = m
}

// traceLocked adds a line about input id (-1: every input) to the trace.
func (w *agentWorld) traceLocked(id int64, format string, args ...any) {
	w.mu.seq++
	w.mu.trace = append(w.mu.trace, traceEntry{seq: w.mu.seq, attempt: w.mu.attempt, id: id, from: -1, upTo: -1, text: fmt.Sprintf(format, args...)})
}

// traceRunsLocked adds a line about the runs of key with sequence numbers
// in [from, upTo] to the trace.
func (w *agentWorld) traceRunsLocked(key []byte, from, upTo int64, format string, args ...any) {
	w.mu.seq++
	w.mu.trace = append(w.mu.trace, traceEntry{seq: w.mu.seq, attempt: w.mu.attempt, id: -2, key: string(key), from: from, upTo: upTo, text: fmt.Sprintf(format, args...)})
}

// traceOf returns the trace of input id: what the world saw of its calls
// and of the store's operations on its runs, with the attempts' begins
// and strikes, each line prefixed with the world's order and the attempt.
func (w *agentWorld) traceOf(id int64) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	key, seq := "", int64(-1)
	for k, ids := range w.mu.inputs {
		if i := slices.Index(ids, id); i >= 0 {
			key, seq = k, int64(i)
		}
	}
	var out []string
	for _, e := range w.mu.trace {
		if e.id == id || e.id == -1 || e.id == -2 && e.key == key && seq >= e.from && (e.upTo < 0 || seq <= e.upTo) {
			out = append(out, fmt.Sprintf("trace %d a%d: %s", e.seq, e.attempt, e.text))
		}
	}
	if key != "" {
		out = append([]string{fmt.Sprintf("input %d is key %s's input %d (its runs' sequence number)", id, key, seq)}, out...)
	}
	return out
}

// begin starts attempt n: the process is up, and its WAL opens on disk.
func (w *agentWorld) begin(n int) (disk vfs.FS) {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.attempt, w.mu.alive = n, true
	w.traceLocked(-1, "attempt %d begins", n)
	if w.spec.Store == StoreWAL && n > 1 {
		w.checkDiskWALLocked(n)
	}
	return w.mu.disk
}

// strike records that fault f ended the attempt at this instant.
func (w *agentWorld) strike(f *Fault) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.alive {
		return // a second fault of the same attempt: the process is gone
	}
	w.mu.alive = false
	w.mu.strikes++
	w.traceLocked(-1, "%s strikes (machine crash: %v)", f, f.Machine)
	for _, k := range w.mu.keys {
		if n := len(k.execs); n > 0 && k.execs[n-1] == w.mu.attempt && !k.confirmed {
			k.allowance++
		}
	}
	if f.Machine {
		w.mu.disk = w.mu.disk.CrashClone(vfs.CrashCloneCfg{})
	}
}

// violate records the first violation of S11.
func (w *agentWorld) violateLocked(detail string, records ...string) {
	if w.mu.failure == nil {
		w.mu.failure = &Failure{Invariant: InvAgentEffects, Detail: detail, Records: records}
	}
}

// violateInputLocked records the first violation of S11, about input id,
// with the input's trace (taken when the report is made: failure).
func (w *agentWorld) violateInputLocked(id int64, detail string, records ...string) {
	if w.mu.failure == nil {
		w.violateLocked(detail, records...)
		w.mu.failureInput = id
	}
}

// request records a request under key for call ref in attempt n; outcome
// says it produced one (an effect or a permanent refusal: the result to
// record), effect that it took effect. It returns false when the process
// of attempt n is dead: the caller then waits for cancellation.
func (w *agentWorld) request(n int, ref callRef, key string, outcome, effect bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.alive || w.mu.attempt != n {
		return false
	}
	w.traceLocked(ref.id, "%s request, key %s: outcome %v, effect %v", ref.call, key, outcome, effect)
	if key == "" {
		w.violateInputLocked(ref.id, fmt.Sprintf("input %d: a %s call without an idempotency key", ref.id, ref.call))
		return true
	}
	if prev, ok := w.mu.byCall[ref]; ok && prev != key {
		w.violateInputLocked(ref.id, fmt.Sprintf("input %d: its %s call came under two idempotency keys (attempt %d)", ref.id, ref.call, n),
			"first: "+prev, "now:   "+key)
	}
	w.mu.byCall[ref] = key
	k := w.mu.keys[key]
	if k == nil {
		k = &keyLog{ref: ref}
		w.mu.keys[key] = k
	} else if k.ref != ref {
		w.violateInputLocked(ref.id, fmt.Sprintf("idempotency key %s used by input %d's %s call and input %d's %s call", key, k.ref.id, k.ref.call, ref.id, ref.call))
	}
	k.requests++
	if !outcome {
		return true
	}
	// At most one call per running action has taken effect without its
	// result being durable (agent/doc.go, G10): the input's
	// previous call this attempt made (the model call before the tool
	// call, the apply call before the second action's notify calls) must
	// be durable before the next one produces an outcome.
	if l, ok := w.mu.last[ref.id]; ok && l.attempt == n && l.key != key {
		if m := w.mu.keys[l.key]; m != nil && len(m.execs) > 0 && m.execs[len(m.execs)-1] == n && !m.confirmed {
			w.violateInputLocked(ref.id, fmt.Sprintf("input %d: its %s call took effect (attempt %d) while its %s call's result was not durable: two calls of one input in the window", ref.id, ref.call, n, m.ref.call),
				m.ref.call+" key "+l.key, ref.call+" key "+key)
		}
	}
	w.mu.last[ref.id] = lastCall{attempt: n, key: key}
	if len(k.execs) > 0 {
		switch {
		case k.execs[len(k.execs)-1] == n:
			w.violateInputLocked(ref.id, fmt.Sprintf("input %d: its %s call ran twice in attempt %d under key %s", ref.id, ref.call, n, key))
		case k.confirmed:
			w.violateInputLocked(ref.id, fmt.Sprintf("input %d: its %s call ran again in attempt %d (key %s, runs in attempts %v) although the store had reported its result durable", ref.id, ref.call, n, key, k.execs))
		case k.allowance == 0:
			w.violateInputLocked(ref.id, fmt.Sprintf("input %d: its %s call ran again in attempt %d (key %s, runs in attempts %v) without a failure in its window", ref.id, ref.call, n, key, k.execs))
		default:
			k.allowance--
		}
		w.mu.repeats++
	}
	k.execs = append(k.execs, n)
	k.confirmed = false
	k.effect = k.effect || effect
	w.mu.executions++
	if outcome && !effect {
		w.mu.rejectedRequests++
	}
	return true
}

// expire records that input id's action saw its deadline pass (a
// time-out dead letter is then allowed for it: S10).
func (w *agentWorld) expire(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.expired[id] = true
}

// keyRE finds the idempotency keys the model and the tool put into their
// results and errors (so that the recorded states name them).
var keyRE = regexp.MustCompile(`key=([0-9a-f]{32})`)

// confirm records that the store reported st durable in attempt n: the
// outcomes of the calls it holds are durable.
func (w *agentWorld) confirm(n int, st *agent.ActionState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.alive || w.mu.attempt != n {
		return // after the crash: what it wrote may be gone
	}
	w.mu.durable[runKey(st.ID)] = keySeq{string(st.ID.Key), st.ID.Seq, st.ID}
	var ids []int64
	for _, c := range st.Calls {
		for _, s := range []string{string(c.Result), c.Error} {
			for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
				if k := w.mu.keys[m[1]]; k != nil && len(k.execs) > 0 {
					k.confirmed = true
					if !slices.Contains(ids, k.ref.id) {
						ids = append(ids, k.ref.id)
					}
				}
			}
		}
	}
	for _, id := range ids {
		w.traceLocked(id, "the store reports durable: %s", describeState(st))
	}
}

func (w *agentWorld) discarded(key []byte, pos agent.Position) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.discards++
	for r, ks := range w.mu.durable {
		if ks.key == string(key) && ks.seq >= pos.Seq {
			delete(w.mu.durable, r)
		}
	}
	w.traceRunsLocked(key, pos.Seq, -1, "the store is asked to discard the key's states from %+v", pos)
}

// started traces that attempt n's action started for input id.
func (w *agentWorld) started(n int, id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.traceLocked(id, "(attempt %d) the action starts", n)
}

// restored traces the Restore of attempt n's store.
func (w *agentWorld) restored(n int, markers int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.traceLocked(-1, "(attempt %d's store) restore from %d markers: %v", n, markers, err)
}

// stored traces an operation of the store (attempt n's) on the state of
// one run.
func (w *agentWorld) stored(n int, id agent.RunID, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.traceRunsLocked(id.Key, id.Seq, id.Seq, "(attempt %d's store) run %s of event %d %s %x: %s", n, id.Action, id.EventID, id.EventType, id.EventDigest[:4], fmt.Sprintf(format, args...))
}

// pruned traces a prune of the store (attempt n's).
func (w *agentWorld) pruned(n int, checkpoint int64, upTo []agent.KeySeq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range upTo {
		for r, ks := range w.mu.durable {
			if ks.key == string(p.Key) && ks.seq <= p.Seq {
				delete(w.mu.durable, r)
			}
		}
		w.traceRunsLocked(p.Key, 0, p.Seq, "(attempt %d's store) prune up to sequence number %d (checkpoint %d)", n, p.Seq, checkpoint)
	}
}

// describeState describes an action state for the trace: completed or
// not, and its calls (name, and the idempotency keys their results or
// errors name).
func describeState(st *agent.ActionState) string {
	if st == nil {
		return "none"
	}
	var calls []string
	for _, c := range st.Calls {
		d := c.Name
		if c.Pending {
			d += " pending"
		}
		if c.Failed {
			d += " failed"
		}
		for _, s := range []string{string(c.Result), c.Error} {
			for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
				d += " " + m[1][:8]
			}
		}
		calls = append(calls, d)
	}
	return fmt.Sprintf("seq %d completed %v calls %q", st.ID.Seq, st.Completed, calls)
}

// effects returns the calls that took effect at least once.
func (w *agentWorld) effects() map[callRef]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[callRef]bool{}
	for _, k := range w.mu.keys {
		if k.effect {
			m[k.ref] = true
		}
	}
	return m
}

func (w *agentWorld) expiredInputs() map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int64]bool, len(w.mu.expired))
	for id := range w.mu.expired {
		m[id] = true
	}
	return m
}

// failure returns the first violation of S11, with the trace of the
// input it is about.
func (w *agentWorld) failure() *Failure {
	w.mu.Lock()
	f, id := w.mu.failure, w.mu.failureInput
	w.mu.Unlock()
	if f == nil || id < 0 {
		return f
	}
	g := *f
	g.Records = append(slices.Clone(f.Records), w.traceOf(id)...)
	return &g
}

// stats describes what the world saw, for the report.
func (w *agentWorld) stats() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.mu.keys))
	for k := range w.mu.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprintf("%d keys, %d executions, %d repeated in the window, %d refused, %d time-outs seen, %d discards, %d moves of virtual time",
		len(keys), w.mu.executions, w.mu.repeats, w.mu.rejectedRequests, len(w.mu.expired), w.mu.discards, w.time.advances())
}

// observedStore is the action-state store of one agent subtask, watched
// at its interface: when Put (or a queued write's Wait) returns nil, the
// store says the state is durable, and the world notes the call outcomes
// it holds as confirmed. observedLog adds a log store's optional
// capabilities (agent.Checkpointed, agent.Queuer) by delegation; the
// memory store has neither, and its wrapper must not claim them.
type observedStore struct {
	agent.ActionStateStore
	w       *agentWorld
	attempt int
}

// logStore is a store that is a log: the WAL (and the Kafka store).
type logStore interface {
	agent.ActionStateStore
	agent.Checkpointed
	agent.Queuer
}

type observedLog struct {
	*observedStore
	log logStore
}

var (
	_ agent.ActionStateStore = (*observedStore)(nil)
	_ logStore               = (*observedLog)(nil)
	_ agent.ContextRestorer  = (*observedLog)(nil)
	_ logStore               = (*wal.Store)(nil)
	_ logStore               = (*kafkastore.Store)(nil)
)

// observe wraps s, keeping its capabilities.
func observe(s agent.ActionStateStore, w *agentWorld, attempt int) agent.ActionStateStore {
	o := &observedStore{ActionStateStore: s, w: w, attempt: attempt}
	if l, ok := s.(logStore); ok {
		return &observedLog{observedStore: o, log: l}
	}
	return o
}

func (s *observedStore) Get(id agent.RunID) (*agent.ActionState, error) {
	st, err := s.ActionStateStore.Get(id)
	s.w.stored(s.attempt, id, "get: %s, err %v", describeState(st), err)
	if st == nil && err == nil {
		s.w.gotNothing(s.attempt, id)
	}
	return st, err
}

func (s *observedStore) Put(st *agent.ActionState) error {
	s.w.stored(s.attempt, st.ID, "put: %s", describeState(st))
	if err := s.ActionStateStore.Put(st); err != nil {
		s.w.stored(s.attempt, st.ID, "put failed: %v", err)
		return err
	}
	s.w.confirm(s.attempt, st)
	return nil
}

func (s *observedStore) DiscardFrom(key []byte, pos agent.Position) error {
	s.w.discarded(key, pos)
	return s.ActionStateStore.DiscardFrom(key, pos)
}

func (s *observedStore) Prune(upTo []agent.KeySeq) error {
	s.w.pruned(s.attempt, 0, upTo)
	return s.ActionStateStore.Prune(upTo)
}

func (s *observedLog) PutQueued(st *agent.ActionState) (agent.Pending, error) {
	s.w.stored(s.attempt, st.ID, "put queued: %s", describeState(st))
	p, err := s.log.PutQueued(st)
	if err != nil {
		s.w.stored(s.attempt, st.ID, "put queued failed: %v", err)
		return nil, err
	}
	return &observedPending{p: p, s: s.observedStore, st: st}, nil
}

func (s *observedLog) PruneCheckpoint(checkpoint int64, upTo []agent.KeySeq) error {
	s.w.pruned(s.attempt, checkpoint, upTo)
	return s.log.PruneCheckpoint(checkpoint, upTo)
}

func (s *observedLog) Restore(markers [][]byte) error {
	err := s.log.Restore(markers)
	s.w.restored(s.attempt, len(markers), err)
	return err
}

// RestoreContext forwards to the store's own RestoreContext, the path the
// operator takes in production (the Kafka store's); a store without one
// restores as the operator would restore it, through Restore.
func (s *observedLog) RestoreContext(ctx context.Context, markers [][]byte) error {
	cr, ok := s.log.(agent.ContextRestorer)
	if !ok {
		return s.Restore(markers)
	}
	err := cr.RestoreContext(ctx, markers)
	s.w.restored(s.attempt, len(markers), err)
	return err
}

func (s *observedLog) Marker() ([]byte, error) { return s.log.Marker() }

func (s *observedLog) PruneHorizon() int64 { return s.log.PruneHorizon() }

type observedPending struct {
	p  agent.Pending
	s  *observedStore
	st *agent.ActionState
}

func (p *observedPending) Wait() error {
	if err := p.p.Wait(); err != nil {
		p.s.w.stored(p.s.attempt, p.st.ID, "queued put failed: %v", err)
		return err
	}
	p.s.w.confirm(p.s.attempt, p.st)
	return nil
}

// deadCall is what a model or tool call of a dead process does: it never
// returns a result (the process is gone); it waits until the operator
// cancels the action, so that nothing about it is recorded.
func deadCall(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// isDeadline reports whether the action's context ended by its time-out.
func isDeadline(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}
