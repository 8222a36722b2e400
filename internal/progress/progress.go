// Package progress shows a running job's progress on stderr: the Kafka
// catch-up (records read against the end offsets taken at start, the rate,
// the time left), a checkpoint or savepoint that takes long, and named
// phases such as a restore.
//
// On a terminal it keeps one status line, rewritten in place; narrative
// lines written through Reporter.Wrap clear it first, so the two never mix.
// Elsewhere (a file, a pipe, a CI log) it prints plain lines, each
// complete, at a slower period.
//
// Guarantees:
//
//	P1. The figures come from the job's metrics (runtime.Metrics.Snapshot),
//	    read once per refresh: the package adds nothing per record. The
//	    catch-up figures are the Kafka source's partition gauges
//	    (kafka.MetricPartitionStartOffset, MetricPartitionPosition,
//	    MetricPartitionEndOffset, MetricPartitionCaughtUp), which the
//	    source updates once per fetched batch; a checkpoint's are
//	    the coordinator's gauges checkpointInProgress and
//	    checkpointTasksPending.
//	P2. Records read count offsets from a partition's start offset in this
//	    run to its position now; the total is the end offsets taken at start
//	    minus the start offsets. Partitions discovered after the start
//	    (caught up from birth, without an end offset) take no part. The
//	    catch-up is over when every partition has caught up. Offsets include
//	    transaction markers and compacted records, so both can exceed the
//	    records actually delivered by a little; the fraction and the time
//	    left are what the source still has to read.
//	P3. A checkpoint, savepoint or phase is shown only once it has lasted
//	    Options.LongAfter: short ones leave no trace.
//	P4. Nothing is written after Close returns; on a terminal Close clears
//	    the status line.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/runtime"
)

// Mode says how progress is written.
type Mode int

const (
	// Auto is Terminal when Options.Out is a character device (a terminal),
	// else Plain.
	Auto Mode = iota
	// Terminal keeps one status line rewritten in place.
	Terminal
	// Plain prints complete lines at Options.PlainInterval.
	Plain
	// Off writes nothing.
	Off
)

// Options configure a Reporter. Every field but Out has a default.
type Options struct {
	// Out receives the progress (the command's stderr). nil means Off.
	Out io.Writer
	// Mode; Auto (the zero value) detects a terminal.
	Mode Mode
	// Interval is how often a terminal's line is refreshed; 0 means 500ms.
	Interval time.Duration
	// PlainInterval is how often a plain line is printed; 0 means 10s.
	PlainInterval time.Duration
	// LongAfter is how long a checkpoint or phase lasts before it is shown
	// (P3); 0 means 1s.
	LongAfter time.Duration
	// Width is the longest terminal line; 0 means 100 characters.
	Width int
}

func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Mode = Off
	}
	if o.Mode == Auto {
		o.Mode = Plain
		if IsTerminal(o.Out) {
			o.Mode = Terminal
		}
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.PlainInterval <= 0 {
		o.PlainInterval = 10 * time.Second
	}
	if o.LongAfter <= 0 {
		o.LongAfter = time.Second
	}
	if o.Width <= 0 {
		o.Width = 100
	}
	return o
}

// IsTerminal reports whether w is a terminal: an *os.File that is a
// character device (no dependency beyond the standard library; /dev/null
// also counts, which only means a status line nobody reads).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Metric names this package reads (P1). The Kafka ones are the source's
// (package connector/kafka): they are repeated here so that the package
// does not import the connector.
const (
	metricPosition   = "kafkaPartitionPosition"
	metricStart      = "kafkaPartitionStartOffset"
	metricEndOffset  = "kafkaPartitionEndOffset"
	metricCaughtUp   = "kafkaPartitionCaughtUp"
	metricInProgress = "checkpointInProgress"
	metricPending    = "checkpointTasksPending"
)

// Reporter shows one job's progress. Its methods are safe for concurrent
// use.
type Reporter struct {
	o       Options
	stop    chan struct{}
	stopped chan struct{}

	mu struct {
		sync.Mutex
		closed    bool
		metrics   func() []runtime.Metric
		shown     bool // a terminal status line is on screen
		lastPlain time.Time
		catch     catchUp
		cp        checkpointWatch
		phases    []*phase
	}
}

// New starts a reporter; Watch gives it a job's metrics, Close stops it.
func New(o Options) *Reporter {
	r := &Reporter{o: o.withDefaults(), stop: make(chan struct{}), stopped: make(chan struct{})}
	r.mu.catch.parts = map[partKey]*partState{}
	r.mu.lastPlain = time.Now()
	if r.o.Mode == Off {
		close(r.stopped)
		return r
	}
	go r.loop()
	return r
}

// Watch makes the reporter follow a job's metrics (typically
// runtime.Metrics.Snapshot, or weir.Environment.Metrics().Snapshot, which
// exists before the job starts). Before Watch only phases are shown.
func (r *Reporter) Watch(metrics func() []runtime.Metric) {
	r.mu.Lock()
	r.mu.metrics = metrics
	r.mu.Unlock()
}

func (r *Reporter) loop() {
	defer close(r.stopped)
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.refresh(now)
		}
	}
}

// refresh reads the metrics and shows the state at now.
func (r *Reporter) refresh(now time.Time) {
	r.mu.Lock()
	metrics := r.mu.metrics
	r.mu.Unlock()
	var snap []runtime.Metric
	if metrics != nil {
		// Outside the lock: a snapshot takes the metrics' own lock.
		snap = metrics()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return
	}
	events := r.mu.catch.update(now, snap)
	events = append(events, r.mu.cp.update(now, snap, r.o.LongAfter)...)
	line := r.lineLocked(now)
	switch r.o.Mode {
	case Terminal:
		r.clearLocked()
		for _, e := range events {
			fmt.Fprintln(r.o.Out, e)
		}
		if line != "" {
			if len(line) > r.o.Width {
				line = line[:r.o.Width-1] + "…"
			}
			fmt.Fprintf(r.o.Out, "\r%s\x1b[K", line)
			r.mu.shown = true
		}
	case Plain:
		for _, e := range events {
			fmt.Fprintln(r.o.Out, e)
		}
		if line != "" && now.Sub(r.mu.lastPlain) >= r.o.PlainInterval {
			fmt.Fprintln(r.o.Out, "progress: "+line)
			r.mu.lastPlain = now
		}
	}
}

// lineLocked is the status: every part that has something to say.
func (r *Reporter) lineLocked(now time.Time) string {
	var parts []string
	if s := r.mu.catch.status(); s != "" {
		parts = append(parts, s)
	}
	if s := r.mu.cp.status(now, r.o.LongAfter); s != "" {
		parts = append(parts, s)
	}
	for _, p := range r.mu.phases {
		if d := now.Sub(p.start); d >= r.o.LongAfter {
			parts = append(parts, fmt.Sprintf("%s: %s", p.what, roundDuration(d)))
		}
	}
	return strings.Join(parts, " | ")
}

// clearLocked removes the terminal status line.
func (r *Reporter) clearLocked() {
	if r.mu.shown {
		fmt.Fprint(r.o.Out, "\r\x1b[K")
		r.mu.shown = false
	}
}

// Wrap returns a writer for the command's narrative: each write first
// clears the terminal status line (the next refresh draws it again), so
// narrative and status never share a line.
func (r *Reporter) Wrap(w io.Writer) io.Writer { return wrapped{r: r, w: w} }

type wrapped struct {
	r *Reporter
	w io.Writer
}

func (w wrapped) Write(b []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.r.o.Mode == Terminal {
		w.r.clearLocked()
	}
	return w.w.Write(b)
}

type phase struct {
	what  string
	start time.Time
}

// Phase shows what (such as "restoring from /path") while it lasts, once
// it has lasted LongAfter (P3); the returned function ends it and, if it
// was shown, prints how long it took.
func (r *Reporter) Phase(what string) (end func()) {
	p := &phase{what: what, start: time.Now()}
	r.mu.Lock()
	r.mu.phases = append(r.mu.phases, p)
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, q := range r.mu.phases {
				if q == p {
					r.mu.phases = append(r.mu.phases[:i], r.mu.phases[i+1:]...)
					break
				}
			}
			if d := time.Since(p.start); d >= r.o.LongAfter && !r.mu.closed && r.o.Mode != Off {
				r.clearLocked()
				fmt.Fprintf(r.o.Out, "%s: done in %s\n", what, roundDuration(d))
			}
		})
	}
}

// Close stops the reporter and clears its status line (P4).
func (r *Reporter) Close() {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return
	}
	r.mu.closed = true
	r.clearLocked()
	r.mu.Unlock()
	if r.o.Mode != Off {
		close(r.stop)
	}
	<-r.stopped
}

// partKey names one partition of one Kafka source operator.
type partKey struct {
	op, topic, partition string
}

type partState struct {
	start, pos, end int64 // -1: not known yet
	caughtUp        bool
}

// sample is the records read at a time, for the rate.
type sample struct {
	at   time.Time
	read int64
}

// catchUp follows the Kafka sources' catch-up (P2).
type catchUp struct {
	parts map[partKey]*partState
	// samples of the last rateWindow, oldest first.
	samples    []sample
	read, left int64
	known      int // partitions with a start and an end
	born       int // partitions discovered after the start
	firstAt    time.Time
	done       bool
	rate       float64
}

// rateWindow is the span the rate is measured over.
const rateWindow = 5 * time.Second

// update reads the partition gauges and returns the lines to print once
// (the end of the catch-up).
func (c *catchUp) update(now time.Time, snap []runtime.Metric) []string {
	seen := false
	for _, m := range snap {
		switch m.Name {
		case metricPosition, metricStart, metricEndOffset, metricCaughtUp:
		default:
			continue
		}
		k := partKey{op: m.Operator}
		for _, l := range m.Labels {
			switch l.Name {
			case "topic":
				k.topic = l.Value
			case "partition":
				k.partition = l.Value
			}
		}
		p := c.parts[k]
		if p == nil {
			p = &partState{start: -1, pos: -1, end: -1}
			c.parts[k] = p
		}
		seen = true
		switch m.Name {
		case metricEndOffset:
			p.end = m.Value
		case metricStart:
			p.start = m.Value
		case metricPosition:
			p.pos = m.Value
		case metricCaughtUp:
			p.caughtUp = m.Value == 1
		}
	}
	if !seen || c.done {
		return nil
	}
	if c.firstAt.IsZero() {
		c.firstAt = now
	}
	c.read, c.left, c.known = 0, 0, 0
	all := true
	c.born = 0
	for _, p := range c.parts {
		if p.caughtUp && p.end < 0 {
			c.born++ // discovered after the start: no catch-up
			continue
		}
		if !p.caughtUp {
			all = false
		}
		if p.start < 0 || p.end < 0 || p.pos < 0 {
			continue
		}
		c.known++
		// Past the end offset the source reads on: that is no longer
		// catch-up.
		c.read += max(min(p.pos, p.end)-p.start, 0)
		c.left += max(p.end-p.pos, 0)
	}
	c.samples = append(c.samples, sample{at: now, read: c.read})
	for len(c.samples) > 2 && now.Sub(c.samples[1].at) >= rateWindow {
		c.samples = c.samples[1:]
	}
	if s0 := c.samples[0]; now.Sub(s0.at) > 0 {
		c.rate = float64(c.read-s0.read) / now.Sub(s0.at).Seconds()
	}
	if all {
		c.done = true
		return []string{fmt.Sprintf("kafka catch-up: %s records of %d partitions read up to the end offsets taken at start, in %s",
			count(c.read), c.known, roundDuration(now.Sub(c.firstAt)))}
	}
	return nil
}

// status is the catch-up part of the line, "" when there is none.
func (c *catchUp) status() string {
	if c.done || c.known == 0 {
		return ""
	}
	total := c.read + c.left
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(c.read) / float64(total)
	}
	s := fmt.Sprintf("catch-up %s/%s records (%.1f%%)", count(c.read), count(total), pct)
	if n := len(c.parts) - c.born; c.known < n {
		s += fmt.Sprintf(" of %d/%d partitions", c.known, n)
	}
	if c.rate > 0 {
		s += fmt.Sprintf(", %s/s, %s left", count(int64(c.rate)), roundDuration(time.Duration(float64(c.left)/c.rate*float64(time.Second))))
	}
	return s
}

// checkpointWatch follows the checkpoint in progress.
type checkpointWatch struct {
	id, pending int64
	since       time.Time
	shown       bool
}

func (w *checkpointWatch) update(now time.Time, snap []runtime.Metric, long time.Duration) []string {
	var id, pending int64
	for _, m := range snap {
		if m.Operator != "job" {
			continue
		}
		switch m.Name {
		case metricInProgress:
			id = m.Value
		case metricPending:
			pending = m.Value
		}
	}
	var out []string
	if id != w.id {
		if w.shown {
			out = append(out, fmt.Sprintf("checkpoint %d: over after at least %s", w.id, roundDuration(now.Sub(w.since))))
		}
		w.id, w.since, w.shown = id, now, false
	}
	w.pending = pending
	if w.id != 0 && now.Sub(w.since) >= long {
		w.shown = true
	}
	return out
}

func (w *checkpointWatch) status(now time.Time, long time.Duration) string {
	if w.id == 0 || now.Sub(w.since) < long {
		return ""
	}
	if w.pending > 0 {
		return fmt.Sprintf("checkpoint %d: %s, %d tasks to acknowledge", w.id, roundDuration(now.Sub(w.since)), w.pending)
	}
	return fmt.Sprintf("checkpoint %d: %s, writing", w.id, roundDuration(now.Sub(w.since)))
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// roundDuration keeps durations short: 950ms, 12.3s, 4m05s.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
