package jsonl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/runtime"
)

// fakeOut records what a reader emits. It embeds the interface so that it
// keeps compiling when SourceOutput grows; methods it does not define panic.
type fakeOut[T any] struct {
	runtime.SourceOutput[T]
	calls  []string // "add 1", "collect 1", "finish 1", "dead 1"
	values []T
	ts     []int64
	dead   []runtime.DeadLetter
}

func (o *fakeOut[T]) Collect(split int, v T, ts int64) {
	o.calls = append(o.calls, fmt.Sprintf("collect %d", split))
	o.values = append(o.values, v)
	o.ts = append(o.ts, ts)
}
func (o *fakeOut[T]) AddSplit(split int) { o.calls = append(o.calls, fmt.Sprintf("add %d", split)) }
func (o *fakeOut[T]) FinishSplit(split int) {
	o.calls = append(o.calls, fmt.Sprintf("finish %d", split))
}
func (o *fakeOut[T]) SetSplitIdle(split int, idle bool) {
	o.calls = append(o.calls, fmt.Sprintf("idle %d %v", split, idle))
}
func (o *fakeOut[T]) DeadLetter(d runtime.DeadLetter) {
	o.calls = append(o.calls, fmt.Sprintf("dead %d", d.Split))
	o.dead = append(o.dead, d)
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// drain polls r to Done, checking that no Poll reads more than linesPerPoll
// lines (emitted or skipped), and returns the number of polls.
func drain[T any](t *testing.T, r runtime.Reader[T], out *fakeOut[T]) int {
	t.Helper()
	for polls := 1; ; polls++ {
		before := len(out.values) + len(out.dead)
		st, err := r.Poll(out)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.values) + len(out.dead) - before; n > linesPerPoll {
			t.Fatalf("one Poll emitted %d", n)
		}
		if st == runtime.Done {
			return polls
		}
		if st != runtime.More {
			t.Fatalf("status %v", st)
		}
		if polls > 1e6 {
			t.Fatal("no end")
		}
	}
}

func newReader[T any](t *testing.T, src runtime.Source[T], subtask, par int) runtime.Reader[T] {
	t.Helper()
	r, err := src.CreateReader(runtime.SourceContext{Name: "src", Subtask: subtask, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// jsonString returns a JSON string literal of exactly n bytes (n >= 2).
func jsonString(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

func TestLineLengths(t *testing.T) {
	dir := t.TempDir()
	type line struct {
		size int
		eol  string
	}
	for _, max := range []int{10, readBufferSize - 1, readBufferSize, readBufferSize + 1, 3*readBufferSize + 5} {
		var lines []line
		for _, d := range []int{-2, -1, 0, 1, 2, 3} {
			for _, eol := range []string{"\n", "\r\n"} {
				if n := max + d; n >= 2 {
					lines = append(lines, line{n, eol})
				}
			}
		}
		for _, sz := range []int{readBufferSize - 2, readBufferSize - 1, readBufferSize, readBufferSize + 1, 2 * readBufferSize} {
			lines = append(lines, line{sz, "\n"}, line{sz, "\r\n"})
		}
		lines = append(lines, line{max + 1, ""}) // last line, no line ending
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(jsonString(l.size) + l.eol)
		}
		p := writeFile(t, dir, fmt.Sprintf("max%d.jsonl", max), b.String())
		out := &fakeOut[string]{}
		drain(t, newReader(t, SourceWith(Options[string]{MaxLineSize: max}, p), 0, 1), out)
		var good, dead int
		for i, l := range lines {
			if l.size <= max {
				if got := len(out.values[good]) + 2; got != l.size {
					t.Fatalf("max %d line %d: decoded %d bytes, want %d", max, i+1, got, l.size)
				}
				good++
				continue
			}
			d := out.dead[dead]
			dead++
			if d.Position != int64(i+1) || len(d.Raw) != min(l.size, RawPrefix) || !strings.HasPrefix(jsonString(l.size), string(d.Raw)) {
				t.Fatalf("max %d line %d: dead letter %d %q...", max, i+1, d.Position, d.Raw[:min(len(d.Raw), 20)])
			}
			want := fmt.Sprintf("jsonl: %s:%d: line of %d bytes is longer than the maximum of %d", p, i+1, l.size, max)
			if d.Reason != want {
				t.Fatalf("reason %q, want %q", d.Reason, want)
			}
		}
		if good != len(out.values) || dead != len(out.dead) {
			t.Fatalf("max %d: %d records, %d dead; want %d, %d", max, len(out.values), len(out.dead), good, dead)
		}
	}
}

func TestBlankLinesBOMAndLastLine(t *testing.T) {
	p := writeFile(t, t.TempDir(), "a.jsonl", "\uFEFF1\n\n  \t\r\n2\r\n\r\n3")
	out := &fakeOut[int]{}
	drain(t, newReader(t, Source[int](p), 0, 1), out)
	if fmt.Sprint(out.values) != "[1 2 3]" || len(out.dead) != 0 {
		t.Fatalf("values %v, dead %v", out.values, out.dead)
	}
	for _, ts := range out.ts {
		if ts != runtime.NoTimestamp {
			t.Fatalf("source timestamp %d without Options.Timestamp", ts)
		}
	}
}

func TestPollIsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "%d\n\n", i)
	}
	p := writeFile(t, t.TempDir(), "a.jsonl", b.String())
	out := &fakeOut[int]{}
	polls := drain(t, newReader(t, Source[int](p), 0, 1), out)
	if len(out.values) != 1000 || polls < 2000/linesPerPoll {
		t.Fatalf("%d values in %d polls", len(out.values), polls)
	}
}

func TestSplitsAndSubtasks(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 5 {
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("f%d.jsonl", i), fmt.Sprintf("%d\n%d\nbad\n", 10*i, 10*i+1)))
	}
	for _, tc := range []struct {
		ordered      bool
		subtask, par int
		want         string
	}{
		{false, 1, 2, "add 1,add 3,collect 1,collect 1,dead 1,finish 1,collect 3,collect 3,dead 3,finish 3"},
		{true, 1, 2, "add 1,collect 1,collect 1,dead 1,finish 1,add 3,collect 3,collect 3,dead 3,finish 3"},
		{false, 0, 2, "add 0,add 2,add 4,collect 0,collect 0,dead 0,finish 0,collect 2,collect 2,dead 2,finish 2,collect 4,collect 4,dead 4,finish 4"},
		{false, 4, 6, "add 4,collect 4,collect 4,dead 4,finish 4"},
		{false, 5, 6, ""},
	} {
		out := &fakeOut[int]{}
		drain(t, newReader(t, SourceWith(Options[int]{Ordered: tc.ordered}, paths...), tc.subtask, tc.par), out)
		if got := strings.Join(out.calls, ","); got != tc.want {
			t.Errorf("ordered %v subtask %d of %d:\n got %s\nwant %s", tc.ordered, tc.subtask, tc.par, got, tc.want)
		}
		for _, d := range out.dead {
			if want := fmt.Sprintf("jsonl: %s:3: invalid character", paths[d.Split]); d.Position != 3 || !strings.HasPrefix(d.Reason, want) || string(d.Raw) != "bad" {
				t.Errorf("dead letter %+v", d)
			}
		}
	}
}

func TestMissingFileFails(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.jsonl", "1\n")
	missing := filepath.Join(dir, "missing.jsonl")
	r := newReader(t, Source[int](good, missing), 0, 1)
	out := &fakeOut[int]{}
	var err error
	for err == nil {
		var st runtime.PollStatus
		st, err = r.Poll(out)
		if st == runtime.Done && err == nil {
			t.Fatal("Done despite a missing file")
		}
	}
	if !strings.Contains(err.Error(), missing) || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("error %v", err)
	}
	if len(out.values) != 1 {
		t.Fatalf("values %v", out.values)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestDisallowUnknownFields(t *testing.T) {
	type rec struct {
		ID int `json:"id"`
	}
	p := writeFile(t, t.TempDir(), "a.jsonl", `{"id":1}`+"\n"+`{"id":2,"extra":true}`+"\n"+`{"id":3} {"id":4}`+"\n"+`{"id":5}  `+"\n")
	for _, strict := range []bool{false, true} {
		out := &fakeOut[rec]{}
		drain(t, newReader(t, SourceWith(Options[rec]{DisallowUnknownFields: strict}, p), 0, 1), out)
		var ids []int
		for _, v := range out.values {
			ids = append(ids, v.ID)
		}
		var lines []int64
		for _, d := range out.dead {
			lines = append(lines, d.Position)
		}
		want := "[1 2 5] [3]"
		if strict {
			want = "[1 5] [2 3]"
		}
		if got := fmt.Sprint(ids, lines); got != want {
			t.Errorf("strict %v: records and dead lines %s, want %s (%v)", strict, got, want, out.dead)
		}
		if strict && !strings.Contains(out.dead[0].Reason, `unknown field "extra"`) {
			t.Errorf("reason %q", out.dead[0].Reason)
		}
	}
}

func TestOptionsTimestamp(t *testing.T) {
	type rec struct {
		TS int64 `json:"ts"`
	}
	p := writeFile(t, t.TempDir(), "a.jsonl", `{"ts":5}`+"\n"+`{}`+"\n"+`{"ts":7}`+"\n")
	out := &fakeOut[rec]{}
	drain(t, newReader(t, SourceWith(Options[rec]{Timestamp: func(r rec) (int64, bool) { return r.TS, r.TS > 0 }}, p), 0, 1), out)
	if fmt.Sprint(out.ts) != "[5 7]" || len(out.dead) != 1 {
		t.Fatalf("timestamps %v, dead %v", out.ts, out.dead)
	}
	d := out.dead[0]
	if d.Position != 2 || d.Reason != fmt.Sprintf("jsonl: %s:2: record has no usable timestamp", p) || d.Value != (rec{}) || string(d.Raw) != "{}" {
		t.Fatalf("dead letter %+v", d)
	}
}
