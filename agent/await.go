package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirproject/weir/clock"
)

// Wait describes an external event an action waits for with Await: a
// human's approval, a webhook, a message on a Kafka topic keyed like the
// agent.
type Wait struct {
	// Name names the wait within the action (e.g. "approve-refund"); an
	// Answer without an ID answers the key's wait of that name. Required.
	Name string
	// Timeout bounds the wait, in processing time on the job's clock
	// (weir.Config.Clock), from the moment the wait was first registered:
	// with a store that instant is recorded, so a restore does not start
	// the time-out again. Required (> 0): the waiting input holds the
	// subtask's watermark until it is answered or times out.
	Timeout time.Duration
	// Ask, when set, asks for the answer (sends the approval request, the
	// message to a chat channel): a durable call named "ask:" + Name, made
	// once per wait, also across restores, with a store (its result is
	// recorded before the wait starts). waitID identifies the wait, the
	// same on every attempt: send it with the request, so that the answer
	// can name it (Answer.ID), and use it as the idempotency key of the
	// request. nil means the action has asked already, or nothing needs
	// asking.
	Ask func(ctx context.Context, waitID string) error
}

// Answer is an external event answering a Wait. It reaches the agent
// through the answers stream of ApplyWithAnswers, keyed like the agent's
// input.
type Answer struct {
	// Key is the agent key the answer is for, for the function that keys
	// the answers stream; the operator takes the key from that function.
	Key string `json:"key,omitempty"`
	// Wait is the name of the wait answered (Wait.Name).
	Wait string `json:"wait"`
	// ID, when set, is the waitID given to Wait.Ask: only that wait takes
	// the answer. Empty means the key's first wait named Wait takes it.
	ID string `json:"id,omitempty"`
	// Value is the answer itself (JSON), e.g. {"approved":true,"by":"ann"}.
	Value json.RawMessage `json:"value,omitempty"`
}

// ErrWaitTimedOut is returned by Await when the wait's Timeout passed
// before an answer arrived. The action decides what a time-out means: deny,
// escalate (another wait), or fail (and with Options.FailedInputs, send the
// input there).
var ErrWaitTimedOut = errors.New("agent: the wait timed out before an answer arrived")

// The names of the durable calls Await makes: the wait's start (its
// identity and deadline), the request (Wait.Ask) and the answer.
const (
	waitStartPrefix  = "wait:"
	waitAskPrefix    = "ask:"
	waitAnswerPrefix = "answer:"
)

// waitStart is the recorded start of a wait.
type waitStart struct {
	ID       string `json:"id"`
	Deadline int64  `json:"deadline"` // processing time, ms
}

// waitOutcome is the recorded end of a wait.
type waitOutcome struct {
	Answer   *Answer `json:"answer,omitempty"`
	TimedOut bool    `json:"timedOut,omitempty"`
}

// Await waits, inside an action, for an Answer to the wait w: it returns
// the answer, ErrWaitTimedOut when w.Timeout passed first, or the run's
// context error when the operator closes (the job ends, fails, or is
// cancelled; Options.ActionTimeout, if shorter than w.Timeout, also ends
// the wait).
//
// The wait is part of the action state. With a store (Options.Store) it is
// three durable calls: its start (an ID and a deadline), w.Ask, and its
// outcome. After a restore the action runs again from its start; its
// earlier durable calls return their recorded results, so the request is
// not made again and the deadline is the recorded one; a recorded outcome
// is returned at once. Without a store a restore starts the wait again
// (Ask included).
//
// Answers are kept in the key's state until the input that took one has
// finished, and are checkpointed: an answer that arrives before the wait
// (before the action reaches Await, or while the input waits behind
// another) is taken when the wait starts, and one taken before a
// checkpoint is found again by the action's re-run after a restore from
// it. While it waits the input is in flight: it holds the subtask's
// watermark, at most until w.Timeout passes, and the key's later inputs
// wait behind it; other keys go on (see docs/agents.md, "Human approval").
func Await(c *RunnerContext, w Wait) (Answer, error) {
	if w.Name == "" {
		return Answer{}, fmt.Errorf("agent: action %q: Await needs a Wait.Name", c.action.Name)
	}
	if w.Timeout <= 0 {
		return Answer{}, fmt.Errorf("agent: action %q: Await %q: Wait.Timeout %v: want a positive duration (the wait holds the watermark until it ends)", c.action.Name, w.Name, w.Timeout)
	}
	wh, ok := c.host.(waitHost)
	if !ok || c.kstate == nil {
		return Answer{}, fmt.Errorf("agent: action %q: Await %q: this operator takes no answers; build it with agent.ApplyWithAnswers", c.action.Name, w.Name)
	}
	start, err := Durable(c, waitStartPrefix+w.Name, map[string]int64{"timeoutMs": w.Timeout.Milliseconds()},
		func(_ context.Context, key string) (waitStart, error) {
			return waitStart{ID: key, Deadline: clock.NowMillis(wh.clock()) + w.Timeout.Milliseconds()}, nil
		})
	if err != nil {
		return Answer{}, err
	}
	if w.Ask != nil {
		_, err := Durable(c, waitAskPrefix+w.Name, map[string]string{"id": start.ID},
			func(ctx context.Context, _ string) (struct{}, error) { return struct{}{}, w.Ask(ctx, start.ID) })
		if err != nil {
			return Answer{}, err
		}
	}
	out, err := Durable(c, waitAnswerPrefix+w.Name, map[string]string{"id": start.ID},
		func(ctx context.Context, _ string) (waitOutcome, error) {
			return wh.await(ctx, c, &waiter{id: start.ID, name: w.Name, action: c.action.Name, deadline: start.Deadline})
		})
	if err != nil {
		return Answer{}, err
	}
	c.waits = append(c.waits, start.ID)
	if out.TimedOut || out.Answer == nil {
		return Answer{}, fmt.Errorf("%w (wait %q of action %q, id %s)", ErrWaitTimedOut, w.Name, c.action.Name, start.ID)
	}
	return *out.Answer, nil
}

// waitHost is what Await needs of the operator.
type waitHost interface {
	clock() clock.Clock
	// await registers w for the run of c and blocks until it is answered,
	// times out, or ctx ends.
	await(ctx context.Context, c *RunnerContext, w *waiter) (waitOutcome, error)
}

// waiter is a registered wait: owned by the subtask goroutine once
// registered; ch (buffered, one value) is how the outcome reaches the
// action's goroutine.
type waiter struct {
	id, name, action string
	deadline         int64
	since            int64 // when registered (processing time, ms)
	ch               chan waitOutcome
}

// storedAnswer is an answer in a key's inbox: usedBy is the ID of the wait
// that took it (empty: none yet). A taken answer stays until its input has
// finished, so that a re-run of the action after a restore takes it again.
type storedAnswer struct {
	Answer Answer `json:"answer"`
	UsedBy string `json:"usedBy,omitempty"`
}

// maxEndedWaits bounds the IDs of ended waits a key keeps
// (keyState.ended): an answer naming an older one takes a place in the
// inbox again, until Options.MaxAnswersPerKey pushes it out.
const maxEndedWaits = 16

// takeAnswer finds the answer for wait w in inbox: the one it took before
// (a re-run after a restore), else the first untaken one naming its ID,
// else the first untaken one without an ID naming its name. It marks the
// answer taken.
func takeAnswer(inbox []storedAnswer, w *waiter) (*Answer, bool) {
	for i := range inbox {
		if inbox[i].UsedBy == w.id {
			return &inbox[i].Answer, true
		}
	}
	for i := range inbox {
		a := &inbox[i]
		if a.UsedBy == "" && a.Answer.ID == w.id {
			a.UsedBy = w.id
			return &a.Answer, true
		}
	}
	for i := range inbox {
		a := &inbox[i]
		if a.UsedBy == "" && a.Answer.ID == "" && a.Answer.Wait == w.name {
			a.UsedBy = w.id
			return &a.Answer, true
		}
	}
	return nil, false
}
