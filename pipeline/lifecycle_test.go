package pipeline

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/runtime"
)

// TestCloseJoinsClosersErrors: Close runs every closer, the last opened
// first, even when one fails, and returns all their errors joined; a
// second Close returns the same.
func TestCloseJoinsClosersErrors(t *testing.T) {
	j := builtJob(t)
	errFirst, errLast := errors.New("first closer failed"), errors.New("last closer failed")
	var ran []string
	j.closers = append(j.closers,
		func() error { ran = append(ran, "first"); return errFirst },
		func() error { ran = append(ran, "middle"); return nil },
		func() error { ran = append(ran, "last"); return errLast },
	)
	err := j.Close()
	if !errors.Is(err, errFirst) || !errors.Is(err, errLast) {
		t.Fatalf("Close() = %v; want both closers' errors", err)
	}
	if want := []string{"last", "middle", "first"}; !slices.Equal(ran, want) {
		t.Fatalf("closers ran %v; want %v", ran, want)
	}
	if again := j.Close(); again != err || len(ran) != 3 {
		t.Fatalf("second Close() = %v (closers ran %v); want the first result, no closer again", again, ran)
	}
}

// TestCloseWithoutErrors: a job whose closers all succeed closes with nil.
func TestCloseWithoutErrors(t *testing.T) {
	j := builtJob(t)
	if err := j.Close(); err != nil {
		t.Fatalf("Close() = %v; want nil", err)
	}
}

// builtJob is a small pipeline, built (not started).
func builtJob(t *testing.T) *Job {
	t.Helper()
	spec, err := Parse("p.yaml", []byte("source: {generate: {count: 3, fields: {t: 'i'}}, timestamp: t}\nsink: {stdout: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Build(context.Background(), spec, Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestRunReturnsCloseError: a run that succeeds but whose job fails to
// close (the embedded broker failing to save its data, say) returns the
// closing error, naming the pipeline; Run used to drop it.
func TestRunReturnsCloseError(t *testing.T) {
	spec, err := Parse("p.yaml", []byte("source: {generate: {count: 3, fields: {t: 'i'}}, timestamp: t}\nsink: {stdout: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	errClose := errors.New("closer failed")
	opts := Options{Stdout: io.Discard, OnStart: func(j *Job, _ *runtime.Job) {
		j.closers = append(j.closers, func() error { return errClose })
	}}
	s, err := Run(context.Background(), spec, opts, io.Discard)
	if !errors.Is(err, errClose) || !strings.Contains(err.Error(), "p.yaml: closing") {
		t.Fatalf("Run() = %v; want the closer's error, naming the pipeline", err)
	}
	if s.SourceRecords != 3 {
		t.Fatalf("summary: %d source records, want 3 (the run itself completed)", s.SourceRecords)
	}
	if _, err := Run(context.Background(), spec, Options{Stdout: io.Discard}, io.Discard); err != nil {
		t.Fatalf("Run() without a failing closer = %v", err)
	}
}

// TestClusterCloseAllJoinsErrors: the clustered run closes every task's
// closers, the last opened first, even when one fails, and returns the
// errors naming their tasks (it used to drop them).
func TestClusterCloseAllJoinsErrors(t *testing.T) {
	errA := errors.New("a failed")
	var ran []string
	r := &clusterRun{}
	r.mu.closers = map[string][]func() error{
		"keyed-0": {
			func() error { ran = append(ran, "k0-first"); return errA },
			func() error { ran = append(ran, "k0-last"); return nil },
		},
	}
	err := r.closeAll()
	if !errors.Is(err, errA) || !strings.Contains(err.Error(), "task keyed-0: a failed") {
		t.Fatalf("closeAll() = %v; want the closer's error naming its task", err)
	}
	if want := []string{"k0-last", "k0-first"}; !slices.Equal(ran, want) {
		t.Fatalf("closers ran %v; want %v", ran, want)
	}
	if err := r.closeAll(); err != nil || len(ran) != 2 {
		t.Fatalf("second closeAll() = %v (ran %v); want nil and no closer again", err, ran)
	}
}
