package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// ApplyWithAnswers is Apply with a second input: answers, the external
// events its actions wait for with Await (approvals read from a Kafka
// topic, webhooks), keyed by answerKey like the agent's input (the same
// hash, so an answer reaches the subtask that owns its key).
//
// Why a second input of the operator, not a consumer of its own: the
// answers then travel with the job's checkpoints like any record. The
// source's offsets and the operator's state (the answers a key has
// received and not used up) are in the same checkpoint, so after a
// restore no answer is lost (an answer read before the checkpoint is in
// the key's state; one read after it is read again) and none is applied
// twice (a wait whose outcome was recorded replays it from the store).
// Keying and rescaling are those of any keyed input.
//
// Answers take no part in event time: their watermarks are dropped and
// their input is idle for the combined watermark, so that a quiet answers
// topic does not hold the agent's watermark (only waiting inputs do, until
// they are answered or time out). Their timestamps are ignored.
func ApplyWithAnswers[K comparable, IN, OUT any](ks weir.KeyedStream[K, IN], answers weir.Stream[Answer], answerKey func(Answer) K,
	name string, a *Agent, opts Options) weir.Stream[OUT] {
	def, err := compile(a)
	if err != nil {
		panic(fmt.Sprintf("agent.ApplyWithAnswers(%q): %v", name, err))
	}
	optsErr := opts.Validate()
	if optsErr == nil && opts.blocking {
		optsErr = errors.New("agent: the blocking variant with ApplyWithAnswers: an action waiting for an answer would block the subtask that delivers it")
	}
	var end *answersEnd
	if opts.EndAnswers != nil {
		end = &answersEnd{fn: opts.EndAnswers}
	}
	opts = opts.withDefaults()
	key, hash := ks.Key(), ks.Hasher()
	untimed := weir.Transform(answers, name+"-answers", func() runtime.OneInputOperator[Answer, Answer] { return &untimedOp{} })
	kans := weir.KeyByHash(untimed, answerKey, hash)
	return weir.TransformTwo(ks.Stream, kans.Stream, name, func() runtime.TwoInputOperator[IN, Answer, OUT] {
		op := newOperator[K, IN, OUT](def, key, hash, opts)
		op.optsErr = optsErr
		op.takesAnswers = true
		op.answersEnd = end
		return &twoInputOperator[K, IN, OUT]{operator: op, answerKey: answerKey}
	}, runtime.KeyGroups(ks.KeyGroupFunc), runtime.KeyGroups(kans.KeyGroupFunc))
}

// untimedOp forwards answers and takes them out of event time: it drops
// their watermarks and reports its output idle (an idle input does not
// count in the downstream operator's combined watermark; records do not
// make it active, only a watermark would).
type untimedOp struct {
	runtime.Base[Answer]
	idle bool
}

func (o *untimedOp) markIdle() {
	if !o.idle {
		o.idle = true
		o.Out.EmitIdle(true)
	}
}

// Open reports the output idle at once: a subtask that never receives an
// answer (a quiet topic, a split-less reader) must not hold the agent's
// combined watermark either.
func (o *untimedOp) Open(ctx *runtime.Context, out runtime.Output[Answer]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.markIdle()
	return nil
}

func (o *untimedOp) ProcessRecord(r runtime.Record[Answer]) error {
	o.markIdle()
	o.Out.Collect(r)
	return nil
}
func (o *untimedOp) ProcessWatermark(int64) error { o.markIdle(); return nil }
func (o *untimedOp) ProcessIdle(bool) error       { o.markIdle(); return nil }
func (o *untimedOp) EndInput() error              { return nil }

// twoInputOperator is the agent operator with its answers input.
type twoInputOperator[K comparable, IN, OUT any] struct {
	*operator[K, IN, OUT]
	answerKey func(Answer) K
	ended     [2]bool
}

// ProcessRecord1 takes the record without waiting for room: while
// MaxBufferedInputs inputs wait the subtask reads no record of input 1
// (SelectsInput) and goes on reading answers, which may be what the
// running actions wait for. Waiting in Context.Yield here, as the
// one-input operator does, would stop the answers too: every slot held by
// an action awaiting an answer that has arrived, each wait would run out
// to its time-out.
func (t *twoInputOperator[K, IN, OUT]) ProcessRecord1(r runtime.Record[IN]) error {
	return t.accept(r)
}

// SelectsInput implements runtime.InputSelectable: input 1 is read while
// fewer than MaxBufferedInputs inputs wait (back-pressure, G3), the
// answers always.
func (t *twoInputOperator[K, IN, OUT]) SelectsInput(input int) bool {
	return input == 2 || t.waiting < t.opts.MaxBufferedInputs
}

func (t *twoInputOperator[K, IN, OUT]) ProcessRecord2(r runtime.Record[Answer]) error {
	t.processAnswer(t.answerKey(r.Value), r.Value)
	return t.err
}

// ProcessWatermark notes the end of event time on the first input before
// queueing the watermark. The answers input is untimed (idle, its
// watermarks dropped), so the combined watermark is the first input's and
// reaches watermark.Max only when that input has: a bounded source sends
// Max once it has read everything, and with periodic checkpoints it ends
// its output (EndInput) only after the final checkpoint, which waits for
// every source, the answers source too. Options.EndAnswers must therefore
// not wait for EndInput(1): it would wait for the final checkpoint, which
// waits for the answers source, which waits for EndAnswers.
func (t *twoInputOperator[K, IN, OUT]) ProcessWatermark(ts int64) error {
	if ts == watermark.Max {
		t.inputEnded = true
	}
	err := t.operator.ProcessWatermark(ts)
	t.maybeEndAnswers()
	return err
}

// EndInput finishes the inputs in progress once both inputs have ended:
// while answers may still come, an input waiting for one must not be
// waited for.
func (t *twoInputOperator[K, IN, OUT]) EndInput(input int) error {
	t.ended[input-1] = true
	if input == 1 {
		t.inputEnded = true
		t.maybeEndAnswers()
	}
	if t.ended[0] && t.ended[1] {
		return t.operator.EndInput()
	}
	return nil
}

// answersEnd calls Options.EndAnswers once every subtask has reported
// that its input ended and its inputs finished (maybeEndAnswers). Shared by
// the subtasks of one ApplyWithAnswers, across restarts: a subtask of a
// later attempt reports again, which changes nothing once fn was called.
type answersEnd struct {
	fn   func()
	once sync.Once
	mu   struct {
		sync.Mutex
		done map[int]bool // subtasks that have reported
	}
}

// subtaskDone records that subtask (of parallelism) has finished; the last
// one calls fn.
func (e *answersEnd) subtaskDone(subtask, parallelism int) {
	e.mu.Lock()
	if e.mu.done == nil {
		e.mu.done = map[int]bool{}
	}
	e.mu.done[subtask] = true
	all := len(e.mu.done) >= parallelism
	e.mu.Unlock()
	if all {
		e.once.Do(e.fn)
	}
}

// maybeEndAnswers reports this subtask to answersEnd once its first input
// has ended (or reached the end of event time) and nothing is in flight or
// held (subtask goroutine; called by EndInput(1), by ProcessWatermark and
// whenever held marks are released, which is whenever an input finishes).
func (o *operator[K, IN, OUT]) maybeEndAnswers() {
	if o.answersEnd == nil || !o.inputEnded || o.endReported || o.unfinished > 0 || o.q.Held() > 0 || o.err != nil {
		return
	}
	o.endReported = true
	o.answersEnd.subtaskDone(o.Ctx.Subtask, o.Ctx.Parallelism)
}

// processAnswer puts an answer into its key's inbox (keyed state,
// checkpointed) and hands it to the key's registered wait if it is the
// one it waits for.
func (o *operator[K, IN, OUT]) processAnswer(k K, a Answer) {
	ks, _ := o.lookup(k, keygroup.Assign(o.hash(k), o.maxP), true)
	defer o.settle(ks)
	o.cAnswers.Inc()
	if a.ID != "" && slices.Contains(ks.ended, a.ID) {
		o.cAnswersEnded.Inc()
		return
	}
	ks.inbox = append(ks.inbox, storedAnswer{Answer: a})
	if w := ks.waiter; w != nil {
		if got, ok := takeAnswer(ks.inbox, w); ok {
			o.endWait(ks, w, waitOutcome{Answer: copyAnswer(got)})
		}
	}
	if len(ks.inbox) > o.opts.MaxAnswersPerKey {
		if i := slices.IndexFunc(ks.inbox, func(s storedAnswer) bool { return s.UsedBy == "" }); i >= 0 {
			o.logger.Warn("agent: too many answers no wait has taken for this key; dropping the oldest",
				"key", k, "wait", ks.inbox[i].Answer.Wait, "id", ks.inbox[i].Answer.ID, "limit", o.opts.MaxAnswersPerKey)
			ks.inbox = slices.Delete(ks.inbox, i, i+1)
			o.cAnswersDropped.Inc()
		}
	}
}

func copyAnswer(a *Answer) *Answer {
	c := *a
	c.Value = slices.Clone(a.Value)
	return &c
}

// clock implements waitHost.
func (o *operator[K, IN, OUT]) clock() clock.Clock { return o.Ctx.Clock }

// await implements waitHost, on the action's goroutine: it registers w on
// the subtask goroutine (through the mailbox) and waits for its outcome.
func (o *operator[K, IN, OUT]) await(ctx context.Context, c *RunnerContext, w *waiter) (waitOutcome, error) {
	if !o.takesAnswers {
		return waitOutcome{}, fmt.Errorf("agent: action %q: Await %q: this operator takes no answers; build it with agent.ApplyWithAnswers", w.action, w.name)
	}
	ks := c.kstate.(*keyState[K, IN])
	w.ch = make(chan waitOutcome, 1)
	o.mb.Post(func() { o.registerWait(ks, w) })
	select {
	case out := <-w.ch:
		return out, nil
	case <-ctx.Done():
		o.mb.Post(func() {
			if ks.waiter == w {
				o.endWait(ks, w, waitOutcome{})
			}
		})
		return waitOutcome{}, ctx.Err()
	}
}

// registerWait (subtask goroutine) answers w at once from the key's inbox
// (an answer that came first, or the one a run before a restore took), or
// times it out if its recorded deadline has passed, or else makes it the
// key's waiter with a processing-time timer at its deadline.
func (o *operator[K, IN, OUT]) registerWait(ks *keyState[K, IN], w *waiter) {
	if o.closed {
		return // the action's context is cancelled
	}
	now := clock.NowMillis(o.Ctx.Clock)
	w.since = now
	if got, ok := takeAnswer(ks.inbox, w); ok {
		w.ch <- waitOutcome{Answer: copyAnswer(got)}
		return
	}
	if now >= w.deadline {
		o.cWaitTimeouts.Inc()
		w.ch <- waitOutcome{TimedOut: true}
		return
	}
	ks.waiter = w
	o.waits[w] = ks.boxed
	o.gWaits.Set(int64(len(o.waits)))
	at := w.deadline
	if mutant.On(mutant.AgentWaitTimesOutEarly) {
		at-- // the deadline taken as the wait's last millisecond
	}
	o.Ctx.RegisterProcessingTimer(at, func(int64) {
		if ks.waiter == w && !o.closed {
			o.cWaitTimeouts.Inc()
			o.endWait(ks, w, waitOutcome{TimedOut: true})
		}
	})
}

// endWait unregisters the key's waiter w and hands it out.
func (o *operator[K, IN, OUT]) endWait(ks *keyState[K, IN], w *waiter, out waitOutcome) {
	ks.waiter = nil
	delete(o.waits, w)
	o.gWaits.Set(int64(len(o.waits)))
	w.ch <- out
}

// endWaits records that the waits ids of a run of the key have ended
// (keyState.ended), and drops the answers naming them that no wait took:
// they came again, or too late.
func (o *operator[K, IN, OUT]) endWaits(ks *keyState[K, IN], ids []string) {
	for _, id := range ids {
		if slices.Contains(ks.ended, id) {
			continue
		}
		if len(ks.ended) >= maxEndedWaits {
			ks.ended = slices.Delete(ks.ended, 0, len(ks.ended)-maxEndedWaits+1)
		}
		ks.ended = append(ks.ended, id)
	}
	n := len(ks.inbox)
	ks.inbox = slices.DeleteFunc(ks.inbox, func(s storedAnswer) bool {
		return s.UsedBy == "" && s.Answer.ID != "" && slices.Contains(ids, s.Answer.ID)
	})
	if len(ks.inbox) == 0 {
		ks.inbox = nil
	}
	o.cAnswersEnded.Add(int64(n - len(ks.inbox)))
}

// dropUsedAnswers removes the answers the key's finished input took.
func (ks *keyState[K, IN]) dropUsedAnswers() {
	if len(ks.inbox) > 0 {
		ks.inbox = slices.DeleteFunc(ks.inbox, func(s storedAnswer) bool { return s.UsedBy != "" })
		if len(ks.inbox) == 0 {
			ks.inbox = nil
		}
	}
}

// PendingWait is a wait registered by Await and not answered yet.
type PendingWait struct {
	Key    string `json:"key"`
	Action string `json:"action"`
	Wait   string `json:"wait"`
	ID     string `json:"id"`
	// AgeMs is how long it has waited (since this subtask registered it;
	// after a restore, since the re-run registered it again) and
	// DeadlineMs when it times out (processing time, Unix ms).
	AgeMs      int64 `json:"ageMs"`
	DeadlineMs int64 `json:"deadlineMs"`
}

// pendingWaits lists the registered waits, oldest deadline first (subtask
// goroutine).
func (o *operator[K, IN, OUT]) pendingWaits(now int64) []PendingWait {
	if len(o.waits) == 0 {
		return nil
	}
	out := make([]PendingWait, 0, len(o.waits))
	for w, k := range o.waits {
		out = append(out, PendingWait{Key: fmt.Sprint(k), Action: w.action, Wait: w.name, ID: w.id,
			AgeMs: now - w.since, DeadlineMs: w.deadline})
	}
	slices.SortFunc(out, func(a, b PendingWait) int {
		if c := cmp.Compare(a.DeadlineMs, b.DeadlineMs); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}
