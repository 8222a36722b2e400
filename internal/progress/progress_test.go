package progress

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/runtime"
)

func part(name, topic string, p int, v int64) runtime.Metric {
	return runtime.Metric{Operator: "events", Name: name, Value: v, Gauge: true,
		Labels: []runtime.Label{{Name: "topic", Value: topic}, {Name: "partition", Value: strconv.Itoa(p)}}}
}

func jobGauge(name string, v int64) runtime.Metric {
	return runtime.Metric{Operator: "job", Name: name, Value: v, Gauge: true}
}

// partition returns the gauges of one partition: start, position, end and
// caught-up (when position has reached end).
func partition(topic string, p int, start, pos, end int64) []runtime.Metric {
	up := int64(0)
	if end >= 0 && pos >= end {
		up = 1
	}
	return []runtime.Metric{part(metricStart, topic, p, start), part(metricPosition, topic, p, pos),
		part(metricEndOffset, topic, p, end), part(metricCaughtUp, topic, p, up)}
}

func concat(ms ...[]runtime.Metric) []runtime.Metric {
	var out []runtime.Metric
	for _, m := range ms {
		out = append(out, m...)
	}
	return out
}

// P2: records read count from the start offsets; the total is the end
// offsets minus the start offsets; partitions born after the start take
// no part; the end of the catch-up is told once.
func TestCatchUpFigures(t *testing.T) {
	var c catchUp
	c.parts = map[partKey]*partState{}
	t0 := time.Unix(1000, 0)
	born := []runtime.Metric{part(metricStart, "c", 0, -1), part(metricPosition, "c", 0, 0),
		part(metricEndOffset, "c", 0, -1), part(metricCaughtUp, "c", 0, 1)}
	// A restored partition starts at 100, a fresh one at 0 whose end offset
	// is not known yet.
	ev := c.update(t0, concat(partition("a", 0, 100, 150, 1100), partition("b", 0, 0, -1, -1), born))
	if len(ev) != 0 {
		t.Fatalf("events %q", ev)
	}
	if got := c.status(); got != "catch-up 50/1,000 records (5.0%) of 1/2 partitions" {
		t.Fatalf("status %q", got)
	}
	ev = c.update(t0.Add(2*time.Second), concat(partition("a", 0, 100, 600, 1100), partition("b", 0, 0, 400, 1000), born))
	if len(ev) != 0 {
		t.Fatalf("events %q", ev)
	}
	// read 500 + 400 of 1000 + 1000; 850 more records in 2s: 425/s, 1100 left.
	if got, want := c.status(), "catch-up 900/2,000 records (45.0%), 425/s, 2.6s left"; got != want {
		t.Fatalf("status %q, want %q", got, want)
	}
	ev = c.update(t0.Add(4*time.Second), concat(partition("a", 0, 100, 1100, 1100), partition("b", 0, 0, 1040, 1000), born))
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "kafka catch-up: 2,000 records of 2 partitions") {
		t.Fatalf("events %q", ev)
	}
	if got := c.status(); got != "" {
		t.Fatalf("status after the catch-up %q", got)
	}
	if ev := c.update(t0.Add(5*time.Second), partition("a", 0, 100, 1200, 1100)); len(ev) != 0 {
		t.Fatalf("the end was told twice: %q", ev)
	}
}

// P3: a checkpoint is shown only once it has lasted LongAfter, and its end
// is told only if it was shown.
func TestCheckpointShownWhenLong(t *testing.T) {
	var w checkpointWatch
	t0 := time.Unix(1000, 0)
	long := time.Second
	step := func(d time.Duration, id, pending int64) []string {
		return w.update(t0.Add(d), []runtime.Metric{jobGauge(metricInProgress, id), jobGauge(metricPending, pending)}, long)
	}
	step(0, 3, 4)
	if s := w.status(t0.Add(500*time.Millisecond), long); s != "" {
		t.Fatalf("a short checkpoint is shown: %q", s)
	}
	if ev := step(600*time.Millisecond, 0, 0); len(ev) != 0 {
		t.Fatalf("the end of a short checkpoint is told: %q", ev)
	}
	step(time.Second, 4, 4)
	step(2500*time.Millisecond, 4, 1)
	if s := w.status(t0.Add(2500*time.Millisecond), long); s != "checkpoint 4: 1.5s, 1 tasks to acknowledge" {
		t.Fatalf("status %q", s)
	}
	step(3*time.Second, 4, 0)
	if s := w.status(t0.Add(3*time.Second), long); s != "checkpoint 4: 2s, writing" {
		t.Fatalf("status %q", s)
	}
	if ev := step(4*time.Second, 0, 0); len(ev) != 1 || !strings.HasPrefix(ev[0], "checkpoint 4: over") {
		t.Fatalf("events %q", ev)
	}
}

// syncBuffer is a bytes.Buffer safe for the reporter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// On a terminal the status line is rewritten in place and a narrative line
// clears it first; Close clears it (P4).
func TestTerminalLine(t *testing.T) {
	var out syncBuffer
	var narrative bytes.Buffer
	snap := partition("a", 0, 0, 0, 10)
	r := New(Options{Out: &out, Mode: Terminal, Interval: time.Hour})
	r.Watch(func() []runtime.Metric { return snap })
	r.refresh(time.Unix(1000, 0))
	if got := out.String(); got != "\rcatch-up 0/10 records (0.0%)\x1b[K" {
		t.Fatalf("terminal %q", got)
	}
	if _, err := r.Wrap(&narrative).Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasSuffix(got, "\x1b[K\r\x1b[K") || narrative.String() != "hello\n" {
		t.Fatalf("terminal %q, narrative %q: the line was not cleared before the narrative", got, narrative.String())
	}
	r.refresh(time.Unix(1001, 0))
	r.Close()
	if got := out.String(); !strings.HasSuffix(got, "\r\x1b[K") {
		t.Fatalf("Close left the line: %q", got)
	}
	n := len(out.String())
	r.refresh(time.Unix(1002, 0))
	if len(out.String()) != n {
		t.Fatal("written after Close")
	}
}

// Plain output prints complete lines, at most one status line per
// PlainInterval, and never a carriage return.
func TestPlainLines(t *testing.T) {
	var out syncBuffer
	snap := partition("a", 0, 0, 0, 10)
	r := New(Options{Out: &out, Mode: Plain, Interval: time.Hour, PlainInterval: time.Minute})
	r.Watch(func() []runtime.Metric { return snap })
	defer r.Close()
	base := time.Now()
	r.refresh(base.Add(time.Second))
	if out.String() != "" {
		t.Fatalf("printed before the plain interval: %q", out.String())
	}
	r.refresh(base.Add(2 * time.Minute))
	r.refresh(base.Add(2*time.Minute + time.Second))
	snap = partition("a", 0, 0, 10, 10)
	r.refresh(base.Add(2*time.Minute + 2*time.Second))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "progress: catch-up 0/10 records (0.0%)" || !strings.HasPrefix(lines[1], "kafka catch-up: 10 records") {
		t.Fatalf("lines %q", lines)
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Fatalf("control characters in plain output: %q", out.String())
	}
}

// A phase is shown once it lasts LongAfter, and its end then told.
func TestPhase(t *testing.T) {
	var out syncBuffer
	r := New(Options{Out: &out, Mode: Plain, Interval: time.Hour, PlainInterval: time.Nanosecond, LongAfter: time.Nanosecond})
	defer r.Close()
	end := r.Phase("restoring from /x")
	time.Sleep(time.Millisecond)
	r.refresh(time.Now().Add(time.Hour))
	end()
	end()
	got := out.String()
	if !strings.HasPrefix(got, "progress: restoring from /x: ") || strings.Count(got, "restoring from /x: done in ") != 1 {
		t.Fatalf("output %q", got)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -5: "-5"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
