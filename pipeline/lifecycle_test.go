package pipeline

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
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
