package sim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent"
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
// documents (guarantee 10, Limits): a call that took effect before the
// crash and whose result was not yet durable runs again.
type agentWorld struct {
	spec *AgentSpec
	mu   struct {
		sync.Mutex
		seq     int64 // global order of requests, confirmations and strikes
		attempt int
		alive   bool
		disk    *vfs.MemFS // the WAL's, as the next attempt finds it
		keys    map[string]*keyLog
		byCall  map[callRef]string // the key of each (input, call)
		expired map[int64]bool     // inputs whose action saw its deadline pass
		failure *Failure           // the first violation of S11
		// Counters, for the report.
		executions, repeats, rejectedRequests, strikes int
		discards                                       int
	}
}

// callRef names one durable call of one input: the agent's action makes
// the model call, then the tool call.
type callRef struct {
	id   int64
	call string // "model" or "tool"
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

// walDir is the WAL's directory on the machine's disk (one log per agent
// subtask under it, per operator uid).
const walDir = "/agent-wal"

func newAgentWorld(spec *AgentSpec) *agentWorld {
	w := &agentWorld{spec: spec}
	w.mu.disk = vfs.NewCrashableMem()
	w.mu.keys = map[string]*keyLog{}
	w.mu.byCall = map[callRef]string{}
	w.mu.expired = map[int64]bool{}
	return w
}

// begin starts attempt n: the process is up, and its WAL opens on disk.
func (w *agentWorld) begin(n int) (disk vfs.FS) {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.attempt, w.mu.alive = n, true
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
	w.mu.seq++
	w.mu.strikes++
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
	w.mu.seq++
	if key == "" {
		w.violateLocked(fmt.Sprintf("input %d: a %s call without an idempotency key", ref.id, ref.call))
		return true
	}
	if prev, ok := w.mu.byCall[ref]; ok && prev != key {
		w.violateLocked(fmt.Sprintf("input %d: its %s call came under two idempotency keys (attempt %d)", ref.id, ref.call, n),
			"first: "+prev, "now:   "+key)
	}
	w.mu.byCall[ref] = key
	k := w.mu.keys[key]
	if k == nil {
		k = &keyLog{ref: ref}
		w.mu.keys[key] = k
	} else if k.ref != ref {
		w.violateLocked(fmt.Sprintf("idempotency key %s used by input %d's %s call and input %d's %s call", key, k.ref.id, k.ref.call, ref.id, ref.call))
	}
	k.requests++
	if !outcome {
		return true
	}
	if ref.call == "tool" {
		// At most one call per running action has taken effect without
		// its result being durable (agent/doc.go, guarantee 10): the
		// model call this attempt made must be durable before the tool
		// call takes effect.
		if mk, ok := w.mu.byCall[callRef{ref.id, "model"}]; ok {
			if m := w.mu.keys[mk]; m != nil && len(m.execs) > 0 && m.execs[len(m.execs)-1] == n && !m.confirmed {
				w.violateLocked(fmt.Sprintf("input %d: the tool call took effect (attempt %d) while the model call's result was not durable: two calls of one action in the window", ref.id, n),
					"model key "+mk, "tool key  "+key)
			}
		}
	}
	if len(k.execs) > 0 {
		switch {
		case k.execs[len(k.execs)-1] == n:
			w.violateLocked(fmt.Sprintf("input %d: its %s call ran twice in attempt %d under key %s", ref.id, ref.call, n, key))
		case k.confirmed:
			w.violateLocked(fmt.Sprintf("input %d: its %s call ran again in attempt %d (key %s, runs in attempts %v) although the store had reported its result durable", ref.id, ref.call, n, key, k.execs))
		case k.allowance == 0:
			w.violateLocked(fmt.Sprintf("input %d: its %s call ran again in attempt %d (key %s, runs in attempts %v) without a failure in its window", ref.id, ref.call, n, key, k.execs))
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
	for _, c := range st.Calls {
		for _, s := range []string{string(c.Result), c.Error} {
			for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
				if k := w.mu.keys[m[1]]; k != nil && len(k.execs) > 0 {
					k.confirmed = true
				}
			}
		}
	}
}

func (w *agentWorld) discarded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.discards++
}

// effects returns the inputs whose tool call took effect at least once.
func (w *agentWorld) effects() map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[int64]bool{}
	for _, k := range w.mu.keys {
		if k.ref.call == "tool" && k.effect {
			m[k.ref.id] = true
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

func (w *agentWorld) failure() *Failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.failure
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
	return fmt.Sprintf("%d keys, %d executions, %d repeated in the window, %d refused, %d time-outs seen, %d discards",
		len(keys), w.mu.executions, w.mu.repeats, w.mu.rejectedRequests, len(w.mu.expired), w.mu.discards)
}

// observedStore is the WAL store of one agent subtask, watched at its
// interface: when Put (or a queued write's Wait) returns nil, the store
// says the state is durable, and the world notes the call outcomes it
// holds as confirmed. It keeps the WAL's optional capabilities
// (agent.Checkpointed, agent.Queuer) by delegation.
type observedStore struct {
	*wal.Store
	w       *agentWorld
	attempt int
}

var (
	_ agent.ActionStateStore = (*observedStore)(nil)
	_ agent.Checkpointed     = (*observedStore)(nil)
	_ agent.Queuer           = (*observedStore)(nil)
)

func (s *observedStore) Put(st *agent.ActionState) error {
	if err := s.Store.Put(st); err != nil {
		return err
	}
	s.w.confirm(s.attempt, st)
	return nil
}

func (s *observedStore) PutQueued(st *agent.ActionState) (agent.Pending, error) {
	p, err := s.Store.PutQueued(st)
	if err != nil {
		return nil, err
	}
	return &observedPending{p: p, s: s, st: st}, nil
}

func (s *observedStore) DiscardFrom(key []byte, pos agent.Position) error {
	s.w.discarded()
	return s.Store.DiscardFrom(key, pos)
}

type observedPending struct {
	p  agent.Pending
	s  *observedStore
	st *agent.ActionState
}

func (p *observedPending) Wait() error {
	if err := p.p.Wait(); err != nil {
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
