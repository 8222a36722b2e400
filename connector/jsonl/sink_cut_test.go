package jsonl_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// cutSplits is the number of splits of gatedJob's source, whatever its
// parallelism; split s emits s*1000, s*1000+1, ...
const cutSplits = 3

// gate lets gatedJob's splits emit up to allow numbers each, and counts
// what reached the sink's chain.
type gate struct {
	allow atomic.Int64
	seen  atomic.Int64 // records past the map before the sink
}

// gatedReader reads its splits (id and next number), each up to the
// gate's allowance, and ends when every split has emitted end numbers.
type gatedReader struct {
	g      *gate
	end    int64
	splits [][2]int64
}

func (r *gatedReader) Poll(out runtime.SourceOutput[int64]) (runtime.PollStatus, error) {
	done := true
	for i := range r.splits {
		s := &r.splits[i]
		for s[1] < min(r.g.allow.Load(), r.end) {
			v := s[0]*1000 + s[1]
			out.Collect(int(s[0]), v, v)
			s[1]++
		}
		if s[1] < r.end {
			done = false
		}
	}
	if done {
		return runtime.Done, nil
	}
	return runtime.Wait, nil
}

func (r *gatedReader) Ready() <-chan struct{} { return nil }
func (r *gatedReader) Close() error           { return nil }

func (r *gatedReader) SnapshotSplits(int64) ([][]byte, error) {
	var items [][]byte
	for _, s := range r.splits {
		items = append(items, binary.AppendVarint(binary.AppendVarint(nil, s[0]), s[1]))
	}
	return items, nil
}

func gatedJob(g *gate, out string, end int64, cfg weir.Config) *weir.Environment {
	env := weir.NewEnvironment(cfg)
	src := weir.FromSource(env, "numbers", runtime.SourceFunc[int64](func(ctx runtime.SourceContext) (runtime.Reader[int64], error) {
		r := &gatedReader{g: g, end: end}
		if ctx.Restored == nil {
			for s := ctx.Subtask; s < cutSplits; s += ctx.Parallelism {
				r.splits = append(r.splits, [2]int64{int64(s), 0})
			}
			return r, nil
		}
		items, err := ctx.Restored.List(runtime.SplitsList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			id, n := binary.Varint(it)
			next, _ := binary.Varint(it[n:])
			r.splits = append(r.splits, [2]int64{id, next})
		}
		return r, nil
	}), watermark.ForMonotonous[int64]()).UID("numbers")
	seen := weir.Map(src, "seen", func(v int64) int64 { g.seen.Add(1); return v }).UID("seen")
	weir.ToSink(seen, "out", jsonl.Sink[int64](out)).UID("out")
	return env
}

// linesOf reads every file of the sink at any parallelism (out, out-N).
func linesOf(t *rapid.T, out string) map[string][]string {
	files, err := filepath.Glob(out + "*")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur []byte
		for _, c := range b {
			if c == '\n' {
				lines[f] = append(lines[f], string(cur))
				cur = cur[:0]
				continue
			}
			cur = append(cur, c)
		}
		if len(cur) > 0 {
			lines[f] = append(lines[f], string(cur)+" (no newline)")
		}
	}
	return lines
}

// J6: a job restored from a checkpoint cuts each file back to its length
// at the checkpoint, so the records after it, which it writes again, are
// in the files once, also at another parallelism and when the failed run
// left a torn last line. The failed run here is cancelled after its sink
// had records past the checkpoint, whose lines its close flushed (a kill
// -9 leaves a part of them, at most).
func TestSinkCutsBackToTheCheckpointOnRestore(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		p1 := rapid.IntRange(1, 3).Draw(t, "p1")
		p2 := rapid.IntRange(1, 3).Draw(t, "p2")
		const end = 60
		at := rapid.Int64Range(0, 30).Draw(t, "checkpointAt")
		crash := rapid.Int64Range(at, end-1).Draw(t, "crashAt")
		torn := rapid.Bool().Draw(t, "tornLine")

		run := filepath.Join(dir, strconv.Itoa(int(time.Now().UnixNano())))
		if err := os.Mkdir(run, 0o755); err != nil {
			t.Fatal(err)
		}
		out, chk := filepath.Join(run, "out.jsonl"), filepath.Join(run, "chk")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waitSeen := func(g *gate, n int64) {
			for g.seen.Load() < n {
				if ctx.Err() != nil {
					t.Fatalf("the sink saw %d records; want %d", g.seen.Load(), n)
				}
				time.Sleep(time.Millisecond)
			}
		}

		g := &gate{}
		g.allow.Store(at)
		job, err := gatedJob(g, out, end, weir.Config{Parallelism: p1, Checkpoint: runtime.CheckpointConfig{Dir: chk}}).Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitSeen(g, cutSplits*at)
		_, cp, err := job.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g.allow.Store(crash)
		waitSeen(g, cutSplits*crash)
		job.Cancel()
		_ = job.Wait()
		n := 0
		for _, ls := range linesOf(t, out) {
			n += len(ls)
		}
		if n != cutSplits*int(crash) {
			t.Fatalf("the failed run left %d lines; want %d (its close flushes them)", n, cutSplits*crash)
		}
		if torn {
			f, err := os.OpenFile(jsonl.PartPath(out, 0, p1), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString("12")
			_ = f.Close()
		}

		g2 := &gate{}
		g2.allow.Store(end)
		job, err = gatedJob(g2, out, end, weir.Config{Parallelism: p2,
			Checkpoint: runtime.CheckpointConfig{Dir: chk, RestoreFrom: cp}}).Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for f, ls := range linesOf(t, out) {
			for _, l := range ls {
				count[l]++
				if count[l] > 1 {
					t.Fatalf("line %q twice (the second in %s)", l, filepath.Base(f))
				}
			}
		}
		for s := range int64(cutSplits) {
			for i := range int64(end) {
				if v := strconv.FormatInt(s*1000+i, 10); count[v] != 1 {
					t.Fatalf("line %s is in the files %d times; want once", v, count[v])
				}
				delete(count, strconv.FormatInt(s*1000+i, 10))
			}
		}
		for l := range count {
			t.Fatalf("line %q is no record of the job", l)
		}
	})
}
