package checkpoint_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/jobtest"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// A job checkpoints to s3:// (an S3 server in the test's process), is
// cancelled, and a new run restores from the newest checkpoint there:
// every key is counted exactly once across the restore, with the memory
// backend (canonical key-group blobs) and the Pebble backend (native
// incremental checkpoints: SSTs uploaded as objects under shared/ and
// downloaded into the local Pebble directory on restore).
func TestJobRestoresFromS3(t *testing.T) {
	jobRestoresFrom(t, "s3://", func(t *testing.T) string { return s3test.Start(t, "jobs/count") })
}

// jobRestoresFrom is TestJobRestoresFromS3 on the bucket start returns (a
// checkpoint base whose URL starts with scheme), for each state backend.
func jobRestoresFrom(t *testing.T, scheme string, start func(t *testing.T) string) {
	for _, backend := range []string{state.BackendMemory, state.BackendPebble} {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			base := start(t)
			const perKey = 3000
			build := func(restore string) (*weir.Environment, *weir.Collected[[2]int64]) {
				env := weir.NewEnvironment(weir.Config{Parallelism: 2, MaxParallelism: 64,
					StateBackend: runtime.StateBackendConfig{Kind: backend, Dir: t.TempDir()},
					Checkpoint:   runtime.CheckpointConfig{Dir: base, RestoreFrom: restore, Retain: 2}})
				src := weir.Generate(env, "numbers", 10*perKey, func(i int64) weir.Record[int64] {
					if restore == "" && i%50 < 2 { // both subtasks (even and odd i)
						time.Sleep(time.Millisecond) // the first run is cancelled mid-stream
					}
					return weir.Record[int64]{Value: i % 10, Timestamp: i}
				}, watermark.ForMonotonous[int64]()).UID("numbers")
				counts := weir.Process(weir.KeyBy(src, func(v int64) int64 { return v }), "count",
					func() weir.KeyedProcessFunction[int64, int64, [2]int64] { return &countKey{} }).UID("count")
				return env, weir.Collect(counts)
			}
			env, _ := build("")
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second native checkpoint is incremental
				if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
					t.Fatal(err)
				}
			}
			job.Cancel()
			job.Wait()
			latest, id, err := checkpoint.Latest(base)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(latest, scheme) || id != 2 {
				t.Fatalf("latest checkpoint %d at %s", id, latest)
			}
			snap, err := checkpoint.Read(latest)
			if err != nil {
				t.Fatal(err)
			}
			native := 0
			for _, st := range snap.Operator("count").Subtasks {
				if st != nil && st.Native != nil {
					native += len(st.Native.Shared) + len(st.Native.Private)
				}
			}
			if (backend == state.BackendPebble) != (native > 0) {
				t.Fatalf("%s backend: %d native files in checkpoint %d", backend, native, id)
			}

			env2, out := build(latest)
			if err := env2.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			final := map[int64]int64{}
			for _, v := range out.Values() {
				final[v[0]] = max(final[v[0]], v[1])
			}
			for k := int64(0); k < 10; k++ {
				if final[k] != perKey {
					t.Fatalf("key %d counted %d, want %d (exactly once across the restore from %s)", k, final[k], perKey, latest)
				}
			}
		})
	}
}

// Native checkpoints into s3:// are incremental as into a directory: the
// second one after a small change uploads one new SST and reuses the
// others; a restore downloads them into a local Pebble directory and sees
// every key; Retain deletes the objects no retained checkpoint references.
func TestNativeCheckpointsToS3AreIncremental(t *testing.T) {
	rng := keygroup.Range{Start: 0, End: 127}
	b, _, put := pebbleValues(t, rng, func(int) string { return strings.Repeat("x", 100) })
	base := s3test.Start(t, "native")
	take := nativeCheckpoints(t, b, base, rng)
	n1, n2 := incrementalPair(t, put, take)
	if err := checkpoint.Retain(base, 1); err != nil {
		t.Fatal(err)
	}
	if ids, _ := checkpoint.List(base); fmt.Sprint(ids) != "[2]" {
		t.Fatalf("after Retain(1): %v", ids)
	}
	s, err := checkpoint.Read(checkpoint.Dir(base, 2))
	if err != nil {
		t.Fatal(err)
	}
	c := restoreNative(t, s.Operators[0].Subtasks[0].Native, rng)
	if got, want := numKeys(c, "v"), numKeys(b, "v"); got != want || got != 2010 {
		t.Fatalf("restored %d keys, want %d", got, want)
	}
	// A file only checkpoint 1 referenced is gone (when a compaction
	// replaced them all, checkpoint 2 references none of checkpoint 1's).
	kept := map[string]bool{}
	for _, f := range n2.Shared {
		kept[f.Path] = true
	}
	left := map[string]bool{}
	for _, k := range s3test.Keys(t, base) {
		left[k] = true
	}
	for _, f := range n1.Shared {
		if left[f.Path] != kept[f.Path] {
			t.Fatalf("after Retain(1), %s is there: %v; checkpoint 2 references it: %v", f.Path, left[f.Path], kept[f.Path])
		}
	}
	for _, f := range n2.Shared {
		if !left[f.Path] {
			t.Fatalf("Retain deleted %s, which checkpoint 2 references", f.Path)
		}
	}
}

// countKey is the shared keyed count of internal/jobtest.
type countKey = jobtest.CountKey
