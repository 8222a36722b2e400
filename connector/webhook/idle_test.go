package webhook_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
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

// After a failure the restarted job listens again on the same address: the
// client whose request failed (503) sends it again and gets its 200 (W1,
// W6).
func TestRestartListensAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := webhook.New(webhook.Options[event]{Listen: addr})
	var failed atomic.Bool
	env := weir.NewEnvironment(weir.Config{Parallelism: 1,
		Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir(), Interval: 10 * time.Millisecond},
		Restart:    runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Delay: time.Millisecond}})
	s := weir.FromSource(env, "hook", runtime.Source[event](src), watermark.ForMonotonous[event]())
	s = weir.Map(s, "boom-once", func(e event) event {
		if e.Boom && failed.CompareAndSwap(false, true) {
			panic(errBoom)
		}
		return e
	})
	obs := weirtest.Observe(s)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	url := "http://" + addr + "/ingest"
	if r := <-post(t, url, "", `{"id":1,"boom":true}`, nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("answer %+v, want 503 from the failed attempt", r)
	}
	// The client sends it again until the restarted job takes it.
	weirtest.Eventually(t, "a 200 from the restarted job", func() bool {
		return (<-post(t, url, "", `{"id":1,"boom":true}`, nil)).status == http.StatusOK
	})
	if !failed.Load() {
		t.Fatal("no failure")
	}
	found := false
	for _, v := range obs.Values() {
		found = found || v.ID == 1
	}
	if !found {
		t.Errorf("record 1 not downstream after the restart: %v", obs.Values())
	}
}
