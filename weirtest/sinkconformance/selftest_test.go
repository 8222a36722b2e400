package sinkconformance_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/weirproject/weir"
	wruntime "github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// appendSink is an at-least-once sink that the kill9 mode must catch:
// each record is appended to its subtask's file at once, with no
// transaction, so a restored child writes again what its killed
// predecessor wrote after the checkpoint.
var appendSink = sinkconformance.Sink{
	Name:    "append (at least once)",
	NewDest: func(t testing.TB) string { return t.TempDir() },
	Attach: func(s weir.Stream[string], dir string) {
		weir.ToSink(s, "out", func(ctx *wruntime.Context) (weir.SinkWriter[string], error) {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("part-%d", ctx.Subtask)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			return appendWriter{f}, err
		})
	},
	Committed: func(t testing.TB, dir string) []string {
		var out []string
		parts, _ := filepath.Glob(filepath.Join(dir, "part-*"))
		for _, p := range parts {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				out = append(out, sc.Text())
			}
			f.Close()
		}
		return out
	},
}

type appendWriter struct{ f *os.File }

func (w appendWriter) Write(r weir.Record[string]) error {
	_, err := w.f.WriteString(r.Value + "\n")
	return err
}
func (w appendWriter) Close() error { return w.f.Close() }

// recorder is a testing.TB whose Fatal ends the calling goroutine and
// keeps the message, for a test of the suite itself.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recorder) Fatal(a ...any)            { r.Errorf("%s", fmt.Sprint(a...)); runtime.Goexit() }

// TestKillModeCatchesAtLeastOnceSink: the kill9 mode fails a sink that
// writes again after a restore (S3 can fail).
func TestKillModeCatchesAtLeastOnceSink(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sinkconformance.RunKillMode(r, appendSink, sinkconformance.Options{Records: 500, KillTrials: 1})
	}()
	<-done
	if len(r.failed) == 0 || !strings.Contains(r.failed[0], "S3:") || !strings.Contains(r.failed[0], "more than once") {
		t.Fatalf("the kill9 mode passed an at-least-once sink, or failed it for another reason: %q", r.failed)
	}
	t.Logf("caught: %s", r.failed[0])
}
