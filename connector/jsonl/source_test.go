package jsonl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

type event struct {
	ID   int    `json:"id"`
	TS   int64  `json:"ts,omitempty"`
	Name string `json:"name,omitempty"`
}

// byTS takes the event time from TS; 0 means the event has none.
func byTS() watermark.Strategy[event] {
	return watermark.ForBoundedOutOfOrderness[event](0).WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, e.TS != 0 })
}

func write(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func execute(t testing.TB, env *weir.Environment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
}

// mixedFile is a file with good lines and one of each kind of bad line.
func mixedFile(t *testing.T, dir string) string {
	long := fmt.Sprintf(`{"id":5,"ts":5000,"name":"%s"}`, strings.Repeat("x", jsonl.DefaultMaxLineSize))
	return write(t, dir, "mixed.jsonl", strings.Join([]string{
		`{"id":1,"ts":1000}`,
		`{"id":2,"ts":2000,"name":"two"}`,
		`{"id":3 "ts":3000}`,        // 3: malformed
		`{"id":4}`,                  // 4: no timestamp
		``,                          // 5: blank
		" \t ",                      // 6: blank
		long,                        // 7: too long
		`{"id":6,"ts":6000}` + "\r", // 8: CRLF
		`{"id":7,"ts":7000}`,        // 9: last line, no line ending
	}, "\n"))
}

func TestDeadLettersEndToEnd(t *testing.T) {
	p := mixedFile(t, t.TempDir())
	env := weir.NewEnvironment(weir.Config{})
	s := weir.FromSource(env, "events", jsonl.Source[event](p), byTS())
	good := weir.Collect(s)
	dead := weir.Collect(weir.DeadLetters(s))
	execute(t, env)

	var got []string
	for _, r := range good.Records() {
		got = append(got, fmt.Sprintf("%d@%d", r.Value.ID, r.Timestamp))
	}
	if want := "1@1000 2@2000 6@6000 7@7000"; strings.Join(got, " ") != want {
		t.Fatalf("records %v, want %s", got, want)
	}
	if wms := good.Watermarks(0); len(wms) == 0 || wms[len(wms)-1] != watermark.Max {
		t.Fatalf("watermarks %v", wms)
	}

	ds := dead.Values()
	if len(ds) != 3 {
		t.Fatalf("%d dead letters: %+v", len(ds), ds)
	}
	slices.SortFunc(ds, func(a, b weir.DeadLetter) int { return strings.Compare(a.Reason, b.Reason) })
	// Decoding failure, found by the reader.
	d := ds[0]
	if !strings.HasPrefix(d.Reason, "jsonl: "+p+":3: invalid character") || d.Source != "events" || d.Split != 0 ||
		d.Position != 3 || string(d.Raw) != `{"id":3 "ts":3000}` || d.Value != nil {
		t.Errorf("malformed line: %+v", d)
	}
	// Over-long line, found by the reader.
	d = ds[1]
	size := len(`{"id":5,"ts":5000,"name":""}`) + jsonl.DefaultMaxLineSize
	if d.Reason != fmt.Sprintf("jsonl: %s:7: line of %d bytes is longer than the maximum of %d", p, size, jsonl.DefaultMaxLineSize) ||
		d.Position != 7 || len(d.Raw) != jsonl.RawPrefix || !strings.HasPrefix(string(d.Raw), `{"id":5,"ts":5000,"name":"xxx`) {
		t.Errorf("long line: %+v", d.Reason)
	}
	// No timestamp: decoded, then rejected by the strategy in the runtime,
	// which knows the split (the file index) but not the line.
	d = ds[2]
	if d.Reason != "record has no usable timestamp" || d.Split != 0 || d.Value != (event{ID: 4}) || d.Source != "events" {
		t.Errorf("no timestamp: %+v", d)
	}

	if n := env.Metrics().Sum("events", "deadLetters"); n != int64(len(ds)) {
		t.Errorf("deadLetters metric %d, want %d", n, len(ds))
	}
	// Nothing lost: every non-blank line is a record or a dead letter.
	if n := len(good.Values()) + len(ds); n != 7 {
		t.Errorf("%d records + dead letters, want 7 non-blank lines", n)
	}
}

// With Options.Timestamp the reader rejects records without a timestamp
// itself, so their dead letters name file and line too.
func TestDeadLettersWithReaderTimestamps(t *testing.T) {
	p := mixedFile(t, t.TempDir())
	env := weir.NewEnvironment(weir.Config{})
	opts := jsonl.Options[event]{Timestamp: func(e event) (int64, bool) { return e.TS, e.TS != 0 }}
	s := weir.FromSource(env, "events", jsonl.SourceWith(opts, p), watermark.ForBoundedOutOfOrderness[event](0))
	good := weir.Collect(s)
	dead := weir.Collect(weir.DeadLetters(s))
	execute(t, env)

	var got []string
	for _, r := range good.Records() {
		got = append(got, fmt.Sprintf("%d@%d", r.Value.ID, r.Timestamp))
	}
	if want := "1@1000 2@2000 6@6000 7@7000"; strings.Join(got, " ") != want {
		t.Fatalf("records %v, want %s", got, want)
	}
	var lines []int64
	for _, d := range dead.Values() {
		if !strings.HasPrefix(d.Reason, fmt.Sprintf("jsonl: %s:%d: ", p, d.Position)) {
			t.Errorf("reason %q does not name file and line %d", d.Reason, d.Position)
		}
		lines = append(lines, d.Position)
	}
	slices.Sort(lines)
	if fmt.Sprint(lines) != "[3 4 7]" {
		t.Fatalf("dead letters at lines %v, want [3 4 7]", lines)
	}
	if n := env.Metrics().Sum("events", "deadLetters"); n != 3 {
		t.Errorf("deadLetters metric %d, want 3", n)
	}
}

func TestFilesOverSubtasks(t *testing.T) {
	dir := t.TempDir()
	const files, perFile = 5, 300
	var paths []string
	for f := range files {
		var b strings.Builder
		for i := range perFile {
			fmt.Fprintf(&b, `{"id":%d,"ts":%d}`+"\n", f*perFile+i, 1+i)
			if i == 100 {
				fmt.Fprintf(&b, "garbage %d\n\n", f)
			}
		}
		paths = append(paths, write(t, dir, fmt.Sprintf("part-%d.jsonl", f), b.String()))
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	s := weir.FromSource(env, "events", jsonl.Source[event](paths...), byTS())
	good := weir.Collect(s)
	dead := weir.Collect(weir.DeadLetters(s))
	execute(t, env)

	var ids []int
	for _, v := range good.Values() {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	if len(ids) != files*perFile || ids[0] != 0 || ids[len(ids)-1] != files*perFile-1 || len(slices.Compact(ids)) != files*perFile {
		t.Fatalf("%d records, want each of %d once", len(ids), files*perFile)
	}
	var splits []int
	for _, d := range dead.Values() {
		if d.Position != 102 || !strings.HasPrefix(d.Reason, "jsonl: "+paths[d.Split]+":102: ") || string(d.Raw) != fmt.Sprintf("garbage %d", d.Split) {
			t.Errorf("dead letter %+v", d)
		}
		splits = append(splits, d.Split)
	}
	slices.Sort(splits)
	if fmt.Sprint(splits) != "[0 1 2 3 4]" {
		t.Fatalf("dead letters of splits %v", splits)
	}
	if n := env.Metrics().Sum("events", "deadLetters"); n != files {
		t.Errorf("deadLetters metric %d, want %d", n, files)
	}
	for sub := range 2 {
		if wms := good.Watermarks(sub); len(wms) == 0 || wms[len(wms)-1] != watermark.Max {
			t.Errorf("subtask %d: watermarks %v", sub, wms)
		}
	}
}

// lateCounter counts records at or behind the watermark they follow.
type lateCounter struct {
	runtime.Base[struct{}]
	wm   int64
	late *atomic.Int64
}

func (o *lateCounter) ProcessRecord(r weir.Record[event]) error {
	if r.Timestamp <= o.wm {
		o.late.Add(1)
	}
	return nil
}
func (o *lateCounter) ProcessWatermark(ts int64) error { o.wm = ts; return nil }
func (o *lateCounter) EndInput() error                 { return nil }

// Files whose event times overlap: by default a file not yet read holds
// the watermark, so nothing is late; with Ordered the second file is late.
func TestOverlappingFilesAreNotLate(t *testing.T) {
	dir := t.TempDir()
	var a, b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&a, `{"id":%d,"ts":%d}`+"\n", i, 1000+i)
		fmt.Fprintf(&b, `{"id":%d,"ts":%d}`+"\n", 200+i, 1+i)
	}
	paths := []string{write(t, dir, "a.jsonl", a.String()), write(t, dir, "b.jsonl", b.String())}
	// A watermark after every record, so that lateness does not depend on
	// when periodic watermarks happen to be emitted.
	strat := watermark.ForGenerator(func() watermark.Generator[event] {
		return watermark.Punctuated(func(_ event, ts int64) (int64, bool) { return ts - 1, true })
	}).WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, true })
	for _, ordered := range []bool{false, true} {
		env := weir.NewEnvironment(weir.Config{})
		var late atomic.Int64
		s := weir.FromSource(env, "events", jsonl.SourceWith(jsonl.Options[event]{Ordered: ordered}, paths...), strat)
		weir.Transform(s, "late", func() runtime.OneInputOperator[event, struct{}] { return &lateCounter{late: &late} })
		execute(t, env)
		if n := late.Load(); ordered != (n > 0) {
			t.Errorf("ordered %v: %d late records", ordered, n)
		}
	}
}
