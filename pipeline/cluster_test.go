package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/watermark"
)

// clusteredYAML is a keyed windowed pipeline that group mode runs: filter
// and map before the keyBy, a tumbling window count and sum after it, an
// exactly-once Kafka sink, and two named outputs on Kafka (the source's
// dead letters, in the source tasks; the window's late records, in the
// keyed tasks).
const clusteredYAML = `name: counts
job:
  checkpoint:
    interval: 100ms
    dir: ${CKPT}
kafka:
  brokers: ["${BROKERS}"]
source:
  kafka:
    topics: [events]
    bounded: true
  timestamp: time
  watermark:
    outOfOrderness: 1s
  deadLetters: bad
steps:
  - filter: kind != "skip"
  - map:
      set:
        cents: amount * 100
  - keyBy: user
  - window:
      tumbling: 10s
      late: late
      aggregate:
        n: count
        cents: sum(cents)
        top: max(amount)
sink:
  kafka: {topic: "${OUT}", delivery: exactly-once, key: user}
outputs:
  bad:
    kafka: {topic: "${OUT}-bad", delivery: exactly-once}
  late:
    kafka: {topic: "${OUT}-late", delivery: exactly-once}
`

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// produceEvents writes n events over the partitions of topic (timestamps
// rising per partition, disordered by less than the watermark bound, so
// that no record is late) with whole amounts (a sum of floats would depend on
// the order), every 50th one with kind "skip", and bad
// records that do not decode.
func produceEvents(t *testing.T, brokers []string, topic string, partitions, n, bad int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	base := int64(1_767_225_600_000)
	var recs []*kgo.Record
	for i := range n {
		kind := []string{"click", "view", "buy"}[rng.IntN(3)]
		if i%50 == 0 {
			kind = "skip"
		}
		v, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("u%02d", rng.IntN(20)), "kind": kind,
			"amount": rng.IntN(1000), "time": base + int64(i/partitions)*37 + rng.Int64N(400)})
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: v})
	}
	for i := range bad {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("not json %d", i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committedRecords reads every committed record of topic (read_committed,
// up to its end) as "key value" lines with the value's JSON keys sorted,
// and counts each.
func committedRecords(t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quietLog})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.WithMetadata(kafka.Bytes()))
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[kafka.Message[[]byte]]()))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range got.Values() {
		var v map[string]any
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatalf("%s: %s: %v", topic, m.Value, err)
		}
		// Dead letters name their split and position, which differ between
		// a source of every partition and one of a single partition: keep
		// what was wrong.
		if _, ok := v["raw"]; ok {
			v = map[string]any{"raw": v["raw"], "reason": v["reason"]}
		}
		b, _ := json.Marshal(v) // keys sorted
		out[string(m.Key)+" "+string(b)]++
	}
	return out
}

// TestClusterEqualsLocalRun: the pipeline run in group mode by two members
// (two RunCluster calls in this process, one consumer group) commits
// exactly the records the same pipeline commits when run by Run: every
// window total, every dead letter, each once (cluster C1 through
// RunCluster).
func TestClusterEqualsLocalRun(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"events": 3,
		"local": 2, "local-bad": 1, "local-late": 1, "clustered": 2, "clustered-bad": 1, "clustered-late": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	brokers := b.Addrs()
	produceEvents(t, brokers, "events", 3, 3000, 4)
	t.Setenv("BROKERS", brokers[0])
	parseWith := func(out, ckpt string) *pipeline.Spec {
		t.Setenv("OUT", out)
		t.Setenv("CKPT", ckpt)
		s, err := pipeline.Parse("clustered.yaml", []byte(clusteredYAML))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	local := parseWith("local", t.TempDir())
	ls, err := pipeline.Run(ctx, local, pipeline.Options{Logger: quietLog}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	spec := parseWith("clustered", t.TempDir())
	var wg sync.WaitGroup
	sums := make([]pipeline.Summary, 2)
	errs := make([]error, 2)
	logs := make([]strings.Builder, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = pipeline.RunCluster(ctx, spec, pipeline.ClusterOptions{Group: "counts", KeyedTasks: 2,
				Member: fmt.Sprintf("m%d", i), SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: quietLog}, &logs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v\n%s", i, err, logs[i].String())
		}
	}
	for _, out := range []string{"", "-bad", "-late"} {
		want := committedRecords(t, brokers, "local"+out)
		got := committedRecords(t, brokers, "clustered"+out)
		if !maps.Equal(want, got) {
			for r, n := range want {
				if got[r] != n {
					t.Errorf("%s: %s: %d times, want %d", out, r, got[r], n)
				}
			}
			for r, n := range got {
				if _, ok := want[r]; !ok {
					t.Errorf("%s: %s: %d times, not in the local run's", out, r, n)
				}
			}
			t.Fatalf("topic clustered%s differs from the local run's (%d distinct records, want %d)", out, len(got), len(want))
		}
		t.Logf("clustered%s: %d distinct records, as the local run's", out, len(got))
		if out == "" && len(want) < 50 || out == "-bad" && len(want) != 4 || out == "-late" && len(want) != 0 {
			t.Errorf("local%s: %d records; want > 50 window totals, 4 dead letters, no late record", out, len(want))
		}
	}
	// Between them the members ran every task, and their summaries say so.
	tasks := map[string]bool{}
	var source int64
	for i, s := range sums {
		if s.Group != "counts" || s.Member != fmt.Sprintf("m%d", i) || s.Stopped {
			t.Errorf("member %d: summary %+v", i, s)
		}
		for task := range s.Tasks {
			tasks[task] = true
		}
		source += s.SourceRecords
		t.Logf("member %d: %+v\n%s", i, s, logs[i].String())
	}
	if want := []string{"keyed-0", "keyed-1", "source-0", "source-1", "source-2"}; !slices.Equal(slices.Sorted(maps.Keys(tasks)), want) {
		t.Errorf("tasks run: %v, want %v", slices.Sorted(maps.Keys(tasks)), want)
	}
	if source < ls.SourceRecords {
		t.Errorf("members counted %d source records together, the local run %d", source, ls.SourceRecords)
	}
}

// TestClusteredExample runs examples/pipelines/load-orders.yaml, then
// examples/pipelines/clustered.yaml in group mode with two members, and
// checks every committed total against the totals computed here from
// orders.jsonl: one per customer and minute, each once.
func TestClusteredExample(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"orders": 3, "order-totals": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Setenv("KAFKA_BROKERS", b.Addrs()[0])
	t.Setenv("WEIR_OUT", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pipeline.Run(ctx, parse(t, "load-orders.yaml"), pipeline.Options{Logger: quietLog}, io.Discard); err != nil {
		t.Fatal(err)
	}
	spec := parse(t, "clustered.yaml")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = pipeline.RunCluster(ctx, spec, pipeline.ClusterOptions{Group: "order-totals", Member: fmt.Sprintf("m%d", i),
				SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Stdout: io.Discard, Logger: quietLog}, io.Discard)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// The totals, from the file.
	type total struct{ orders, total, biggest float64 }
	want := map[string]int{}
	sums := map[[2]string]*total{}
	in, err := os.ReadFile(filepath.Join(examples, "orders.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(in), "\n") {
		var o struct {
			Customer string
			Amount   float64
			Time     int64
		}
		if json.Unmarshal([]byte(l), &o) != nil || o.Amount <= 0 {
			continue
		}
		k := [2]string{o.Customer, fmt.Sprint(o.Time / 60000 * 60000)}
		if sums[k] == nil {
			sums[k] = &total{}
		}
		s := sums[k]
		s.orders++
		s.total += o.Amount
		s.biggest = max(s.biggest, o.Amount)
	}
	for k, s := range sums {
		start, _ := strconv.ParseInt(k[1], 10, 64)
		v, _ := json.Marshal(map[string]any{"customer": k[0], "orders": s.orders, "total": s.total, "biggest": s.biggest,
			"windowStart": start, "windowEnd": start + 60000})
		want[k[0]+" "+string(v)]++
	}
	got := committedRecords(t, b.Addrs(), "order-totals")
	if !maps.Equal(want, got) {
		t.Fatalf("order-totals holds %d distinct totals, want the %d computed from orders.jsonl, each once:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	t.Logf("%d totals, each once", len(got))
}

// lockedBuffer is a strings.Builder safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClusterMetrics: a member given MetricsAddr serves the metrics of the
// tasks it runs, each series labelled with its task, while they run; its
// summary counts the source's dead letters as a local run does.
func TestClusterMetrics(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"events": 2, "out": 1, "out-bad": 1, "out-late": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	produceEvents(t, b.Addrs(), "events", 2, 500, 3)
	t.Setenv("BROKERS", b.Addrs()[0])
	t.Setenv("OUT", "out")
	t.Setenv("CKPT", t.TempDir())
	spec, err := pipeline.Parse("clustered.yaml", []byte(clusteredYAML))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log lockedBuffer
	addrRe := regexp.MustCompile(`metrics on (http://\S+/metrics)`)
	healthRe := regexp.MustCompile(`health on (http://\S+)/healthz`)
	var scraped string
	var scrapeErr, readyErr error
	onTask := func(ev cluster.TaskEvent) {
		// The keyed task has finished: its metrics are final, and still
		// served (RunCluster has not returned).
		if ev.Task != "keyed-0" || ev.Kind != cluster.TaskFinished {
			return
		}
		m := addrRe.FindStringSubmatch(log.String())
		if m == nil {
			scrapeErr = fmt.Errorf("no metrics address in the log:\n%s", log.String())
			return
		}
		resp, err := http.Get(m[1])
		if err != nil {
			scrapeErr = err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		scraped, scrapeErr = string(body), err
		// Every task of the process runs or has finished: ready, on the
		// metrics address and on the health address alike.
		h := healthRe.FindStringSubmatch(log.String())
		if h == nil {
			scrapeErr = fmt.Errorf("no health address in the log:\n%s", log.String())
			return
		}
		for _, u := range []string{strings.TrimSuffix(m[1], "/metrics") + "/readyz", h[1] + "/readyz", h[1] + "/healthz"} {
			code, body := httpGet(t, u)
			if code != 200 || !(strings.HasPrefix(body, "ready: in group metrics, running ") || body == "ok") {
				readyErr = fmt.Errorf("GET %s: %d %q: want 200, ready (or ok)", u, code, body)
			}
		}
	}
	s, err := pipeline.RunCluster(ctx, spec, pipeline.ClusterOptions{Group: "metrics", KeyedTasks: 1, MetricsAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0",
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: quietLog, OnTask: onTask}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if scrapeErr != nil {
		t.Fatal(scrapeErr)
	}
	if readyErr != nil {
		t.Error(readyErr)
	}
	sinkIn := regexp.MustCompile(`weir_records_in\{operator="sink",subtask="0",task="keyed-0"\} (\d+)`).FindStringSubmatch(scraped)
	if sinkIn == nil || sinkIn[1] == "0" || sinkIn[1] != strconv.FormatInt(s.Outputs["sink"], 10) {
		t.Fatalf("scrape lacks the keyed task's sink count (%d in the summary):\n%s", s.Outputs["sink"], scraped)
	}
	for _, want := range []string{`task="source-0"`, `task="source-1"`, `weir_dead_letters{operator="source"`} {
		if !strings.Contains(scraped, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if s.SourceDeadLetters != 3 || s.Dropped != 0 {
		t.Errorf("summary %+v; want 3 source dead letters, routed", s)
	}
}

// TestClusterRestoreGroupSavepoint: a clustered job stopped on its only
// process leaves a group savepoint (its checkpoint location: a checkpoint
// of every task); the same job started with a new, empty checkpoint
// location and RestoreFrom that savepoint restores every task from its part
// and completes the output: committed, it equals a local run's, nothing
// lost or twice.
func TestClusterRestoreGroupSavepoint(t *testing.T) {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"events": 2,
		"local": 1, "local-bad": 1, "local-late": 1, "group": 1, "group-bad": 1, "group-late": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	brokers := b.Addrs()
	produceEvents(t, brokers, "events", 2, 2000, 2)
	t.Setenv("BROKERS", brokers[0])
	parseWith := func(y, out, ckpt string) *pipeline.Spec {
		t.Setenv("OUT", out)
		t.Setenv("CKPT", ckpt)
		s, err := pipeline.Parse("clustered.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pipeline.Run(ctx, parseWith(clusteredYAML, "local", t.TempDir()), pipeline.Options{Logger: quietLog}, io.Discard); err != nil {
		t.Fatal(err)
	}

	// The first run, unbounded, stopped once every task has checkpointed.
	savepoint := t.TempDir()
	tasks := []string{"keyed-0", "source-0", "source-1"}
	stop, stopRun := context.WithCancel(ctx)
	go func() {
		defer stopRun()
		for stop.Err() == nil {
			done := true
			for _, task := range tasks {
				m, _ := filepath.Glob(filepath.Join(savepoint, "tasks", task, "chk-*", "_metadata"))
				done = done && len(m) > 0
			}
			if done {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	opts := pipeline.ClusterOptions{Group: "group", KeyedTasks: 1, Member: "m", SessionTimeout: time.Second,
		HeartbeatInterval: 100 * time.Millisecond, Logger: quietLog}
	first := parseWith(strings.Replace(clusteredYAML, "bounded: true", "bounded: false", 1), "group", savepoint)
	var log1 strings.Builder
	if s, err := pipeline.RunCluster(stop, first, opts, &log1); err != nil || !s.Stopped {
		t.Fatalf("first run: %v, %+v\n%s", err, s, log1.String())
	}

	// The second run, bounded, from the savepoint into a new location.
	var mu sync.Mutex
	restored := map[string]string{}
	opts.OnTask = func(ev cluster.TaskEvent) {
		if ev.Kind == cluster.TaskStarted {
			mu.Lock()
			restored[ev.Task] = ev.Restored
			mu.Unlock()
		}
	}
	opts.RestoreFrom = savepoint
	var log2 strings.Builder
	if _, err := pipeline.RunCluster(ctx, parseWith(clusteredYAML, "group", t.TempDir()), opts, &log2); err != nil {
		t.Fatalf("second run: %v\n%s", err, log2.String())
	}
	t.Logf("first run:\n%s\nsecond run:\n%s", log1.String(), log2.String())
	for _, task := range tasks {
		if !strings.HasPrefix(restored[task], filepath.Join(savepoint, "tasks", task)) {
			t.Errorf("task %s started from %q, want its part of the savepoint %s\n%s", task, restored[task], savepoint, log2.String())
		}
	}
	for _, out := range []string{"", "-bad", "-late"} {
		want := committedRecords(t, brokers, "local"+out)
		got := committedRecords(t, brokers, "group"+out)
		if out == "" && len(want) < 50 {
			t.Fatalf("the local run committed %d window totals; want more than 50", len(want))
		}
		t.Logf("group%s: %d distinct records, as the local run's", out, len(got))
		if !maps.Equal(want, got) {
			t.Fatalf("topic group%s: %d distinct records, the local run's %d; they differ\nfirst run:\n%s\nsecond run:\n%s", out, len(got), len(want), log1.String(), log2.String())
		}
	}
}

// httpGet returns the status and the trimmed body of a GET of u.
func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
