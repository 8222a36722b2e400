package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// What a dashboard reads of a running job: its topology, its checkpoint
// history, the notes of its dead letters, the watermark gauge of every
// operator subtask and the back-pressure of its tasks.
func TestJobObservability(t *testing.T) {
	vals := make([]int64, 2000)
	for i := range vals {
		vals[i] = int64(i + 1)
	}
	vals[7] = -1 // no timestamp: a dead letter
	release := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, BufferSize: 4, BuffersPerChannel: 1,
		Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	src := weir.FromSlice(env, "numbers", vals, watermark.ForMonotonous[int64]().
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, v > 0 })).Parallelism(1)
	var held atomic.Bool
	slow := weir.Map(src, "slow", func(v int64) int64 {
		if held.CompareAndSwap(false, true) {
			<-release
		}
		return v
	})
	doubled := weir.Map(slow, "double", func(v int64) int64 { return 2 * v })
	out := weir.Collect(doubled)
	dead := weir.Collect(weir.DeadLetters(src))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := job.Metrics()
	// The slow map holds its first record: the source fills the one
	// buffer of its channel and blocks.
	weirtest.Eventually(t, "the source is back-pressured", func() bool { return gauge(m, "numbers", runtime.MetricBackPressured) == 1 })
	// A checkpoint asked for now waits behind the held record: it shows in
	// progress, then completes (or fails, if a task ends first).
	cpDone := make(chan error, 1)
	go func() {
		_, _, err := job.TriggerCheckpoint(context.Background())
		cpDone <- err
	}()
	weirtest.Eventually(t, "checkpoint 1 in progress", func() bool {
		cps := job.Checkpoints()
		return len(cps) == 1 && cps[0].Status == runtime.CheckpointInProgress
	})
	close(release)
	cpErr := <-cpDone
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(out.Values()) != len(vals)-1 {
		t.Errorf("%d records out, want %d", len(out.Values()), len(vals)-1)
	}
	if got := m.Sum("numbers", runtime.MetricBackPressuredMicros); got <= 0 {
		t.Errorf("backPressuredMicros of the source = %d, want > 0", got)
	}
	if got := gauge(m, "numbers", runtime.MetricBackPressured); got != 0 {
		t.Errorf("backPressured after the end = %d, want 0", got)
	}
	if got := gauge(m, "double", runtime.MetricWatermark); got != watermark.Max {
		t.Errorf("watermark gauge of double = %d, want the end of input (watermark.Max)", got)
	}

	top := job.Topology()
	byName := map[string]runtime.OperatorInfo{}
	for _, op := range top.Operators {
		byName[op.Name] = op
	}
	if !byName["numbers"].Source || byName["numbers"].Task != "numbers" {
		t.Errorf("numbers: %+v", byName["numbers"])
	}
	if in := byName["slow"].Inputs; len(in) != 1 || in[0].From != "numbers" || in[0].Partitioning != "rebalance" || in[0].Chained {
		t.Errorf("slow's inputs: %+v, want one rebalance channel from numbers", in)
	}
	if d := byName["double"]; d.Task != "slow" || len(d.Inputs) != 1 || !d.Inputs[0].Chained {
		t.Errorf("double: %+v, want chained behind slow", d)
	}
	var sides int
	for _, op := range top.Operators {
		for _, e := range op.Inputs {
			if e.SideOutput && e.From == "numbers" {
				sides++
			}
		}
	}
	if sides != 1 {
		t.Errorf("side-output edges from numbers: %d, want 1 (the dead letters)", sides)
	}

	cps := job.Checkpoints()
	if len(cps) != 1 || cps[0].ID != 1 || cps[0].Status == runtime.CheckpointInProgress || cps[0].Tasks == 0 {
		t.Errorf("checkpoints: %+v, want checkpoint 1, finished", cps)
	}
	if cps[0].Status == runtime.CheckpointCompleted && (cps[0].Bytes <= 0 || cps[0].Acknowledged != cps[0].Tasks) {
		t.Errorf("completed checkpoint: %+v", cps[0])
	}
	if (cps[0].Status == runtime.CheckpointCompleted) != (cpErr == nil) {
		t.Errorf("checkpoint %+v, TriggerCheckpoint returned %v", cps[0], cpErr)
	}
	if cps[0].Status == runtime.CheckpointFailed && cps[0].Cause == "" {
		t.Errorf("failed checkpoint without a cause: %+v", cps[0])
	}

	notes := m.Notes()
	if len(dead.Values()) != 1 || len(notes) != 1 || notes[0].Kind != runtime.NoteKindDeadLetter ||
		notes[0].Operator != "numbers" || !strings.Contains(notes[0].Text, "no usable timestamp") || notes[0].Seq != 1 {
		t.Errorf("dead letters %d, notes %+v: want one note of the dead letter", len(dead.Values()), notes)
	}
}

func gauge(m *runtime.Metrics, op, name string) int64 {
	for _, x := range m.Snapshot() {
		if x.Operator == op && x.Name == name && x.Gauge {
			return x.Value
		}
	}
	return -1
}

// The job keeps its newest 64 notes, oldest first, numbered in order.
func TestNotesKeepTheNewest(t *testing.T) {
	var m runtime.Metrics
	for i := 1; i <= 100; i++ {
		m.Note("op", 0, "k", int64(i), "x")
	}
	n := m.Notes()
	if len(n) != 64 || n[0].Seq != 37 || n[63].Seq != 100 || n[0].AtMs != 37 {
		t.Fatalf("notes: %d, first %+v, last %+v", len(n), n[0], n[len(n)-1])
	}
}
