package weir_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// releasingSink is a TwoPhaseCommitter and TransactionReleaser that
// numbers its transactions from next and logs the calls.
type releasingSink struct {
	mu   *sync.Mutex
	log  *[]string
	next int
}

func (s *releasingSink) add(format string, args ...any) {
	s.mu.Lock()
	*s.log = append(*s.log, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *releasingSink) Begin() (int, error)                 { s.next++; return s.next, nil }
func (s *releasingSink) Write(int, weir.Record[int64]) error { return nil }
func (s *releasingSink) PreCommit(int) error                 { return nil }
func (s *releasingSink) Commit(txn int) error                { s.add("commit %d", txn); return nil }
func (s *releasingSink) Release(txn int) error               { s.add("release %d", txn); return nil }
func (s *releasingSink) Recover(open int, ok bool) error     { return nil }

// TwoPhaseCommit releases a committed transaction once a checkpoint taken
// after the last one listing it has completed, and a transaction committed
// by a restore once a checkpoint of the restored run has completed.
func TestTwoPhaseCommitReleasesAfterALaterCheckpoint(t *testing.T) {
	var mu sync.Mutex
	var log []string
	has := func(entry string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(log, entry)
	}
	dir := t.TempDir()
	start := func(first int, restore string) *runtime.Job {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1,
			Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
		src := weir.Generate(env, "numbers", -1, func(i int64) weir.Record[int64] {
			time.Sleep(time.Millisecond)
			return weir.Record[int64]{Value: i, Timestamp: i}
		}, watermark.ForMonotonous[int64]()).UID("numbers")
		weir.TwoPhaseCommit(src, "sink", func(*runtime.Context) (weir.TwoPhaseCommitter[int64, int], error) {
			return &releasingSink{mu: &mu, log: &log, next: first}, nil
		}).UID("sink")
		job, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { job.Cancel(); job.Wait() })
		return job
	}
	checkpointAndCommit := func(job *runtime.Job, txn int) string {
		t.Helper()
		_, path, err := job.TriggerCheckpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		weirtest.Eventually(t, fmt.Sprint("commit ", txn), func() bool { return has(fmt.Sprint("commit ", txn)) })
		return path
	}

	job := start(0, "")
	checkpointAndCommit(job, 1) // checkpoint 1 lists 1 as pending
	if has("release 1") {
		t.Fatalf("1 released when the checkpoint that lists it completed: %v", log)
	}
	path := checkpointAndCommit(job, 2) // checkpoint 2 lists 2 only
	if !has("release 1") || has("release 2") {
		t.Fatalf("after checkpoint 2: %v, want 1 released and 2 not", log)
	}
	job.Cancel()
	job.Wait()

	// The restore commits 2 again; it is released when the restored
	// run's first checkpoint completes.
	job = start(100, path)
	weirtest.Eventually(t, "the restore's commit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range log {
			if e == "commit 2" {
				n++
			}
		}
		return n == 2
	})
	if has("release 2") {
		t.Fatalf("2 released before a checkpoint of the restored run completed: %v", log)
	}
	checkpointAndCommit(job, 101)
	if !has("release 2") || has("release 101") {
		t.Fatalf("after the restored run's first checkpoint: %v, want 2 released and 101 not", log)
	}
}
