package runtime

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Counter is a monotonically increasing count, safe for concurrent use.
type Counter struct{ v atomic.Int64 }

// Add adds n.
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Value returns the count.
func (c *Counter) Value() int64 { return c.v.Load() }

// Gauge is a value that goes up and down, safe for concurrent use.
type Gauge struct{ v atomic.Int64 }

// Set sets the value.
func (g *Gauge) Set(n int64) { g.v.Store(n) }

// Value returns the value.
func (g *Gauge) Value() int64 { return g.v.Load() }

// Label is one dimension of a metric beyond its operator and subtask, such
// as the topic and partition of a Kafka source's per-partition gauges.
type Label struct {
	Name, Value string
}

// Metric is one named value of one operator subtask.
type Metric struct {
	Operator string
	Subtask  int
	Name     string
	Value    int64
	Gauge    bool
	// Labels are the metric's further dimensions, in the order they were
	// given (nil for most metrics). Every metric of one Name carries the
	// same label names.
	Labels []Label
	// Histogram is set for a histogram (Value is then its count).
	Histogram *HistogramValue
}

type metricKey struct {
	op      string
	subtask int
	name    string
	labels  string // encodeLabels of the labels, "" without
}

// encodeLabels joins labels into a map key; names and values are kept
// apart by bytes that label text does not contain.
func encodeLabels(ls []Label) string {
	if len(ls) == 0 {
		return ""
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Name)
		b.WriteByte(0)
		b.WriteString(l.Value)
		b.WriteByte(1)
	}
	return b.String()
}

// Metrics holds the counters, gauges and histograms of a job. The Prometheus adapter
// (package metrics) reads them through Snapshot.
type Metrics struct {
	mu         sync.Mutex
	counters   map[metricKey]*Counter
	gauges     map[metricKey]*Gauge
	histograms map[metricKey]*Histogram
	labels     map[metricKey][]Label // of labelled counters, gauges and histograms
	notes      noteRing
}

func (m *Metrics) counter(op string, sub int, name string, labels ...Label) *Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counters == nil {
		m.counters = map[metricKey]*Counter{}
	}
	if m.labels == nil {
		m.labels = map[metricKey][]Label{}
	}
	k := metricKey{op, sub, name, encodeLabels(labels)}
	c := m.counters[k]
	if c == nil {
		c = &Counter{}
		m.counters[k] = c
		if len(labels) > 0 {
			m.labels[k] = append([]Label(nil), labels...)
		}
	}
	return c
}

func (m *Metrics) gauge(op string, sub int, name string, labels ...Label) *Gauge {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gauges == nil {
		m.gauges = map[metricKey]*Gauge{}
	}
	if m.labels == nil {
		m.labels = map[metricKey][]Label{}
	}
	k := metricKey{op, sub, name, encodeLabels(labels)}
	g := m.gauges[k]
	if g == nil {
		g = &Gauge{}
		m.gauges[k] = g
		if len(labels) > 0 {
			m.labels[k] = append([]Label(nil), labels...)
		}
	}
	return g
}

// Snapshot returns every metric, sorted by operator, subtask, name and
// labels.
func (m *Metrics) Snapshot() []Metric {
	m.mu.Lock()
	out := make([]Metric, 0, len(m.counters)+len(m.gauges))
	for k, c := range m.counters {
		out = append(out, Metric{Operator: k.op, Subtask: k.subtask, Name: k.name, Value: c.Value(), Labels: m.labels[k]})
	}
	for k, g := range m.gauges {
		out = append(out, Metric{Operator: k.op, Subtask: k.subtask, Name: k.name, Value: g.Value(), Gauge: true,
			Labels: m.labels[k]})
	}
	for k, h := range m.histograms {
		v := h.value()
		out = append(out, Metric{Operator: k.op, Subtask: k.subtask, Name: k.name, Value: int64(v.Count),
			Labels: m.labels[k], Histogram: v})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Operator != b.Operator {
			return a.Operator < b.Operator
		}
		if a.Subtask != b.Subtask {
			return a.Subtask < b.Subtask
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return encodeLabels(a.Labels) < encodeLabels(b.Labels)
	})
	return out
}

// Sum returns the sum of the named metric of an operator over its subtasks.
func (m *Metrics) Sum(op, name string) int64 {
	var s int64
	for _, x := range m.Snapshot() {
		if x.Operator == op && x.Name == name {
			s += x.Value
		}
	}
	return s
}

// Histogram counts observations (int64, in the unit its name says) into
// fixed buckets, safe for concurrent use: an observation is a short scan
// of the bounds and three atomic adds, no lock.
type Histogram struct {
	bounds []int64        // upper bounds, inclusive, ascending
	counts []atomic.Int64 // per bucket (not cumulative); the last is +Inf
	sum    atomic.Int64
	count  atomic.Int64
	scale  float64
}

// Observe counts v.
func (h *Histogram) Observe(v int64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
	h.count.Add(1)
}

// Count returns the number of observations.
func (h *Histogram) Count() int64 { return h.count.Load() }

// HistogramValue is a histogram as read at one moment, scaled to the unit
// it is exported in (Prometheus' cumulative buckets).
type HistogramValue struct {
	// Bounds are the buckets' upper bounds (inclusive), ascending, and
	// Cumulative[i] the observations at or below Bounds[i].
	Bounds     []float64
	Cumulative []uint64
	Sum        float64
	Count      uint64
}

func (h *Histogram) value() *HistogramValue {
	v := &HistogramValue{Bounds: make([]float64, len(h.bounds)), Cumulative: make([]uint64, len(h.bounds))}
	var c uint64
	for i, b := range h.bounds {
		c += uint64(h.counts[i].Load())
		v.Bounds[i], v.Cumulative[i] = float64(b)*h.scale, c
	}
	// Count and sum read after the buckets: a concurrent observation may
	// be in one and not the others for one scrape; Count is at least the
	// last bucket's.
	v.Count = max(uint64(h.count.Load()), c)
	v.Sum = float64(h.sum.Load()) * h.scale
	return v
}

func (m *Metrics) histogram(op string, sub int, name string, scale float64, bounds []int64, labels ...Label) *Histogram {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.histograms == nil {
		m.histograms = map[metricKey]*Histogram{}
	}
	if m.labels == nil {
		m.labels = map[metricKey][]Label{}
	}
	k := metricKey{op, sub, name, encodeLabels(labels)}
	h := m.histograms[k]
	if h == nil {
		h = &Histogram{bounds: append([]int64(nil), bounds...), counts: make([]atomic.Int64, len(bounds)+1), scale: scale}
		m.histograms[k] = h
		if len(labels) > 0 {
			m.labels[k] = append([]Label(nil), labels...)
		}
	}
	return h
}
