package webhook_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// At parallelism 2 the subtask without the endpoint does not hold the
// watermark back: one operator behind both sees subtask 0's (W1, W5).
func TestOtherSubtasksDoNotHoldTheWatermark(t *testing.T) {
	src := webhook.New(webhook.Options[event]{Listen: "127.0.0.1:0", Ack: webhook.AckOnEmit,
		Timestamp: func(e event) (int64, bool) { return int64(e.ID), true }})
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: 10 * time.Millisecond})
	s := weir.FromSource(env, "hook", runtime.Source[event](src), watermark.ForMonotonous[event]())
	one := weir.Map(weir.Rebalance(s), "one", func(e event) event { return e }).Parallelism(1)
	obs := weirtest.Observe(one)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	if r := <-post(t, src.URL(), "", `{"id":5000}`, nil); r.status != http.StatusOK {
		t.Fatalf("answer %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), weirtest.EventuallyTimeout)
	defer cancel()
	if err := obs.WaitWatermark(ctx, 0, 4999); err != nil {
		t.Fatalf("watermark behind both subtasks: %v (%s)", err, obs.Dump())
	}
}
