// Package metrics exposes a job's counters, gauges and histograms (runtime.Metrics) to
// Prometheus. It is the only weir package that imports the Prometheus
// client, so the engine does not depend on a metrics library.
//
// Every runtime metric becomes weir_<name> (snake case) with labels
// operator and subtask, followed by the metric's own labels
// (runtime.Metric.Labels, such as topic and partition); counters are
// Prometheus counters, gauges gauges, histograms histograms (the _bucket,
// _sum and _count series).
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirproject/weir/runtime"
)

// Collector is a prometheus.Collector reading a job's metrics at scrape
// time.
type Collector struct {
	snapshot func() []runtime.Metric
}

// NewCollector returns a collector for m.
func NewCollector(m *runtime.Metrics) *Collector { return &Collector{snapshot: m.Snapshot} }

// NewCollectorOf returns a collector of the metrics snapshot returns at
// each scrape: several jobs' metrics in one (the tasks of a clustered
// job in one process), told apart by labels snapshot adds. Every metric of
// one name must carry the same label names, and no two the same values.
func NewCollectorOf(snapshot func() []runtime.Metric) *Collector {
	return &Collector{snapshot: snapshot}
}

// Describe implements prometheus.Collector; the set of metrics grows as
// operators register them, so it describes nothing up front (an unchecked
// collector).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	descs := map[string]*prometheus.Desc{}
	for _, m := range c.snapshot() {
		name := Name(m.Name)
		names := []string{"operator", "subtask"}
		values := []string{m.Operator, strconv.Itoa(m.Subtask)}
		key := name
		for _, l := range m.Labels {
			names = append(names, l.Name)
			values = append(values, l.Value)
			key += "\x00" + l.Name
		}
		d := descs[key]
		if d == nil {
			d = prometheus.NewDesc(name, "weir metric "+m.Name, names, nil)
			descs[key] = d
		}
		if h := m.Histogram; h != nil {
			buckets := make(map[float64]uint64, len(h.Bounds))
			for i, b := range h.Bounds {
				buckets[b] = h.Cumulative[i]
			}
			ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets, values...)
			continue
		}
		t := prometheus.CounterValue
		if m.Gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(d, t, float64(m.Value), values...)
	}
}

// Name turns a runtime metric name (camelCase) into weir_snake_case.
func Name(s string) string {
	var b strings.Builder
	b.WriteString("weir_")
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		if r == '-' || r == '.' || r == ' ' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Handler returns an HTTP handler serving m in the Prometheus text format.
func Handler(m *runtime.Metrics) http.Handler { return HandlerOf(m.Snapshot) }

// HandlerOf returns an HTTP handler serving what snapshot returns at each
// scrape in the Prometheus text format (see NewCollectorOf).
func HandlerOf(snapshot func() []runtime.Metric) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollectorOf(snapshot))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
