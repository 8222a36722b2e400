package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Await in the agent branch (issue 29): in half the agent seeds without
// processing-time timers (whose barrier steps move the clock while waits
// are pending), drawn from a stream of its own after every other draw, the
// agent is built with agent.ApplyWithAnswers and the action "decide"
// awaits an answer between its model call and its tool call for about a
// third of its inputs that have no model or tool fault. The answers come
// from answerLog, a log outside the process (a Kafka topic, say) that the
// answers source reads from its checkpointed offset; the world appends to
// it as an external system would, per awaited input (AgentAwait):
//
//   - early: at the start of the run, by the wait's name (one per input,
//     "approve-<id>"), so that it waits in the key's state until the wait
//     starts (the path a checkpoint must keep);
//   - in time: when the action asks (Wait.Ask), by the wait's ID or by its
//     name; virtual time does not move while the action waits for it;
//   - late: once the action has seen the wait time out, by the wait's ID;
//   - never.
//
// And answers no wait takes: for a completed wait (by its ID, after the
// action took its answer), for a wait name no input uses, for a key the
// workload does not have.
//
// The action's verdict gets the outcome: "+yes<id>"/"+no<id>" (the
// answer's value names the input it was sent for) or "+waited-out" (the
// time-out, ErrWaitTimedOut, which the action takes as its decision: the
// outcome weir leaves to the action). S10 then allows, per awaited input:
// the answer's verdict for an early or in-time answer, the time-out's for
// a late or a missing one; the time-out's for an early or in-time answer
// too, but only if the action saw a wait of the input time out (after a
// restore whose re-run found the recorded deadline passed before the
// answer came back); the late answer's too, but only if the wait started
// again in an attempt after the one whose time-out sent it (a re-run
// takes what the key's state holds before looking at the deadline:
// agent/answers.go, registerWait). Checked as they happen: a wait never
// times out before its deadline (the earliest clock reading at which the
// input started waiting, plus Wait.Timeout: the deadline is recorded when
// the wait first starts), a wait takes no answer sent for another input
// nor for a wait that timed out unless the relation above allows it, and
// an action asks once per wait ID in an attempt.

// awaitInAgentSeeds turns the waits on in Generate (a variable for the
// tests that compare seeds with and without them). It was off until the
// two weir bugs this branch found first were fixed (2026-12-06,
// docs/reliability.md): back-pressure starved the answers input (the
// agent now deselects its input instead of yielding: runtime.InputSelectable),
// and EndAnswers deadlocked with periodic checkpoints (below). Seed 59's
// hang (attempt 4, 4 of 10 runs) was a two-input task that missed the end
// of an input stashed by an alignment, fixed with them.
var awaitInAgentSeeds = true

// finalCheckpointDeadlock (fixed 2026-12-06): with periodic checkpoints
// (CheckpointConfig.Interval > 0) a source whose input has ended waits
// for the job's final checkpoint before it ends its output, and the final
// checkpoint waits for every source to end, the answers source too; with
// Options.EndAnswers that source ended only once the agent's input had
// ended on every subtask: the job never ended. EndAnswers now follows the
// input's final watermark; the await seeds run with the interval, as the
// others.

// agentAwaitStream is the constant of the stream the waits are drawn from.
const agentAwaitStream = 0xa3a1

// AwaitKind is when the answer to an input's wait comes.
type AwaitKind string

const (
	AwaitEarly  AwaitKind = "early"
	AwaitInTime AwaitKind = "in-time"
	AwaitLate   AwaitKind = "late"
	AwaitNever  AwaitKind = "never"
)

// AgentAwait is one awaited input's script.
type AgentAwait struct {
	Kind AwaitKind
	// ByName: an in-time answer names the wait, not its ID.
	ByName bool
	// OK is the answer's value ("yes" or "no").
	OK bool
	// Stale: an answer for the completed wait (by its ID) follows the
	// one it took. Unknown: an answer for a wait name no input uses,
	// for the input's key, follows the ask.
	Stale, Unknown bool
}

// AwaitSpec is the waits of a seed's agent branch.
type AwaitSpec struct {
	// WaitMS is Wait.Timeout (milliseconds of virtual time, below the
	// action's time-out).
	WaitMS int `json:"wait_ms"`
	// Inputs holds the awaited inputs' scripts, by ID.
	Inputs map[int64]AgentAwait `json:"-"`
	// Ghosts is how many answers for keys the workload does not have the
	// log starts with.
	Ghosts int `json:"ghosts"`
}

func (s *AwaitSpec) wait() time.Duration { return time.Duration(s.WaitMS) * time.Millisecond }

// maxJunkPerKey bounds the answers no wait will take (late, stale,
// unknown) plus the early ones per key, well below the untaken answers a
// key keeps (agent.Options.MaxAnswersPerKey, maxAnswersPerKey here):
// beyond it the operator drops the oldest, by design, which could be an
// early answer still to be taken. After a restore the answers since the
// checkpoint come again on top of them, at once, before the key's inputs
// run again (seed 880117: 17 on one key pushed out an early answer when
// a key kept 16, and the input waited for it until the attempt's minute
// ran out, virtual time standing still): up to every awaited input of a
// hot key between two checkpoints, a third of 650 records at most.
const maxJunkPerKey = 10

// maxAnswersPerKey is the agent's Options.MaxAnswersPerKey in the await
// seeds: room for maxJunkPerKey and the answers of every awaited input of
// a key, so that the operator never drops one (its default, 64, is
// enough for a checkpoint interval of a real workload, not for one key
// taking 200 answers between two checkpoints).
const maxAnswersPerKey = 256

// generateAgentAwait draws s's waits (half the agent seeds without
// processing-time timers).
func generateAgentAwait(s *Spec) {
	a := s.Agent
	if a == nil || s.ProcDelayMS > 0 || !awaitInAgentSeeds {
		return
	}
	rng := rand.New(rand.NewPCG(s.Seed, agentAwaitStream))
	if rng.IntN(2) != 0 {
		return
	}
	as := &AwaitSpec{WaitMS: 5 + rng.IntN(11), Inputs: map[int64]AgentAwait{}, Ghosts: rng.IntN(4)}
	junk := map[string]int{}
	for _, st := range s.Steps {
		if st.Kind != StepRecord || !a.takes(st.ID) {
			continue
		}
		in := a.Inputs[st.ID]
		if in.Fault != AgentOK || rng.IntN(3) != 0 {
			continue
		}
		w := AgentAwait{OK: rng.IntN(2) == 0, ByName: rng.IntN(3) == 0, Stale: rng.IntN(5) == 0, Unknown: rng.IntN(8) == 0}
		switch u := rng.IntN(10); {
		case u < 2:
			w.Kind = AwaitEarly
		case u < 6:
			w.Kind = AwaitInTime
		case u < 8:
			w.Kind = AwaitLate
		default:
			w.Kind = AwaitNever
		}
		n := 0
		if w.Kind == AwaitEarly || w.Kind == AwaitLate {
			n++
		}
		if w.Stale {
			n++
		}
		if w.Unknown {
			n++
		}
		if junk[st.Key]+n > maxJunkPerKey {
			continue
		}
		junk[st.Key] += n
		as.Inputs[st.ID] = w
	}
	if len(as.Inputs) > 0 {
		a.Await = as
	}
}

// awaitShape describes the waits for Shape.
func (a *AgentSpec) awaitShape() string {
	if a.Await == nil {
		return ""
	}
	n := map[AwaitKind]int{}
	for _, w := range a.Await.Inputs {
		n[w.Kind]++
	}
	return fmt.Sprintf(", %d awaits of %dms (%d early, %d in time, %d late, %d never answered)",
		len(a.Await.Inputs), a.Await.WaitMS, n[AwaitEarly], n[AwaitInTime], n[AwaitLate], n[AwaitNever])
}

func waitName(id int64) string { return fmt.Sprintf("approve-%d", id) }

// answerValue is an answer's value: the input it was sent for.
type answerValue struct {
	Input int64 `json:"input"`
	OK    bool  `json:"ok"`
}

func answerSuffix(id int64, ok bool) string {
	if ok {
		return fmt.Sprintf("+yes%d", id)
	}
	return fmt.Sprintf("+no%d", id)
}

const waitedOut = "+waited-out"

// awaitWorld is the external side of the waits, outliving the attempts:
// the answers log and what the world saw of every wait.
type awaitWorld struct {
	spec *AwaitSpec
	keys map[int64]string // each awaited input's key
	mu   struct {
		sync.Mutex
		log     []agent.Answer
		changed chan struct{} // closed (and replaced) on every append or end
		ended   map[int]bool  // attempts whose EndAnswers was called
		// Per awaited input: the earliest clock reading (ms) at a
		// wait's start, the attempts in which it started, the IDs it
		// asked with (and the attempt of the last ask of each), the
		// attempt whose time-out sent its late answer, and what the
		// world has sent.
		firstBegin map[int64]int64
		begins     map[int64][]int
		asks       map[int64]map[string]int
		lastID     map[int64]string
		lateSentIn map[int64]int
		sent       map[string]bool // "in-time <id>" or "in-time <id> <waitID>", "stale <id>", ...
		timedOut   map[int64]bool  // a wait of the input timed out, at or after its deadline
		lateTaken  map[int64]bool  // a wait started again after the late answer was sent
		waitsSeen  int
		answered   int
		timeouts   int
	}
}

func newAwaitWorld(spec *Spec) *awaitWorld {
	as := spec.Agent.Await
	w := &awaitWorld{spec: as, keys: map[int64]string{}}
	for _, st := range spec.Steps {
		if _, ok := as.Inputs[st.ID]; ok && st.Kind == StepRecord {
			w.keys[st.ID] = st.Key
		}
	}
	w.mu.changed = make(chan struct{})
	w.mu.ended = map[int]bool{}
	w.mu.firstBegin = map[int64]int64{}
	w.mu.begins = map[int64][]int{}
	w.mu.asks = map[int64]map[string]int{}
	w.mu.lastID = map[int64]string{}
	w.mu.lateSentIn = map[int64]int{}
	w.mu.sent = map[string]bool{}
	w.mu.timedOut = map[int64]bool{}
	w.mu.lateTaken = map[int64]bool{}
	// The log starts with the early answers, in the order of their
	// inputs, and the answers for keys the workload does not have.
	for _, st := range spec.Steps {
		if in, ok := as.Inputs[st.ID]; ok && st.Kind == StepRecord && in.Kind == AwaitEarly {
			w.mu.log = append(w.mu.log, answerFor(st.Key, st.ID, "", in.OK))
		}
	}
	for g := range as.Ghosts {
		w.mu.log = append(w.mu.log, agent.Answer{Key: fmt.Sprintf("ghost-%d", g), Wait: waitName(int64(g)), Value: json.RawMessage(`{"input":-1}`)})
	}
	return w
}

func answerFor(key string, id int64, waitID string, ok bool) agent.Answer {
	v, _ := json.Marshal(answerValue{Input: id, OK: ok})
	return agent.Answer{Key: key, Wait: waitName(id), ID: waitID, Value: v}
}

// appendLocked adds a to the log and wakes its readers.
func (aw *awaitWorld) appendLocked(a agent.Answer) {
	aw.mu.log = append(aw.mu.log, a)
	close(aw.mu.changed)
	aw.mu.changed = make(chan struct{})
}

// endAnswers is attempt n's Options.EndAnswers: its answers source reads
// to the log's end and ends.
func (aw *awaitWorld) endAnswers(n int) {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	aw.mu.ended[n] = true
	close(aw.mu.changed)
	aw.mu.changed = make(chan struct{})
}

// live reports whether attempt n's process is up.
func (w *agentWorld) live(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.alive && w.mu.attempt == n
}

// awaitViolation records the first violation of S10 seen as it happens,
// about input id.
func (w *agentWorld) awaitViolation(id int64, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.failure == nil {
		w.mu.failure = &Failure{Invariant: InvAgentOnce, Detail: fmt.Sprintf(format, args...)}
		w.mu.failureInput = id
	}
}

func (w *agentWorld) awaitTrace(id int64, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.traceLocked(id, format, args...)
}

// awaitStep is the wait of input e in attempt n's action "decide", between
// its model call (verdict) and its tool call: the verdict with the wait's
// outcome, or the error that ends the action.
func awaitStep(w *agentWorld, n int, c *agent.RunnerContext, e event, verdict string) (string, error) {
	aw := w.await
	if aw == nil {
		return verdict, nil
	}
	in, ok := aw.spec.Inputs[e.ID]
	if !ok {
		return verdict, nil
	}
	now := clock.NowMillis(w.time.clock())
	aw.mu.Lock()
	if f, ok := aw.mu.firstBegin[e.ID]; !ok || now < f {
		aw.mu.firstBegin[e.ID] = now
	}
	aw.mu.begins[e.ID] = append(aw.mu.begins[e.ID], n)
	if a, ok := aw.mu.lateSentIn[e.ID]; ok && n > a {
		aw.mu.lateTaken[e.ID] = true
	}
	aw.mu.waitsSeen++
	aw.mu.Unlock()
	w.awaitTrace(e.ID, "wait starts (%s answer), clock %d", in.Kind, now)
	// A wait no answer will end in time blocks for virtual time
	// (agentTime.block) once its deadline is recorded: when it asks (the
	// durable call after the wait's start), or now if it asked in an
	// earlier attempt (its start recorded then; if not, it asks again,
	// and waits from then on). Its bound is now + the time-out, the
	// latest its deadline can be; the clock moves to the operator's
	// time-out timer, wherever that is armed, so a time-out timer armed
	// early fires early, and the check below sees it.
	release := func() {}
	waitsForTime := in.Kind == AwaitLate || in.Kind == AwaitNever
	aw.mu.Lock()
	askedBefore := len(aw.mu.asks[e.ID]) > 0
	aw.mu.Unlock()
	if waitsForTime && askedBefore && w.live(n) {
		release = w.time.block(aw.spec.wait())
	}
	ans, err := agent.Await(c, agent.Wait{Name: waitName(e.ID), Timeout: aw.spec.wait(),
		Ask: func(ctx context.Context, waitID string) error {
			if err := aw.ask(ctx, w, n, e, in, waitID); err != nil {
				return err
			}
			if waitsForTime {
				release()
				release = w.time.block(aw.spec.wait())
			}
			return nil
		}})
	release()
	now = clock.NowMillis(w.time.clock())
	switch {
	case errors.Is(err, agent.ErrWaitTimedOut):
		aw.mu.Lock()
		first := aw.mu.firstBegin[e.ID]
		aw.mu.timedOut[e.ID] = true
		aw.mu.timeouts++
		id := aw.mu.lastID[e.ID]
		sendLate := in.Kind == AwaitLate && !aw.mu.sent["late "+fmt.Sprint(e.ID)]
		if sendLate {
			aw.mu.sent["late "+fmt.Sprint(e.ID)] = true
			aw.mu.lateSentIn[e.ID] = n
			aw.appendLocked(answerFor(e.Key, e.ID, id, in.OK))
		}
		aw.mu.Unlock()
		w.awaitTrace(e.ID, "wait times out, clock %d (first start %d); late answer sent: %v", now, first, sendLate)
		if now < first+int64(aw.spec.WaitMS) {
			w.awaitViolation(e.ID, "input %d: its wait timed out at clock %d, before its deadline (it first started waiting at %d, time-out %dms)", e.ID, now, first, aw.spec.WaitMS)
		}
		return verdict + waitedOut, nil
	case err != nil:
		w.awaitTrace(e.ID, "wait ends: %v", err)
		return "", err
	}
	var v answerValue
	if json.Unmarshal(ans.Value, &v) != nil {
		v.Input = -1
	}
	w.awaitTrace(e.ID, "wait takes answer %s (id %q), clock %d", ans.Value, ans.ID, now)
	live := w.live(n)
	aw.mu.Lock()
	aw.mu.answered++
	lateTaken := aw.mu.lateTaken[e.ID]
	if in.Stale && !aw.mu.sent["stale "+fmt.Sprint(e.ID)] && aw.mu.lastID[e.ID] != "" && live {
		aw.mu.sent["stale "+fmt.Sprint(e.ID)] = true
		aw.appendLocked(answerFor(e.Key, e.ID, aw.mu.lastID[e.ID], in.OK))
	}
	aw.mu.Unlock()
	switch {
	case v.Input != e.ID:
		w.awaitViolation(e.ID, "input %d: its wait took an answer sent for input %d (%s, wait %q, id %q)", e.ID, v.Input, ans.Value, ans.Wait, ans.ID)
	case in.Kind == AwaitNever:
		w.awaitViolation(e.ID, "input %d: its wait took an answer, and none was sent for it", e.ID)
	case in.Kind == AwaitLate && !lateTaken:
		w.awaitViolation(e.ID, "input %d: its wait took its late answer, sent after a wait of it timed out, without starting again after that", e.ID)
	}
	return verdict + answerSuffix(v.Input, v.OK), nil
}

// ask is Wait.Ask of input e's wait in attempt n: the external system
// takes the request and, for an in-time answer, answers it at once (once
// per wait ID, or once per input by name); a dead process asks nothing.
func (aw *awaitWorld) ask(ctx context.Context, w *agentWorld, n int, e event, in AgentAwait, waitID string) error {
	if !w.live(n) {
		return deadCall(ctx)
	}
	aw.mu.Lock()
	if aw.mu.asks[e.ID] == nil {
		aw.mu.asks[e.ID] = map[string]int{}
	}
	twice := aw.mu.asks[e.ID][waitID] == n
	aw.mu.asks[e.ID][waitID] = n
	aw.mu.lastID[e.ID] = waitID
	var sent []string
	if in.Kind == AwaitInTime {
		tag := "in-time " + fmt.Sprint(e.ID)
		id := ""
		if !in.ByName {
			tag += " " + waitID
			id = waitID
		}
		if !aw.mu.sent[tag] {
			aw.mu.sent[tag] = true
			aw.appendLocked(answerFor(e.Key, e.ID, id, in.OK))
			sent = append(sent, "its answer")
		}
	}
	if in.Unknown && !aw.mu.sent["unknown "+fmt.Sprint(e.ID)] {
		aw.mu.sent["unknown "+fmt.Sprint(e.ID)] = true
		aw.appendLocked(agent.Answer{Key: e.Key, Wait: "unknown-wait", Value: json.RawMessage(`{"input":-1}`)})
		sent = append(sent, "an answer to an unknown wait")
	}
	aw.mu.Unlock()
	w.awaitTrace(e.ID, "ask, wait id %s; sent %v", waitID, sent)
	if twice {
		w.awaitViolation(e.ID, "input %d: asked twice in attempt %d for wait %s", e.ID, n, waitID)
	}
	return nil
}

// allowAwaits replaces, in allowed, the decision line of every awaited
// input by the lines S10 allows for it (see the top of this file).
func (w *agentWorld) allowAwaits(spec *Spec, allowed map[int64][]string) {
	aw := w.await
	if aw == nil {
		return
	}
	aw.mu.Lock()
	defer aw.mu.Unlock()
	for id, in := range aw.spec.Inputs {
		st, key := spec.Agent.Inputs[id], aw.keys[id]
		line := func(suffix string) string {
			v := st.Verdict + suffix
			return decisionLine(key, id, v, st.Prompt+st.Completion, effectOf(id, v, st.Notify))
		}
		plain := line("")
		var alt []string
		switch in.Kind {
		case AwaitEarly, AwaitInTime:
			alt = append(alt, line(answerSuffix(id, in.OK)))
			if aw.mu.timedOut[id] {
				alt = append(alt, line(waitedOut))
			}
		case AwaitLate:
			alt = append(alt, line(waitedOut))
			if aw.mu.lateTaken[id] {
				alt = append(alt, line(answerSuffix(id, in.OK)))
			}
		case AwaitNever:
			alt = append(alt, line(waitedOut))
		}
		if i := slices.Index(allowed[id], plain); i >= 0 {
			allowed[id] = slices.Concat(allowed[id][:i], alt, allowed[id][i+1:])
		}
	}
}

func (aw *awaitWorld) stats() string {
	if aw == nil {
		return ""
	}
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return fmt.Sprintf(", %d waits started, %d answered, %d timed out, %d answers sent", aw.mu.waitsSeen, aw.mu.answered, aw.mu.timeouts, len(aw.mu.log))
}

// clock is the run's clock (nil before setClock).
func (t *agentTime) clock() clock.Clock {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.clk
}

// applyAgent is agent.Apply, or, in the seeds with waits, ApplyWithAnswers
// with the answers source of attempt n.
func applyAgent(w *agentWorld, n int, ks weir.KeyedStream[string, event], a *agent.Agent, opts agent.Options) weir.Stream[decision] {
	aw := w.await
	if aw == nil {
		return agent.Apply[string, event, decision](ks, "agent", a, opts)
	}
	answers := weir.FromSource(ks.Stream.Env(), "answers", answersSource(aw, n), watermark.NoWatermarks[agent.Answer]()).
		UID("answers").Parallelism(1)
	opts.EndAnswers = func() { aw.endAnswers(n) }
	opts.MaxAnswersPerKey = maxAnswersPerKey
	return agent.ApplyWithAnswers[string, event, decision](ks, answers, func(a agent.Answer) string { return a.Key }, "agent", a, opts)
}

// answersSource reads the answers log in one subtask from its
// checkpointed offset, and ends once attempt n's EndAnswers was called
// and it has read the log to its end.
func answersSource(aw *awaitWorld, n int) runtime.Source[agent.Answer] {
	return runtime.SourceFunc[agent.Answer](func(ctx runtime.SourceContext) (runtime.Reader[agent.Answer], error) {
		if ctx.Parallelism != 1 {
			return nil, fmt.Errorf("sim: the answers source runs in one subtask, not %d", ctx.Parallelism)
		}
		r := &answersReader{aw: aw, n: n}
		if ctx.Restored != nil {
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			if len(items) == 1 {
				v, k := binary.Varint(items[0])
				if k <= 0 || v < 0 {
					return nil, fmt.Errorf("sim: corrupt restored answers offset")
				}
				r.next = int(v)
			}
		}
		return r, nil
	})
}

type answersReader struct {
	aw      *awaitWorld
	n       int
	next    int
	started bool
	ready   chan struct{}
}

func (r *answersReader) Poll(out runtime.SourceOutput[agent.Answer]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		out.AddSplit(0)
	}
	r.aw.mu.Lock()
	defer r.aw.mu.Unlock()
	if r.next > len(r.aw.mu.log) {
		return runtime.Done, fmt.Errorf("sim: restored answers offset %d past the log's end %d", r.next, len(r.aw.mu.log))
	}
	for k := 0; k < 64 && r.next < len(r.aw.mu.log); k++ {
		out.Collect(0, r.aw.mu.log[r.next], 0)
		r.next++
	}
	switch {
	case r.next < len(r.aw.mu.log):
		return runtime.More, nil
	case r.aw.mu.ended[r.n]:
		out.FinishSplit(0)
		return runtime.Done, nil
	}
	r.ready = r.aw.mu.changed
	return runtime.Wait, nil
}

func (r *answersReader) Ready() <-chan struct{} { return r.ready }

// SnapshotSplits implements runtime.SplitSnapshotter: the offset of the
// next answer to read.
func (r *answersReader) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, int64(r.next))}, nil
}

func (r *answersReader) Close() error { return nil }
