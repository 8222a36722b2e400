package agent

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

var _ runtime.InputSelectable = (*twoInputOperator[string, msg, string])(nil)

// TestAwaitAnsweredUnderBackPressure: with one slot and one buffered
// input, the action holding the slot awaits an answer while more inputs
// are queued upstream. The answers, released only then, must still be
// read: the operator stops reading its inputs (it deselects input 1), not
// its answers. Before, ProcessRecord waited in Context.Yield for room, the
// two-input task read no answer meanwhile, and every wait ran out to its
// time-out. The job's clock is manual and never moves: a wait can only
// end with its answer.
func TestAwaitAnsweredUnderBackPressure(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ap := &approvals{}
	keys := []string{"A", "B", "C", "D", "E"}
	end, open := make(chan struct{}), make(chan struct{})
	defer close(end)
	var in []step[msg]
	var answers = []step[Answer]{pause[Answer](open)}
	for i, k := range keys {
		in = append(in, rec(msg{Key: k, Text: "refund-" + k}, int64(i+1)))
		answers = append(answers, rec(Answer{Key: k, Wait: "approve", Value: json.RawMessage(`"` + k + `"`)}, 0))
	}
	in = append(in, wmark[msg](10), pause[msg](end))
	answers = append(answers, pause[Answer](end))

	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Clock: clk})
	src := weir.FromSource[msg](env, "src", scripted(in...), watermark.NoWatermarks[msg]())
	ans := weir.FromSource[Answer](env, "answers", scripted(answers...), watermark.NoWatermarks[Answer]())
	out := ApplyWithAnswers[string, msg, string](weir.KeyBy(src, keyOfMsg), ans, answerKey, "agent", approvalAgent(ap),
		Options{MaxConcurrentKeys: 1, MaxBufferedInputs: 1})
	rc := record(out)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()

	// A holds the slot, waiting; B is buffered; the rest wait upstream.
	waitStatus(t, ctx, "agent", "A waiting, B buffered", func(s SubtaskStatus) bool {
		return s.RunningKeys == 1 && s.WaitingInputs == 1 && len(s.PendingWaits) == 1
	})
	close(open)
	evs := rc.waitFor(t, ctx, "WM 10", hasWatermark(10))
	var want []string
	for _, k := range keys {
		want = append(want, `approved:refund-`+k+`:"`+k+`"`)
	}
	if got := values(evs); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q: %s", got, want, render(evs))
	}
	if !evs[len(evs)-1].wm {
		t.Fatalf("WM 10 left before an output: %s", render(evs))
	}
	if n := env.Metrics().Sum("agent", "waitTimeouts"); n != 0 {
		t.Fatalf("waitTimeouts %d, want 0", n)
	}
}
