package wal_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

type collector struct {
	mu  sync.Mutex
	out []string
}

// TestWALSurvivesRestart: with the embedded WAL as the store, a restored
// job replays the durable call an action made before the crash (the log is
// reopened from disk), and completes.
func TestWALSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	walDir := filepath.Join(t.TempDir(), "wal")
	var charges atomic.Int64
	hang := make(chan struct{})
	arrived := make(chan struct{}, 1)
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("pay", func(c *agent.RunnerContext, ev agent.Event) error {
		in, _ := agent.Input[string](ev)
		r, err := agent.Durable(c, "charge", in, func(context.Context, string) (string, error) {
			return fmt.Sprint("receipt-", charges.Add(1)), nil
		})
		if err != nil {
			return err
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-hang:
		case <-c.Context().Done():
			return c.Context().Err()
		}
		c.Output(in + " " + r)
		return nil
	}, agent.TypeInput)}}
	build := func(restore string, release <-chan struct{}) (*weir.Environment, *collector) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), RestoreFrom: restore}})
		src := weir.FromSource[string](env, "src", phasedSource{recs: []string{"order-1"}, end: release}, watermark.NoWatermarks[string]()).UID("src")
		out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
			agent.Options{Store: wal.Factory(walDir, wal.Options{})}).UID("agent")
		c := &collector{}
		weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
			return weir.SinkFunc[string](func(r weir.Record[string]) error {
				c.mu.Lock()
				c.out = append(c.out, r.Value)
				c.mu.Unlock()
				return nil
			}), nil
		})
		return env, c
	}
	env, _ := build("", make(chan struct{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	_, cp, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	close(hang)
	done := make(chan struct{})
	close(done)
	env2, c := build(cp, done)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if charges.Load() != 1 || len(c.out) != 1 || c.out[0] != "order-1 receipt-1" {
		t.Fatalf("%d charges, outputs %q", charges.Load(), c.out)
	}
	if n := env2.Metrics().Sum("agent", "callsReplayed"); n != 1 {
		t.Fatalf("callsReplayed = %d", n)
	}
}

// TestWALReplaysCompletedAction: an action that completed after the
// checkpoint is replayed from the log after the restore (its output and
// event), not run again; many inputs pass through the store meanwhile.
func TestWALReplaysCompletedAction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	walDir := filepath.Join(t.TempDir(), "wal")
	var firstRuns atomic.Int64
	firstGate, secondGate := make(chan struct{}), make(chan struct{})
	atFirst, atSecond := make(chan struct{}, 1), make(chan struct{}, 1)
	wait := func(c *agent.RunnerContext, at chan struct{}, gate *chan struct{}) error {
		select {
		case at <- struct{}{}:
		default:
		}
		select {
		case <-*gate:
			return nil
		case <-c.Context().Done():
			return c.Context().Err()
		}
	}
	a := &agent.Agent{Actions: []agent.Action{
		agent.NewAction("first", func(c *agent.RunnerContext, ev agent.Event) error {
			in, _ := agent.Input[string](ev)
			if in == "slow" {
				if err := wait(c, atFirst, &firstGate); err != nil {
					return err
				}
			}
			firstRuns.Add(1)
			c.Output("first " + in)
			return c.Send(agent.NewEvent("next", in, map[string]any{"n": len(in)}))
		}, agent.TypeInput),
		agent.NewAction("second", func(c *agent.RunnerContext, ev agent.Event) error {
			in, _ := agent.ValueAs[string](ev)
			n, _ := agent.Attr[int](ev, "n")
			if in == "slow" {
				if err := wait(c, atSecond, &secondGate); err != nil {
					return err
				}
			}
			c.Output(fmt.Sprintf("second %s %d", in, n))
			return nil
		}, "next"),
	}}
	recs := []string{"slow"}
	for i := range 50 {
		recs = append(recs, fmt.Sprint("fast-", i))
	}
	build := func(restore string, release <-chan struct{}) (*weir.Environment, *collector) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), RestoreFrom: restore}})
		src := weir.FromSource[string](env, "src", phasedSource{recs: recs, end: release}, watermark.NoWatermarks[string]()).UID("src")
		out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
			agent.Options{Store: wal.Factory(walDir, wal.Options{})}).UID("agent")
		c := &collector{}
		weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
			return weir.SinkFunc[string](func(r weir.Record[string]) error {
				c.mu.Lock()
				c.out = append(c.out, r.Value)
				c.mu.Unlock()
				return nil
			}), nil
		})
		return env, c
	}
	env, _ := build("", make(chan struct{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-atFirst
	_, cp, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(firstGate)
	<-atSecond
	job.Cancel()
	job.Wait()
	runsBefore := firstRuns.Load()

	close(secondGate)
	done := make(chan struct{})
	close(done)
	env2, c := build(cp, done)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if firstRuns.Load() != runsBefore {
		t.Fatalf("first ran %d more times after the restore", firstRuns.Load()-runsBefore)
	}
	got := map[string]bool{}
	for _, o := range c.out {
		got[o] = true
	}
	if !got["first slow"] || !got["second slow 4"] {
		t.Fatalf("outputs after the restore: %q", c.out)
	}
	if n := env2.Metrics().Sum("agent", "actionsReplayed"); n < 1 {
		t.Fatalf("actionsReplayed = %d", n)
	}
}
