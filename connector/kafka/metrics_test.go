package kafka

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// gaugeOf finds a labelled gauge of operator op in a metrics snapshot.
func gaugeOf(m *runtime.Metrics, op, name string, labels ...string) (value int64, subtask int, ok bool) {
	for _, x := range m.Snapshot() {
		if x.Operator != op || x.Name != name || len(x.Labels) != len(labels)/2 {
			continue
		}
		match := true
		for i, l := range x.Labels {
			if l.Name != labels[2*i] || l.Value != labels[2*i+1] {
				match = false
			}
		}
		if match {
			return x.Value, x.Subtask, true
		}
	}
	return 0, 0, false
}

// K15: the catch-up state is in the job's metrics, per partition and per
// topic, and reaches Prometheus with topic and partition labels. The
// partitions: slow/0 with three records (subtask 0), tx/0 with a committed
// transaction, whose marker follows the last record (subtask 1, held back
// by BeforeStart), and tx/1, empty (subtask 0).
func TestCatchUpMetrics(t *testing.T) {
	b := startBroker(t, map[string]int32{"slow": 1, "tx": 2})
	produce(t, client(t, b), rec("slow", 0, 1, "a"), rec("slow", 0, 2, "b"), rec("slow", 0, 3, "c"))
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, rec("tx", 0, int64(i), fmt.Sprint("t", i)))
	}
	inTxn(t, txnClient(t, b, "metrics-producer"), true, recs...)

	gate := make(chan struct{})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"slow", "tx"},
		BeforeStart: holdUntil(gate, 1)}, String())
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: 10 * time.Millisecond, Logger: quiet})
	collectTo(weir.FromSource(env, "src", src, watermark.ForMonotonous[string]()))
	_, stop := weirtest.Start(t, env)
	m := env.Metrics()

	type want struct {
		name    string
		labels  []string
		value   int64
		subtask int
	}
	check := func(when string, ws []want) {
		t.Helper()
		for _, w := range ws {
			v, sub, ok := gaugeOf(m, "src", w.name, w.labels...)
			if !ok {
				t.Errorf("%s: no gauge %s%v", when, w.name, w.labels)
				continue
			}
			if v != w.value || sub != w.subtask {
				t.Errorf("%s: %s%v = %d on subtask %d, want %d on subtask %d", when, w.name, w.labels, v, sub, w.value, w.subtask)
			}
		}
	}
	p := func(topic, partition string) []string { return []string{"topic", topic, "partition", partition} }
	tp := func(topic string) []string { return []string{"topic", topic} }
	caught := func(name string, labels ...string) func() bool {
		return func() bool { v, _, ok := gaugeOf(m, "src", name, labels...); return ok && v == 1 }
	}

	weirtest.Eventually(t, "subtask 0's partitions to catch up", func() bool {
		return caught(MetricPartitionCaughtUp, p("slow", "0")...)() && caught(MetricPartitionCaughtUp, p("tx", "1")...)()
	})
	weirtest.Eventually(t, "the topic slow to catch up", caught(MetricTopicCaughtUp, tp("slow")...))
	check("before tx/0 starts", []want{
		{MetricPartitionStartOffset, p("slow", "0"), 0, 0},
		{MetricPartitionEndOffset, p("slow", "0"), 3, 0},
		{MetricPartitionPosition, p("slow", "0"), 3, 0},
		{MetricPartitionCaughtUp, p("slow", "0"), 1, 0},
		{MetricPartitionLag, p("slow", "0"), 0, 0},
		{MetricPartitionEndOffset, p("tx", "1"), 0, 0}, // empty: caught up at once
		{MetricPartitionPosition, p("tx", "1"), 0, 0},
		{MetricPartitionCaughtUp, p("tx", "1"), 1, 0},
		{MetricPartitionStartOffset, p("tx", "0"), -1, 1},
		{MetricPartitionEndOffset, p("tx", "0"), -1, 1}, // no snapshot yet
		{MetricPartitionLag, p("tx", "0"), -1, 1},
		{MetricPartitionPosition, p("tx", "0"), -1, 1},
		{MetricPartitionCaughtUp, p("tx", "0"), 0, 1},
		{MetricTopicCaughtUp, tp("slow"), 1, 0},
		{MetricTopicCaughtUp, tp("tx"), 0, 1}, // published by the owner of tx/0
		{MetricTopicCatchUpMillis, tp("tx"), -1, 1},
		{MetricPartitionCatchUpMillis, p("tx", "0"), -1, 1},
	})
	for _, part := range [][]string{p("slow", "0"), p("tx", "1")} {
		if ms, _, _ := gaugeOf(m, "src", MetricPartitionCatchUpMillis, part...); ms < 0 {
			t.Errorf("catch-up time of %v = %d, want >= 0", part, ms)
		}
	}
	if ms, _, _ := gaugeOf(m, "src", MetricTopicCatchUpMillis, tp("slow")...); ms < 0 {
		t.Errorf("catch-up time of slow = %d, want >= 0", ms)
	}

	close(gate)
	weirtest.Eventually(t, "the topic tx to catch up", caught(MetricTopicCaughtUp, tp("tx")...))
	check("after", []want{
		// Five records and the commit marker: the position passes the
		// marker, which carries no record.
		{MetricPartitionStartOffset, p("tx", "0"), 0, 1},
		{MetricPartitionEndOffset, p("tx", "0"), 6, 1},
		{MetricPartitionPosition, p("tx", "0"), 6, 1},
		{MetricPartitionLag, p("tx", "0"), 0, 1},
		{MetricPartitionCaughtUp, p("tx", "0"), 1, 1},
		{MetricTopicCaughtUp, tp("tx"), 1, 1},
	})
	if ms, _, _ := gaugeOf(m, "src", MetricTopicCatchUpMillis, tp("tx")...); ms < 0 {
		t.Errorf("catch-up time of tx = %d, want >= 0", ms)
	}
	if ms, _, _ := gaugeOf(m, "src", MetricPartitionCatchUpMillis, p("tx", "0")...); ms < 0 {
		t.Errorf("catch-up time of tx/0 = %d, want >= 0", ms)
	}
	// Exactly one series per topic, whichever subtasks read it.
	n := 0
	for _, x := range m.Snapshot() {
		if x.Name == MetricTopicCaughtUp {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d %s series, want 2 (one per topic)", n, MetricTopicCaughtUp)
	}
	stop()

	srv := httptest.NewServer(metrics.Handler(m))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, line := range []string{
		`weir_kafka_partition_end_offset{operator="src",partition="0",subtask="1",topic="tx"} 6`,
		`weir_kafka_partition_position{operator="src",partition="1",subtask="0",topic="tx"} 0`,
		`weir_kafka_partition_caught_up{operator="src",partition="0",subtask="0",topic="slow"} 1`,
		`weir_kafka_topic_caught_up{operator="src",subtask="1",topic="tx"} 1`,
		`# TYPE weir_kafka_topic_catch_up_millis gauge`,
	} {
		if !strings.Contains(text, line) {
			t.Errorf("Prometheus output lacks %q:\n%s", line, text)
		}
	}
}

// TestPartitionLag: the lag gauge is the latest fetch's log end minus the
// position, never negative, and -1 until both are known.
func TestPartitionLag(t *testing.T) {
	p := &partTrack{gauges: partGauges{position: &runtime.Gauge{}, lag: &runtime.Gauge{}}}
	p.logEnd.Store(-1)
	p.gauges.lag.Set(-1)
	p.setPosition(4)
	if v := p.gauges.lag.Value(); v != -1 {
		t.Fatalf("lag %d before a log end is known; want -1", v)
	}
	for _, c := range []struct{ logEnd, pos, want int64 }{{10, 4, 6}, {10, 10, 0}, {12, 10, 2}, {9, 10, 0}} {
		p.logEnd.Store(c.logEnd)
		p.setPosition(c.pos)
		if v := p.gauges.lag.Value(); v != c.want {
			t.Errorf("log end %d, position %d: lag %d, want %d", c.logEnd, c.pos, v, c.want)
		}
	}
}
