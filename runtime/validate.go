package runtime

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/state"
)

// Validator is implemented by operators (and sources) whose options can be
// wrong. Start calls Validate on each operator instance while it builds
// the job, before any task runs, and fails with its error; the error should
// name the option, its value and what is accepted.
type Validator interface {
	Validate() error
}

// validate checks cfg (as given, before defaults) and the parallelism of
// every operator of g. It returns one error listing every problem, each
// naming the field, the bad value and what is accepted, so that a job with
// a bad configuration fails at Start before any work is done. It creates
// CheckpointConfig.Dir (and a Pebble StateBackendConfig.Dir) if needed and
// checks that a file can be written there; a bucket URL's scheme is checked
// (its bucket is reached only by the first checkpoint).
func (cfg Config) validate(g *Graph) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("runtime: "+format, args...))
	}
	if cfg.Parallelism < 0 || cfg.Parallelism > keygroup.UpperBound {
		bad("Config.Parallelism %d: want 0 (meaning 1) or an integer from 1 to %d", cfg.Parallelism, keygroup.UpperBound)
	}
	if cfg.MaxParallelism < 0 || cfg.MaxParallelism > keygroup.UpperBound {
		bad("Config.MaxParallelism %d: want 0 (Flink's default for the job's parallelism) or an integer from 1 to %d", cfg.MaxParallelism, keygroup.UpperBound)
	}
	maxPar := cfg.MaxParallelism
	if maxPar < 1 || maxPar > keygroup.UpperBound {
		maxPar = keygroup.UpperBound
	}
	if cfg.Parallelism > maxPar {
		bad("Config.Parallelism %d exceeds Config.MaxParallelism %d: want a parallelism from 1 to %d, or raise MaxParallelism", cfg.Parallelism, maxPar, maxPar)
	}
	if g != nil {
		for _, n := range g.nodes {
			if n.parallelism < 0 || n.parallelism > maxPar {
				bad("operator %q: parallelism %d: want 0 (the job's parallelism) or an integer from 1 to %d", n.name, n.parallelism, maxPar)
			}
		}
	}
	if sl := cfg.Slice; sl.Count != 0 {
		switch {
		case sl.Count < 0 || sl.Count > keygroup.UpperBound:
			bad("Config.Slice.Count %d: want 0 (the job is whole) or a number of slices from 1 to %d", sl.Count, keygroup.UpperBound)
		case cfg.MaxParallelism == 0:
			bad("Config.Slice %d of %d with MaxParallelism 0: set MaxParallelism, the key groups the slices split", sl.Index, sl.Count)
		case keygroup.Validate(cfg.MaxParallelism, sl.Count) != nil:
			bad("Config.Slice.Count %d exceeds Config.MaxParallelism %d: want at most one slice per key group", sl.Count, cfg.MaxParallelism)
		case sl.Index < 0 || sl.Index >= sl.Count:
			bad("Config.Slice.Index %d: want an index from 0 to %d (Slice.Count - 1)", sl.Index, sl.Count-1)
		}
	} else if cfg.Slice.Index != 0 {
		bad("Config.Slice.Index %d with Slice.Count 0: set Count, the number of slices, or leave both 0", cfg.Slice.Index)
	}
	if cfg.BufferSize < 0 {
		bad("Config.BufferSize %d: want 0 (meaning 512) or a positive number of records", cfg.BufferSize)
	}
	if cfg.BuffersPerChannel < 0 {
		bad("Config.BuffersPerChannel %d: want 0 (meaning 4) or a positive number of batches", cfg.BuffersPerChannel)
	}
	cp := cfg.Checkpoint
	if cp.Interval < 0 {
		bad("CheckpointConfig.Interval %v: want 0 (no periodic checkpoints) or a positive duration", cp.Interval)
	}
	if cp.Timeout < 0 {
		bad("CheckpointConfig.Timeout %v: want 0 (meaning 10m) or a positive duration", cp.Timeout)
	}
	if cp.MinPause < 0 {
		bad("CheckpointConfig.MinPause %v: want 0 (no pause) or a positive duration", cp.MinPause)
	}
	if cp.Retain < 0 {
		bad("CheckpointConfig.Retain %d: want 0 (meaning 3) or a positive number of checkpoints", cp.Retain)
	}
	if cp.Mode != ExactlyOnce && cp.Mode != AtLeastOnce {
		bad("CheckpointConfig.Mode %d: want ExactlyOnce or AtLeastOnce", cp.Mode)
	}
	if cp.Interval > 0 && cp.Dir == "" {
		bad("CheckpointConfig.Dir is empty with Interval %v: set a writable directory, or Interval 0 to take no checkpoints", cp.Interval)
	}
	if cp.Dir != "" && cp.Storage.Store == nil {
		if err := checkpoint.CheckLocation(cp.Dir); err != nil {
			bad("CheckpointConfig.Dir: %v", err)
		} else if dir, ok := checkpoint.LocalPath(cp.Dir); ok && osFS(cp.Storage.FS) {
			// A local location on a file system of the caller's
			// (Storage.FS, an in-memory one in tests and the simulator)
			// is not on the operating system's: probing it there created
			// the directory on the real disk and wrote and removed a file
			// in it at every start.
			if err := checkWritable(dir); err != nil {
				bad("CheckpointConfig.Dir %q is not a writable directory (%v): give one that can be created and written", cp.Dir, err)
			}
		}
	}
	if cp.Resume && cp.Dir == "" && cp.RestoreFrom == "" {
		bad("CheckpointConfig.Resume needs Dir, the directory whose newest checkpoint to resume from: set Dir, or Resume false")
	}
	if cp.RestoreFrom != "" && cp.Storage.Store == nil {
		if err := checkpoint.CheckLocation(cp.RestoreFrom); err != nil {
			bad("CheckpointConfig.RestoreFrom: %v", err)
		}
	}
	cfg.Restart.validate(bad)
	sb := cfg.StateBackend
	switch sb.Kind {
	case "", state.BackendMemory:
	case state.BackendPebble:
		if sb.Dir != "" {
			if err := checkWritable(sb.Dir); err != nil {
				bad("StateBackendConfig.Dir %q is not a writable directory (%v): give one that can be created and written", sb.Dir, err)
			}
		}
	default:
		bad("StateBackendConfig.Kind %q: want %q (the default) or %q", sb.Kind, state.BackendMemory, state.BackendPebble)
	}
	if sb.CacheBytes < state.NoCache {
		bad("StateBackendConfig.CacheBytes %d: want 0 (the default, %d bytes), a size in bytes, or state.NoCache (-1) to turn the Pebble write-back cache off", sb.CacheBytes, state.DefaultCacheBytes)
	}
	return errors.Join(errs...)
}

// osFS reports whether fs, a checkpoint.Storage's FS, is the operating
// system's file system.
func osFS(fs vfs.FS) bool { return fs == nil || fs == vfs.Default }

// checkWritable creates dir if needed and writes and removes a probe file
// in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".weir-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, err = f.Write([]byte("probe"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// ValidateConfig checks cfg as Start does, without a job: the same error
// (nil if cfg is valid). Commands call it to reject a configuration before
// doing any other work. It creates CheckpointConfig.Dir if needed (a local
// directory on the operating system's file system; one on a
// Storage.FS of the caller's is neither created nor probed).
func ValidateConfig(cfg Config) error { return cfg.validate(nil) }
