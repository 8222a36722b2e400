package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// TestWatermarkWaitsForChildEvents: a watermark after an input is held
// until the actions triggered by the events that input's actions sent
// (two levels down) have finished, and leaves after their outputs; the
// parent action finishing is not enough (G5).
func TestWatermarkWaitsForChildEvents(t *testing.T) {
	ctx := testCtx(t)
	g := newGates("grandchild")
	a := &Agent{Actions: []Action{
		NewAction("parent", func(c *RunnerContext, ev Event) error {
			c.Output("parent")
			return c.Send(NewEvent("child", nil, nil))
		}, TypeInput),
		NewAction("child", func(c *RunnerContext, ev Event) error {
			c.Output("child")
			return c.Send(NewEvent("grandchild", nil, nil))
		}, "child"),
		NewAction("grandchild", func(c *RunnerContext, ev Event) error {
			if err := g.wait(c.Context(), "grandchild"); err != nil {
				return err
			}
			c.Output("grandchild")
			return nil
		}, "grandchild"),
	}}
	end := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k"}, 5), wmark[msg](20), pause[msg](end)), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.waitArrived(t, ctx, "grandchild")
	// The parent and the child have finished and their outputs left; the
	// watermark must not have.
	evs := rc.waitFor(t, ctx, "the parent's and child's outputs", func(evs []recEvent[string]) bool { return len(values(evs)) == 2 })
	for _, e := range evs {
		if e.wm && e.ts == 20 {
			t.Fatalf("watermark 20 left while a grandchild action of the input before it runs: %v", evs)
		}
	}
	g.release("grandchild")
	evs = rc.waitFor(t, ctx, "the watermark", func(evs []recEvent[string]) bool {
		return slices.ContainsFunc(evs, func(e recEvent[string]) bool { return e.wm && e.ts == 20 })
	})
	var order []string
	for _, e := range evs {
		order = append(order, e.String())
	}
	if want := []string{"parent@5", "child@5", "grandchild@5", "WM(20)"}; !slices.Equal(order[:4], want) {
		t.Fatalf("order %v, want %v first", order, want)
	}
	close(end)
	if err := job.Wait(); err != nil && err != context.Canceled {
		t.Fatal(err)
	}
}
