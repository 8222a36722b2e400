package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// approvals records the requests an approval agent makes (Wait.Ask) and
// its runs.
type approvals struct {
	mu    sync.Mutex
	asked []string // wait IDs, one per request made
	runs  int
}

func (ap *approvals) askedIDs() []string {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return slices.Clone(ap.asked)
}

// approvalAgent outputs "ok:<text>" at once for inputs not starting with
// "refund"; for refunds it asks for an approval (timeout 1h) and outputs
// "approved:<text>:<value>" or "denied:<text>:timeout".
func approvalAgent(ap *approvals) *Agent {
	return &Agent{Actions: []Action{NewAction("review", func(c *RunnerContext, ev Event) error {
		in, err := Input[msg](ev)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(in.Text, "refund") {
			c.Output("ok:" + in.Text)
			return nil
		}
		ap.mu.Lock()
		ap.runs++
		ap.mu.Unlock()
		a, err := Await(c, Wait{Name: "approve", Timeout: time.Hour, Ask: func(_ context.Context, id string) error {
			ap.mu.Lock()
			ap.asked = append(ap.asked, id)
			ap.mu.Unlock()
			return nil
		}})
		switch {
		case errors.Is(err, ErrWaitTimedOut):
			c.Output("denied:" + in.Text + ":timeout")
			return nil
		case err != nil:
			return err
		}
		c.Output("approved:" + in.Text + ":" + string(a.Value))
		return nil
	}, TypeInput)}}
}

func answerKey(a Answer) string { return a.Key }

// approvalJob runs approvalAgent on the input and answers scripts.
func approvalJob(ap *approvals, clk clock.Clock, store StoreFactory, dir, restore string, in []step[msg], answers []step[Answer]) (*weir.Environment, *recorder[string]) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Clock: clk,
		Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
	src := weir.FromSource[msg](env, "src", scripted(in...), watermark.NoWatermarks[msg]()).UID("src")
	ans := weir.FromSource[Answer](env, "answers", scripted(answers...), watermark.NoWatermarks[Answer]()).UID("answers")
	out := ApplyWithAnswers[string, msg, string](weir.KeyBy(src, keyOfMsg), ans, answerKey, "agent", approvalAgent(ap), Options{Store: store}).UID("agent")
	return env, record(out)
}

func waitPending(t *testing.T, ctx context.Context, n int) SubtaskStatus {
	t.Helper()
	return waitStatus(t, ctx, "agent", fmt.Sprintf("%d pending waits", n), func(s SubtaskStatus) bool { return len(s.PendingWaits) == n })
}

// TestAwaitSurvivesRestore crashes the job while an approval is pending:
// the restored job does not ask again, keeps the recorded deadline, and
// the answer that arrives after the restore resumes the action. Meanwhile
// another key goes on, and the watermark after the waiting input is held
// until the answer.
func TestAwaitSurvivesRestore(t *testing.T) {
	ctx := testCtx(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := NewMemoryStore()
	ap := &approvals{}
	in := func(end <-chan struct{}) []step[msg] {
		return []step[msg]{
			rec(msg{Key: "A", Text: "refund-A"}, 1),
			rec(msg{Key: "B", Text: "B1"}, 2),
			wmark[msg](10),
			pause[msg](end),
		}
	}
	env, rc := approvalJob(ap, clock.NewManual(t0), store.Factory(), filepath.Join(t.TempDir(), "cp"), "",
		in(make(chan struct{})), []step[Answer]{pause[Answer](make(chan struct{}))})
	var before SubtaskStatus
	cp := checkpointAndCrash(t, ctx, env, func() {
		before = waitPending(t, ctx, 1)
		rc.waitFor(t, ctx, "B1's output", hasValue("ok:B1"))
	}, func() {})
	evs, _ := rc.snapshot()
	if hasWatermark(10)(evs) {
		t.Fatalf("WM 10 left while A's approval is pending: %s", render(evs))
	}
	pw := before.PendingWaits[0]
	if pw.Key != "A" || pw.Wait != "approve" || pw.Action != "review" || pw.DeadlineMs != t0.Add(time.Hour).UnixMilli() {
		t.Fatalf("pending wait %+v", pw)
	}
	if asked := ap.askedIDs(); len(asked) != 1 || asked[0] != pw.ID {
		t.Fatalf("asked %q before the crash, want [%s]", asked, pw.ID)
	}

	// Restored ten minutes later; the answer comes after the restore.
	openAnswers, end := make(chan struct{}), make(chan struct{})
	close(end)
	env2, rc2 := approvalJob(ap, clock.NewManual(t0.Add(10*time.Minute)), store.Factory(), filepath.Join(t.TempDir(), "cp2"), cp,
		in(end), []step[Answer]{
			pause[Answer](openAnswers),
			rec(Answer{Key: "A", Wait: "approve", ID: pw.ID, Value: json.RawMessage(`{"by":"ann"}`)}, 0),
		})
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := waitPending(t, ctx, 1).PendingWaits[0]
	if after.ID != pw.ID || after.DeadlineMs != pw.DeadlineMs {
		t.Fatalf("the restored wait is %+v, want the recorded one %+v", after, pw)
	}
	if evs, _ := rc2.snapshot(); hasWatermark(10)(evs) || len(values(evs)) > 0 {
		t.Fatalf("restored job emitted before the answer: %s", render(evs))
	}
	close(openAnswers)
	if err := job2.Wait(); err != nil {
		t.Fatal(err)
	}
	evs, _ = rc2.snapshot()
	if got := values(evs); !slices.Equal(got, []string{`approved:refund-A:{"by":"ann"}`}) {
		t.Fatalf("restored outputs %q: %s", got, render(evs))
	}
	if asked := ap.askedIDs(); len(asked) != 1 {
		t.Fatalf("the approval was asked %d times (%q), want once", len(asked), asked)
	}
	if ap.runs != 2 {
		t.Fatalf("the refund action ran %d times, want 2 (before the crash, and again after the restore)", ap.runs)
	}
	if n := env2.Metrics().Sum("agent", "callsReplayed"); n != 2 {
		t.Fatalf("callsReplayed %d, want 2 (the wait's start and the request)", n)
	}
}

// TestAwaitTimesOut: without an answer the wait ends at its deadline on
// the job's clock, the action decides (here: deny), and the watermark held
// until then leaves after the action's output.
func TestAwaitTimesOut(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ap := &approvals{}
	end := make(chan struct{})
	env, rc := approvalJob(ap, clk, nil, "", "",
		[]step[msg]{rec(msg{Key: "A", Text: "refund-A"}, 1), wmark[msg](10), pause[msg](end)},
		[]step[Answer]{pause[Answer](end)})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	waitPending(t, ctx, 1)
	clk.Advance(59 * time.Minute)
	waitStatus(t, ctx, "agent", "a held watermark", func(s SubtaskStatus) bool { return s.HeldWatermarks == 1 })
	if evs, _ := rc.snapshot(); len(evs) > 0 {
		t.Fatalf("emitted before the deadline: %s", render(evs))
	}
	clk.Advance(time.Minute)
	evs := rc.waitFor(t, ctx, "WM 10", hasWatermark(10))
	if got := render(evs); got != "denied:refund-A:timeout@1 WM(10)" {
		t.Fatalf("after the deadline: %s", got)
	}
	if n := env.Metrics().Sum("agent", "waitTimeouts"); n != 1 {
		t.Fatalf("waitTimeouts %d, want 1", n)
	}
	waitPending(t, ctx, 0)
}

// TestAnswerBeforeWaitSurvivesRestore: an answer that arrives before its
// input is checkpointed in the key's state; the job restored from that
// checkpoint hands it to the wait when the input comes, without waiting,
// and uses it once (a second refund of the key waits for its own answer).
func TestAnswerBeforeWaitSurvivesRestore(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ap := &approvals{}
	env, _ := approvalJob(ap, clk, nil, filepath.Join(t.TempDir(), "cp"), "",
		[]step[msg]{pause[msg](make(chan struct{}))},
		[]step[Answer]{rec(Answer{Key: "A", Wait: "approve", Value: json.RawMessage(`"early"`)}, 0), pause[Answer](make(chan struct{}))})
	cp := checkpointAndCrash(t, ctx, env, func() {
		for env.Metrics().Sum("agent", "answersReceived") != 1 {
			select {
			case <-ctx.Done():
				t.Fatal("the answer did not arrive")
			case <-time.After(time.Millisecond):
			}
		}
	}, func() {})

	end := make(chan struct{})
	env2, rc2 := approvalJob(ap, clk, nil, filepath.Join(t.TempDir(), "cp2"), cp,
		[]step[msg]{rec(msg{Key: "A", Text: "refund-1"}, 1), rec(msg{Key: "A", Text: "refund-2"}, 2), pause[msg](end)},
		[]step[Answer]{rec(Answer{Key: "A", Wait: "approve", Value: json.RawMessage(`"early"`)}, 0), pause[Answer](end)})
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job2.Cancel(); job2.Wait() }()
	rc2.waitFor(t, ctx, "refund-1 approved", hasValue(`approved:refund-1:"early"`))
	waitPending(t, ctx, 1)
	clk.Advance(time.Hour)
	evs := rc2.waitFor(t, ctx, "refund-2 timed out", hasValue("denied:refund-2:timeout"))
	if got := values(evs); len(got) != 2 {
		t.Fatalf("outputs %q", got)
	}
	if n := env.Metrics().Sum("agent", "answersReceived") + env2.Metrics().Sum("agent", "answersReceived"); n != 1 {
		t.Fatalf("answersReceived %d over both runs, want 1 (the restored source does not read it again)", n)
	}
}

// TestAwaitNeedsAnswersInput: Await in an agent built with Apply (no
// answers input) fails the action with an error naming ApplyWithAnswers,
// instead of waiting for answers that cannot come.
func TestAwaitNeedsAnswersInput(t *testing.T) {
	ctx := testCtx(t)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "A", Text: "refund-A"}, 1)), watermark.NoWatermarks[msg]())
	record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", approvalAgent(&approvals{}), Options{}))
	err := env.Execute(ctx)
	if err == nil || !strings.Contains(err.Error(), "agent.ApplyWithAnswers") {
		t.Fatalf("job error %v, want one naming agent.ApplyWithAnswers", err)
	}
}

// TestAnswersForEndedWaitsDoNotCrowdOutOthers: answers that name a wait
// which has ended (here twenty copies of one, as the answers source sends
// again what followed a checkpoint after a restore, and the action's re-run
// takes the recorded outcome instead) are dropped when they arrive
// (answersForEndedWaits) instead of filling the key's 16 places, where
// they pushed out an early answer still to be taken: the key's next input
// timed out waiting for an answer that had arrived (found by the
// simulator, seed 880117). The key keeps 16 answers here, not the default.
func TestAnswersForEndedWaitsDoNotCrowdOutOthers(t *testing.T) {
	ctx := testCtx(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	named := &Agent{Actions: []Action{NewAction("review", func(c *RunnerContext, ev Event) error {
		in, err := Input[msg](ev)
		if err != nil {
			return err
		}
		a, err := Await(c, Wait{Name: in.Text, Timeout: time.Hour})
		switch {
		case errors.Is(err, ErrWaitTimedOut):
			c.Output(in.Text + ":timeout")
			return nil
		case err != nil:
			return err
		}
		c.Output(in.Text + ":" + string(a.Value))
		return nil
	}, TypeInput)}}
	job := func(in []step[msg], answers []step[Answer]) (*weir.Environment, *recorder[string]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Clock: clock.NewManual(t0)})
		src := weir.FromSource[msg](env, "src", scripted(in...), watermark.NoWatermarks[msg]()).UID("src")
		ans := weir.FromSource[Answer](env, "answers", scripted(answers...), watermark.NoWatermarks[Answer]()).UID("answers")
		out := ApplyWithAnswers[string, msg, string](weir.KeyBy(src, keyOfMsg), ans, answerKey, "agent", named, Options{MaxAnswersPerKey: 16}).UID("agent")
		return env, record(out)
	}

	// The ID of the first input's wait (the same in every run of the job:
	// it is the wait's idempotency key).
	probe, _ := job([]step[msg]{rec(msg{Key: "A", Text: "first"}, 1), pause[msg](make(chan struct{}))},
		[]step[Answer]{pause[Answer](make(chan struct{}))})
	pj, err := probe.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := waitPending(t, ctx, 1).PendingWaits[0].ID
	pj.Cancel()
	pj.Wait()

	moreAnswers, second, end := make(chan struct{}), make(chan struct{}), make(chan struct{})
	answers := []step[Answer]{
		rec(Answer{Key: "A", Wait: "second", Value: json.RawMessage(`"early"`)}, 0),
		rec(Answer{Key: "A", Wait: "first", ID: id, Value: json.RawMessage(`"yes"`)}, 0),
		pause[Answer](moreAnswers),
	}
	for range 20 {
		answers = append(answers, rec(Answer{Key: "A", Wait: "first", ID: id, Value: json.RawMessage(`"yes"`)}, 0))
	}
	answers = append(answers, pause[Answer](end))
	env, rc := job([]step[msg]{rec(msg{Key: "A", Text: "first"}, 1), pause[msg](second), rec(msg{Key: "A", Text: "second"}, 2), pause[msg](end)}, answers)
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(end); j.Cancel(); j.Wait() }()
	rc.waitFor(t, ctx, "the first input's answer", hasValue(`first:"yes"`))
	close(moreAnswers)
	for env.Metrics().Sum("agent", "answersReceived") != 22 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d answers received, want 22", env.Metrics().Sum("agent", "answersReceived"))
		case <-time.After(time.Millisecond):
		}
	}
	close(second)
	rc.waitFor(t, ctx, "the second input's early answer", hasValue(`second:"early"`))
	if n := env.Metrics().Sum("agent", "answersForEndedWaits"); n != 20 {
		t.Errorf("answersForEndedWaits %d, want 20 (the copies of the first wait's answer)", n)
	}
	if n := env.Metrics().Sum("agent", "answersDropped"); n != 0 {
		t.Errorf("answersDropped %d, want 0", n)
	}
}
