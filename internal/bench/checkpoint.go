package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// CheckpointResult is one checkpoint measured against keyed-state size.
type CheckpointResult struct {
	Name          string  `json:"name"`
	Backend       string  `json:"backend"`
	StateBytes    int64   `json:"stateBytes"`
	Keys          int64   `json:"keys"`
	CheckpointMs  float64 `json:"checkpointMs"`
	SyncPauseMs   float64 `json:"syncPauseMs"`
	SizeBytes     int64   `json:"sizeBytes"`
	RestoreSameMs float64 `json:"restoreSameParallelismMs"`
	RestoreMoreMs float64 `json:"restoreOtherParallelismMs"`
	// The second checkpoint, taken after about 1% of the keys changed:
	// its duration, pause, and the bytes it added to the checkpoint
	// directory (all of them for the memory backend; the new SSTs and the
	// small private files for Pebble's incremental checkpoints).
	Checkpoint2Ms float64 `json:"checkpoint2Ms"`
	SyncPause2Ms  float64 `json:"syncPause2Ms"`
	DeltaBytes    int64   `json:"incrementalBytes"`
}

type fill struct {
	v *state.ValueState[int64, []byte]
}

func (f *fill) Open(ctx *weir.KeyedContext[int64, struct{}]) error {
	var err error
	f.v, err = state.Value[int64, []byte](ctx.State(), "payload")
	return err
}

func (f *fill) ProcessElement(k int64, ctx *weir.KeyedContext[int64, struct{}]) error {
	// Incompressible bytes that differ per key, so that Pebble's block
	// compression does not flatter its sizes.
	p := make([]byte, len(payload))
	x := uint64(k)*0x9e3779b97f4a7c15 + 1
	for i := 0; i+8 <= len(p); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(p[i:], x)
	}
	f.v.Update(p)
	return nil
}

func (f *fill) OnTimer(int64, *weir.KeyedContext[int64, struct{}]) error { return nil }

var payload = make([]byte, 104)

func fillJob(keys int64, par int, dir, restore, backend string) *weir.Environment {
	env := weir.NewEnvironment(weir.Config{Parallelism: par, MaxParallelism: 128,
		Checkpoint:   runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore},
		StateBackend: runtime.StateBackendConfig{Kind: backend, Dir: dir + "-state"}})
	n := keys
	if restore != "" {
		n = 0
	}
	src := weir.GenerateSplits(env, "keys", par, -1, func(split int, i int64) weir.Record[int64] {
		k := i*int64(par) + int64(split)
		if k >= n {
			// After the fill, a trickle of updates of existing keys (for
			// the incremental checkpoint).
			time.Sleep(time.Millisecond)
			if n == 0 {
				return weir.Record[int64]{Value: -1, Timestamp: k}
			}
			return weir.Record[int64]{Value: (k * 7919) % n, Timestamp: k}
		}
		return weir.Record[int64]{Value: k, Timestamp: k}
	}, watermark.ForMonotonous[int64]()).UID("keys")
	src = weir.Filter(src, "real", func(k int64) bool { return k >= 0 }).UID("real")
	weir.Process(weir.KeyBy(src, func(k int64) int64 { return k }), "fill",
		func() weir.KeyedProcessFunction[int64, int64, struct{}] { return &fill{} }).UID("fill")
	return env
}

// Checkpoint fills keyed state with `keys` entries of about 100 bytes, takes
// a checkpoint and measures it, lets about 1% of the keys change and takes
// and measures a second one, then restores the first at the same and at
// twice the parallelism. backend is "memory" or "pebble".
func Checkpoint(keys int64, par int, backend string) (CheckpointResult, error) {
	if backend == "" {
		backend = state.BackendMemory
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "weir-bench-chk")
	if err != nil {
		return CheckpointResult{}, err
	}
	defer os.RemoveAll(dir)
	defer os.RemoveAll(dir + "-state")
	env := fillJob(keys, par, dir, "", backend)
	job, err := env.Start(ctx)
	if err != nil {
		return CheckpointResult{}, err
	}
	for env.Metrics().Sum("fill", "recordsIn") < keys {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	_, path, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		return CheckpointResult{}, err
	}
	r := CheckpointResult{Name: fmt.Sprintf("checkpoint %d keys", keys), Backend: backend, Keys: keys,
		StateBytes:   keys * int64(len(payload)+8),
		CheckpointMs: float64(time.Since(start).Microseconds()) / 1000,
		SyncPauseMs:  float64(env.Metrics().Sum("job", "lastCheckpointSyncMicros")) / 1000,
		SizeBytes:    env.Metrics().Sum("job", "lastCheckpointBytes")}
	// About 1% of the keys change (the trickle runs at ~1 update per ms
	// per subtask), then a second checkpoint.
	before := env.Metrics().Sum("fill", "recordsIn")
	for env.Metrics().Sum("fill", "recordsIn") < before+max(keys/100, 1) {
		time.Sleep(5 * time.Millisecond)
	}
	sizeBefore := dirBytes(dir)
	start = time.Now()
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		return r, err
	}
	r.Checkpoint2Ms = float64(time.Since(start).Microseconds()) / 1000
	r.SyncPause2Ms = float64(env.Metrics().Sum("job", "lastCheckpointSyncMicros")) / 1000
	r.DeltaBytes = dirBytes(dir) - sizeBefore
	job.Cancel()
	job.Wait()
	for i, p := range []int{par, 2 * par} {
		env := fillJob(keys, p, dir+"-restore", path, backend)
		start := time.Now()
		job, err := env.Start(ctx) // restore happens while starting (state is read in Open)
		if err != nil {
			return r, err
		}
		// Restored operators have opened once a checkpoint can complete.
		if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
			return r, err
		}
		ms := float64(time.Since(start).Microseconds()) / 1000
		if i == 0 {
			r.RestoreSameMs = ms
		} else {
			r.RestoreMoreMs = ms
		}
		job.Cancel()
		job.Wait()
		os.RemoveAll(dir + "-restore")
		os.RemoveAll(dir + "-restore-state")
	}
	return r, nil
}

// dirBytes is the total size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// CheckpointThroughput runs a keyed count of n records with a checkpoint
// every interval and without, in the same run, and reports both.
func CheckpointThroughput(n int64, keys int, interval time.Duration) (Result, error) {
	return CheckpointThroughputOn("", n, keys, interval)
}

// CheckpointThroughputOn is CheckpointThroughput with the keyed state in
// the given backend (state.BackendMemory or state.BackendPebble; "" is
// memory).
func CheckpointThroughputOn(backend string, n int64, keys int, interval time.Duration) (Result, error) {
	run := func(iv time.Duration) (time.Duration, error) {
		dir, err := os.MkdirTemp("", "weir-bench-tp")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		ks := Keys(keys)
		env := weir.NewEnvironment(weir.Config{Parallelism: 2, Checkpoint: runtime.CheckpointConfig{Interval: iv, Dir: dir},
			StateBackend: runtime.StateBackendConfig{Kind: backend, Dir: dir + "-state"}})
		defer os.RemoveAll(dir + "-state")
		src := weir.GenerateSplits(env, "events", 2, n/2, func(split int, i int64) weir.Record[Event] {
			j := i*2 + int64(split)
			return weir.Record[Event]{Value: eventAt(ks, j), Timestamp: j}
		}, monotone[Event]())
		var total int64
		countPerKey(src, &total)
		start := time.Now()
		if err := env.Execute(context.Background()); err != nil {
			return 0, err
		}
		if iv > 0 && env.Metrics().Sum("job", "checkpointsCompleted") == 0 {
			return 0, fmt.Errorf("no checkpoint completed in %v: run more records", time.Since(start))
		}
		return time.Since(start), nil
	}
	with, err := run(interval)
	if err != nil {
		return Result{}, err
	}
	without, err := run(0)
	if err != nil {
		return Result{}, err
	}
	name := fmt.Sprintf("keyed count, checkpoint every %v vs none", interval)
	if backend != "" {
		name += " (" + backend + " backend)"
	}
	r := result(name, n, with, without, 0, 2)
	return r, nil
}
