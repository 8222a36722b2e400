package dashboard

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/asyncio"
	"github.com/weirproject/weir/internal/buildinfo"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Names of the metrics the dashboard reads that belong to packages it does
// not import (the Kafka connector's catch-up gauges, K15; the test checks
// they agree with package kafka's constants).
const (
	kafkaPartitionEnd      = "kafkaPartitionEndOffset"
	kafkaPartitionPosition = "kafkaPartitionPosition"
	kafkaPartitionCaughtUp = "kafkaPartitionCaughtUp"
	kafkaPartitionMillis   = "kafkaPartitionCatchUpMillis"
	kafkaTopicCaughtUp     = "kafkaTopicCaughtUp"
	kafkaTopicMillis       = "kafkaTopicCatchUpMillis"
)

// Metric names of the runtime and of operators that the dashboard reads.
const (
	mRecordsIn   = "recordsIn"
	mRecordsRead = "recordsRead"
	mRecordsOut  = "recordsOut"
	mDeadLetters = "deadLetters"
	mCpCompleted = "checkpointsCompleted"
	mCpAborted   = "checkpointsAborted"
	// agent operators (agent/doc.go I9)
	mAgentHeld     = "heldWatermarks"
	mAgentAge      = "oldestHeldWatermarkAgeMs"
	mAgentInFlight = "inFlightInputs"
	mAgentRunning  = "runningKeys"
	mAgentActions  = "actionsRun"
	mAgentErrors   = "actionErrors"
	// async operators
	mAsyncInFlight = "inFlight"
)

// sampleInput is everything a frame is made of, read at one moment.
type sampleInput struct {
	atMs        int64
	metrics     []runtime.Metric
	notes       []runtime.Note
	topology    runtime.Topology
	checkpoints []runtime.CheckpointStats
	// agents is agent.Status of the job's agent operators; subtasks that
	// did not answer in time are missing (their gauges still show).
	agents []agent.SubtaskStatus
	done   bool
	// weir is the binary's build information (buildinfo.Get).
	weir buildinfo.Info
}

// metricID identifies a metric across frames.
func metricID(m runtime.Metric) string {
	var b strings.Builder
	b.WriteString(m.Operator)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(m.Subtask))
	b.WriteByte(0)
	b.WriteString(m.Name)
	for _, l := range m.Labels {
		b.WriteByte(0)
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(l.Value)
	}
	return b.String()
}

// index groups a snapshot by operator, then metric name.
type index map[string]map[string][]runtime.Metric

func newIndex(ms []runtime.Metric) index {
	ix := index{}
	for _, m := range ms {
		byName := ix[m.Operator]
		if byName == nil {
			byName = map[string][]runtime.Metric{}
			ix[m.Operator] = byName
		}
		byName[m.Name] = append(byName[m.Name], m)
	}
	return ix
}

func (ix index) sum(op, name string) int64 {
	var s int64
	for _, m := range ix[op][name] {
		s += m.Value
	}
	return s
}

func (ix index) has(op, name string) bool { return len(ix[op][name]) > 0 }

func label(m runtime.Metric, name string) string {
	for _, l := range m.Labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// buildFrame makes frame seq from in; prev (nil for the first) gives the
// rates.
func buildFrame(seq int64, prev *Frame, in sampleInput) *Frame {
	f := &Frame{Seq: seq, AtMs: in.atMs, Done: in.done, Weir: in.weir, counters: map[string]int64{}}
	for _, m := range in.metrics {
		if !m.Gauge {
			f.counters[metricID(m)] = m.Value
		}
	}
	var secs float64
	if prev != nil && in.atMs > prev.AtMs {
		f.IntervalMs = in.atMs - prev.AtMs
		secs = float64(f.IntervalMs) / 1000
	}
	// delta is how much the counters named name of op grew since prev.
	delta := func(ms []runtime.Metric) int64 {
		if prev == nil {
			return 0
		}
		var d int64
		for _, m := range ms {
			if v, ok := prev.counters[metricID(m)]; ok {
				d += m.Value - v
			} else {
				d += m.Value
			}
		}
		return d
	}
	rate := func(ms []runtime.Metric) float64 {
		if secs == 0 {
			return 0
		}
		return round(float64(delta(ms))/secs, 2)
	}
	ix := newIndex(in.metrics)

	// The graph.
	chainedTo := map[string][]string{} // operator -> operators chained behind it
	names := map[string]int{}
	for _, op := range in.topology.Operators {
		names[op.Name]++
		for _, e := range op.Inputs {
			if e.Chained {
				chainedTo[e.From] = append(chainedTo[e.From], op.Name)
			}
		}
	}
	wmSeen := map[string]bool{}
	for _, op := range in.topology.Operators {
		o := OperatorFrame{OperatorInfo: op, Watermark: watermark.Min, SharedName: names[op.Name] > 1}
		ins := ix[op.Name][mRecordsIn]
		if op.Source {
			ins = ix[op.Name][mRecordsRead]
		}
		out := append([]runtime.Metric(nil), ix[op.Name][mRecordsOut]...)
		seen := map[string]bool{}
		for _, next := range chainedTo[op.Name] {
			if !seen[next] { // operators sharing a name share their counters
				seen[next] = true
				out = append(out, ix[next][mRecordsIn]...)
			}
		}
		for _, m := range ins {
			o.RecordsIn += m.Value
		}
		for _, m := range out {
			o.RecordsOut += m.Value
		}
		o.InPerSec, o.OutPerSec = rate(ins), rate(out)
		if secs > 0 {
			for _, m := range ix[op.Task][runtime.MetricBackPressuredMicros] {
				share := float64(delta([]runtime.Metric{m})) / (secs * 1e6)
				for _, g := range ix[op.Task][runtime.MetricBackPressured] {
					if g.Subtask == m.Subtask && g.Value == 1 && share == 0 {
						share = 1 // blocked through the whole interval
					}
				}
				o.BackPressure = max(o.BackPressure, round(min(share, 1), 3))
			}
		}
		first := true
		for _, m := range ix[op.Name][runtime.MetricWatermark] {
			if first || m.Value < o.Watermark {
				o.Watermark = m.Value
			}
			first = false
			if wmSeen[op.Name] {
				continue
			}
			w := WatermarkFrame{Operator: op.Name, Subtask: m.Subtask, Watermark: m.Value}
			if m.Value != watermark.Min && m.Value != watermark.Max {
				lag := f.AtMs - m.Value
				w.LagMs = &lag
			}
			f.Watermarks = append(f.Watermarks, w)
		}
		wmSeen[op.Name] = true
		f.Operators = append(f.Operators, o)
	}
	sort.SliceStable(f.Watermarks, func(i, j int) bool {
		a, b := f.Watermarks[i], f.Watermarks[j]
		if a.Operator != b.Operator {
			return opOrder(in.topology, a.Operator) < opOrder(in.topology, b.Operator)
		}
		return a.Subtask < b.Subtask
	})

	// Kafka catch-up, held watermarks, agents, late records: once per
	// operator name (operators sharing a name share their metrics).
	ops := make([]runtime.OperatorInfo, 0, len(in.topology.Operators))
	for _, op := range in.topology.Operators {
		if names[op.Name] > 0 {
			names[op.Name] = 0
			ops = append(ops, op)
		}
	}
	for _, op := range ops {
		parts := map[string]*PartitionFrame{}
		var keys []string
		get := func(m runtime.Metric) *PartitionFrame {
			k := label(m, "topic") + "\x00" + label(m, "partition")
			p := parts[k]
			if p == nil {
				p = &PartitionFrame{Operator: op.Name, Subtask: m.Subtask, Topic: label(m, "topic"),
					Partition: label(m, "partition"), End: -1, Position: -1, CatchUpMs: -1}
				parts[k] = p
				keys = append(keys, k)
			}
			return p
		}
		for _, m := range ix[op.Name][kafkaPartitionEnd] {
			get(m).End = m.Value
		}
		for _, m := range ix[op.Name][kafkaPartitionPosition] {
			get(m).Position = m.Value
		}
		for _, m := range ix[op.Name][kafkaPartitionCaughtUp] {
			get(m).CaughtUp = m.Value == 1
		}
		for _, m := range ix[op.Name][kafkaPartitionMillis] {
			get(m).CatchUpMs = m.Value
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := parts[keys[i]], parts[keys[j]]
			if a.Topic != b.Topic {
				return a.Topic < b.Topic
			}
			return len(a.Partition) < len(b.Partition) || len(a.Partition) == len(b.Partition) && a.Partition < b.Partition
		})
		for _, k := range keys {
			p := parts[k]
			switch {
			case p.CaughtUp:
				p.Progress = 1
			case p.End > 0 && p.Position >= 0:
				p.Progress = round(min(float64(p.Position)/float64(p.End), 1), 4)
			}
			f.Kafka = append(f.Kafka, *p)
		}
		topics := map[string]*TopicFrame{}
		var names []string
		for _, m := range ix[op.Name][kafkaTopicCaughtUp] {
			t := &TopicFrame{Operator: op.Name, Topic: label(m, "topic"), CaughtUp: m.Value == 1, CatchUpMs: -1}
			topics[t.Topic] = t
			names = append(names, t.Topic)
		}
		for _, m := range ix[op.Name][kafkaTopicMillis] {
			if t := topics[label(m, "topic")]; t != nil {
				t.CatchUpMs = m.Value
			}
		}
		sort.Strings(names)
		for _, n := range names {
			f.KafkaTopics = append(f.KafkaTopics, *topics[n])
		}
	}

	// Held watermarks, agents.
	status := map[string]agent.SubtaskStatus{}
	for _, s := range in.agents {
		status[s.Operator+"\x00"+strconv.Itoa(s.Subtask)] = s
	}
	for _, op := range ops {
		name := op.Name
		switch {
		case ix.has(name, mAgentActions):
			for _, m := range ix[name][mAgentHeld] {
				h := HeldFrame{Operator: name, Subtask: m.Subtask, Kind: "agent", Held: m.Value}
				h.OldestAgeMs = subtaskValue(ix[name][mAgentAge], m.Subtask)
				h.InFlight = subtaskValue(ix[name][mAgentInFlight], m.Subtask)
				if s, ok := status[name+"\x00"+strconv.Itoa(m.Subtask)]; ok {
					// The status is newer than the gauges (which the
					// operator sets when work finishes) and names the keys.
					h.Held, h.OldestAgeMs, h.InFlight = int64(s.HeldWatermarks), s.OldestHeldAgeMs, int64(s.InFlightInputs)
					h.Keys, h.KeyCount = s.OldestHeldBy, s.OldestHeldByCount
				}
				f.Held = append(f.Held, h)
			}
			a := AgentFrame{Operator: name, InFlight: ix.sum(name, mAgentInFlight), RunningKeys: ix.sum(name, mAgentRunning),
				ActionsRun: ix.sum(name, mAgentActions), ActionErrors: ix.sum(name, mAgentErrors),
				ActionsPerSec: rate(ix[name][mAgentActions])}
			if n := ix.sum(name, agent.MetricActionsTimed); n > 0 {
				a.TotalLatencyMs = round(float64(ix.sum(name, agent.MetricActionMicros))/float64(n)/1000, 3)
			}
			if n := delta(ix[name][agent.MetricActionsTimed]); n > 0 {
				a.MeanLatencyMs = round(float64(delta(ix[name][agent.MetricActionMicros]))/float64(n)/1000, 3)
			}
			a.P99LatencyMs = quantileMs(ix[name][agent.MetricActionLatency], "", "", 0.99)
			a.Models = calls(ix[name][agent.MetricModelCalls], ix[name][agent.MetricModelCallErrors], "model")
			for i := range a.Models {
				c, n := &a.Models[i], a.Models[i].Name
				c.Retries = sumLabel(ix[name][agent.MetricModelRetries], "model", n)
				c.RateLimited = sumLabel(ix[name][agent.MetricModelRateLimited], "model", n)
				c.InputTokens = sumLabel(ix[name][agent.MetricModelInputTokens], "model", n)
				c.OutputTokens = sumLabel(ix[name][agent.MetricModelOutputTokens], "model", n)
				c.P99LatencyMs = quantileMs(ix[name][agent.MetricModelLatency], "model", n, 0.99)
			}
			a.Tools = calls(ix[name][agent.MetricToolCalls], ix[name][agent.MetricToolCallErrors], "tool")
			for i := range a.Tools {
				a.Tools[i].P99LatencyMs = quantileMs(ix[name][agent.MetricToolLatency], "tool", a.Tools[i].Name, 0.99)
			}
			a.PendingApprovals = pendingApprovals(in.agents, name)
			f.Agents = append(f.Agents, a)
		case ix.has(name, asyncio.MetricOldestHeldSince):
			for _, m := range ix[name][asyncio.MetricHeldWatermarks] {
				h := HeldFrame{Operator: name, Subtask: m.Subtask, Kind: "async", Held: m.Value,
					InFlight: subtaskValue(ix[name][mAsyncInFlight], m.Subtask)}
				if since := subtaskValue(ix[name][asyncio.MetricOldestHeldSince], m.Subtask); since > 0 && m.Value > 0 {
					h.OldestAgeMs = max(f.AtMs-since, 0)
				}
				f.Held = append(f.Held, h)
			}
		}
	}

	// Checkpoints.
	f.Checkpoints = CheckpointsFrame{Completed: ix.sum("job", mCpCompleted), Failed: ix.sum("job", mCpAborted),
		History: in.checkpoints}
	if f.Checkpoints.History == nil {
		f.Checkpoints.History = []runtime.CheckpointStats{}
	}

	// Dead letters and late records.
	for _, op := range ops {
		if op.Source {
			n := ix.sum(op.Name, mDeadLetters)
			f.DeadLetters.Total += n
			f.DeadLetters.PerSource = append(f.DeadLetters.PerSource, Count{Name: op.Name, Count: n})
		}
		if ix.has(op.Name, window.CounterLateDropped) {
			l := LateFrame{Operator: op.Name, Dropped: ix.sum(op.Name, window.CounterLateDropped),
				ToSideOutput: ix.sum(op.Name, window.CounterLateOutput)}
			for _, m := range ix[op.Name][window.GaugeLastLateWatermark] {
				ts := subtaskValue(ix[op.Name][window.GaugeLastLateTimestamp], m.Subtask)
				if m.Value != watermark.Min && (l.LastWatermark == nil || m.Value > *l.LastWatermark) {
					wm := m.Value
					l.LastWatermark, l.LastTimestamp = &wm, &ts
				}
			}
			for _, m := range ix[op.Name][window.GaugeAllowedLateness] {
				l.AllowedLatenessMs = m.Value
			}
			f.Late = append(f.Late, l)
		}
	}
	f.DeadLetters.Latest = []runtime.Note{}
	for _, n := range in.notes {
		if n.Kind == runtime.NoteKindDeadLetter {
			f.DeadLetters.Latest = append(f.DeadLetters.Latest, n)
		}
	}
	if k := len(f.DeadLetters.Latest); k > maxLatest {
		f.DeadLetters.Latest = f.DeadLetters.Latest[k-maxLatest:]
	}
	return f
}

// maxLatest is how many of the latest dead letters a frame carries.
const maxLatest = 10

func opOrder(t runtime.Topology, name string) int {
	for i, op := range t.Operators {
		if op.Name == name {
			return i
		}
	}
	return len(t.Operators)
}

func subtaskValue(ms []runtime.Metric, subtask int) int64 {
	for _, m := range ms {
		if m.Subtask == subtask {
			return m.Value
		}
	}
	return 0
}

// calls sums call and error counters per value of label over subtasks.
func calls(cs, errs []runtime.Metric, lbl string) []Calls {
	by := map[string]*Calls{}
	var names []string
	for _, m := range cs {
		n := label(m, lbl)
		c := by[n]
		if c == nil {
			c = &Calls{Name: n}
			by[n] = c
			names = append(names, n)
		}
		c.Calls += m.Value
	}
	for _, m := range errs {
		if c := by[label(m, lbl)]; c != nil {
			c.Errors += m.Value
		}
	}
	sort.Strings(names)
	out := []Calls{}
	for _, n := range names {
		out = append(out, *by[n])
	}
	return out
}

// sumLabel sums the metrics whose label lbl is v.
func sumLabel(ms []runtime.Metric, lbl, v string) int64 {
	var s int64
	for _, m := range ms {
		if label(m, lbl) == v {
			s += m.Value
		}
	}
	return s
}

// quantileMs estimates quantile q of the histograms (over the subtasks;
// only those whose label lbl is v when lbl is set), in milliseconds: the
// upper bound of the bucket that holds it (histograms in seconds). 0 when
// there are no observations; the largest bound when q falls beyond it.
func quantileMs(ms []runtime.Metric, lbl, v string, q float64) float64 {
	var bounds []float64
	var cum []uint64
	var count uint64
	for _, m := range ms {
		h := m.Histogram
		if h == nil || (lbl != "" && label(m, lbl) != v) {
			continue
		}
		if bounds == nil {
			bounds, cum = h.Bounds, make([]uint64, len(h.Bounds))
		}
		for i := range cum {
			if i < len(h.Cumulative) {
				cum[i] += h.Cumulative[i]
			}
		}
		count += h.Count
	}
	if count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(count)))
	for i, c := range cum {
		if c >= rank {
			return round(bounds[i]*1000, 3)
		}
	}
	return round(bounds[len(bounds)-1]*1000, 3)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// pendingApprovals lists the pending waits of operator op's subtasks,
// soonest deadline first.
func pendingApprovals(status []agent.SubtaskStatus, op string) []PendingApproval {
	var out []PendingApproval
	for _, s := range status {
		if s.Operator != op {
			continue
		}
		for _, w := range s.PendingWaits {
			out = append(out, PendingApproval{Subtask: s.Subtask, PendingWait: w})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].DeadlineMs != out[j].DeadlineMs {
			return out[i].DeadlineMs < out[j].DeadlineMs
		}
		return out[i].Subtask < out[j].Subtask
	})
	return out
}
