package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir/pipeline"
)

// TestSavepointRestore: the running job Build and Start return takes a
// savepoint and is cancelled mid-stream; a second run restored from it
// (Options.RestoreFrom, `weir run --restore`) finishes the input. The
// exactly-once file sink then holds every generated record exactly once,
// counted by the windows of both runs. The first run's generator has no
// end in practice; the second's ends 50,000 records beyond what the first
// had read when it was cancelled (the savepoint is at most that far).
func TestSavepointRestore(t *testing.T) {
	dir := t.TempDir()
	spec := func(n int64) *pipeline.Spec {
		src := fmt.Sprintf(`
name: savepoint-test
job:
  parallelism: 2
  checkpoint: {dir: %s}
source:
  generate:
    count: %d
    fields: {k: 'i %% 7', t: 'i * 10'}
  timestamp: t
steps:
  - keyBy: k
  - window: {tumbling: 1s, aggregate: {n: count}}
sink:
  file: {dir: %s}
`, filepath.Join(dir, "chk"), n, filepath.Join(dir, "out"))
		file := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := pipeline.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	j, err := pipeline.Build(ctx, spec(1<<50), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := j.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Take the savepoint once records flow, then stop.
	for job.Metrics().Sum("window", "recordsIn") == 0 {
		time.Sleep(time.Millisecond)
	}
	sp := filepath.Join(dir, "sp")
	if _, err := job.TriggerSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()
	j.Close()
	first := job.Metrics().Sum("window", "recordsIn")
	n := first + 50_000

	s, err := pipeline.Run(ctx, spec(n), pipeline.Options{RestoreFrom: sp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, r := range committed(t, filepath.Join(dir, "out")) {
		total += r["n"].(float64)
	}
	if int64(total) != n {
		t.Errorf("windows count %v records over both runs, want %d (first run read %d, the restored one %d)", total, n, first, s.SourceRecords)
	}
	if s.SourceRecords >= n {
		t.Errorf("the restored run read %d records: it did not start from the savepoint", s.SourceRecords)
	}
}
