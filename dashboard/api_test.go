package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/internal/buildinfo"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// finishedJob runs a small job to its end: a source with one dead letter,
// a keyed window with a late record, and a checkpoint.
func finishedJob(t *testing.T) *runtime.Job {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	vals := []int64{1000, 2000, -1, 3000, 9000, 500, 12000}
	// A punctuated watermark after every record: the 500 after 9000 is late.
	punctuated := watermark.ForGenerator(func() watermark.Generator[int64] {
		return watermark.GeneratorFuncs[int64]{Event: func(_ int64, ts int64, out watermark.Output) { out.EmitWatermark(ts - 1) }}
	})
	src := weir.FromSlice(env, "numbers", vals, punctuated.
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, v > 0 })).Parallelism(1)
	late := weir.NewOutputTag[int64]("late")
	counts := window.AggregateKeyed(weir.KeyBy(src, func(v int64) int64 { return v % 2 }), "count",
		window.Tumbling(5*time.Second), window.AggregateFuncs[int64, int64, int64]{
			AddFn:    func(_ int64, acc int64) int64 { return acc + 1 },
			ResultFn: func(acc int64) int64 { return acc },
			MergeFn:  func(a, b int64) int64 { return a + b },
		}, window.LateOutput(late))
	weir.Collect(counts)
	weir.Collect(weir.SideOutput(counts, late))
	weir.Collect(weir.DeadLetters(src))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	return job
}

func get(t *testing.T, srv *httptest.Server, path string, wantStatus int, v any) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, wantStatus, body)
	}
	if v != nil {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	return string(body)
}

func TestAPI(t *testing.T) {
	job := finishedJob(t)
	s := newServer(jobSource{job}, Options{History: 2})
	for range 3 {
		s.sample()
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	var f Frame
	get(t, srv, "/api/frame", 200, &f)
	if f.Seq != 3 || !f.Done || f.IntervalMs < 0 {
		t.Errorf("newest frame: seq %d done %v interval %d, want frame 3 of an ended job", f.Seq, f.Done, f.IntervalMs)
	}
	m := job.Metrics()
	byName := map[string]OperatorFrame{}
	for _, o := range f.Operators {
		byName[o.Name] = o
	}
	if o := byName["numbers"]; o.RecordsIn != m.Sum("numbers", "recordsRead") || o.RecordsIn != 6 || !o.Source || o.Watermark != watermark.Max {
		t.Errorf("numbers: %+v, want 6 records read (recordsRead %d), watermark.Max", o, m.Sum("numbers", "recordsRead"))
	}
	if o := byName["count"]; o.RecordsIn != m.Sum("count", "recordsIn") || o.RecordsIn != 6 || o.Inputs[0].Partitioning != "key-by" {
		t.Errorf("count: %+v, want 6 records in, over a key-by edge", o)
	}
	if f.DeadLetters.Total != 1 || len(f.DeadLetters.Latest) != 1 || !strings.Contains(f.DeadLetters.Latest[0].Text, "timestamp") {
		t.Errorf("dead letters: %+v, want the one without a timestamp", f.DeadLetters)
	}
	if len(f.Late) != 1 || f.Late[0].Dropped != 1 || f.Late[0].ToSideOutput != 1 ||
		f.Late[0].LastTimestamp == nil || *f.Late[0].LastTimestamp != 500 || *f.Late[0].LastWatermark < 5000 {
		t.Errorf("late: %+v, want the record at 500 late against a watermark past 5000", f.Late)
	}
	if f.Checkpoints.History == nil || f.Checkpoints.Completed != m.Sum("job", "checkpointsCompleted") {
		t.Errorf("checkpoints: %+v", f.Checkpoints)
	}

	// Frames by number: the last two are kept.
	var f2 Frame
	get(t, srv, "/api/frame?seq=2", 200, &f2)
	if f2.Seq != 2 {
		t.Errorf("frame 2: got %d", f2.Seq)
	}
	get(t, srv, "/api/frame?seq=1", 404, nil)
	get(t, srv, "/api/frame?seq=9", 404, nil)
	if body := get(t, srv, "/api/frame?seq=x", 400, nil); !strings.Contains(body, "want a frame number") {
		t.Errorf("bad seq: %s", body)
	}

	var pts []Point
	get(t, srv, "/api/history", 200, &pts)
	if len(pts) != 2 || pts[0].Seq != 2 || len(pts[1].In) != len(f.Operators) {
		t.Errorf("history: %+v", pts)
	}
	get(t, srv, "/api/history?since=2", 200, &pts)
	if len(pts) != 1 || pts[0].Seq != 3 {
		t.Errorf("history since 2: %+v", pts)
	}
	get(t, srv, "/api/history?since=-1", 400, nil)

	var top runtime.Topology
	get(t, srv, "/api/topology", 200, &top)
	if len(top.Operators) != len(f.Operators) {
		t.Errorf("topology: %d operators, frame %d", len(top.Operators), len(f.Operators))
	}
	var cps []runtime.CheckpointStats
	get(t, srv, "/api/checkpoints", 200, &cps)
	var ms []runtime.Metric
	get(t, srv, "/api/metrics", 200, &ms)
	if len(ms) != len(m.Snapshot()) {
		t.Errorf("/api/metrics: %d metrics, the job has %d", len(ms), len(m.Snapshot()))
	}
	var notes []runtime.Note
	get(t, srv, "/api/notes", 200, &notes)
	if len(notes) != 1 {
		t.Errorf("notes: %+v", notes)
	}
	if body := get(t, srv, "/api/nope", 404, nil); !strings.Contains(body, "/api/frame") {
		t.Errorf("unknown API: %s", body)
	}

	// The page and its assets come from the binary.
	for path, want := range map[string]string{"/": "<title>weir dashboard</title>", "/app.js": "api/frame", "/style.css": "--accent"} {
		if body := get(t, srv, path, 200, nil); !strings.Contains(body, want) {
			t.Errorf("GET %s: %q not in %.200s", path, want, body)
		}
	}
	resp, err := srv.Client().Post(srv.URL+"/api/frame", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/frame: %d, want 405", resp.StatusCode)
	}
}

// TestFrameNamesTheBinary: every frame carries the weir binary's build
// information under "weir", the object `weir version --json` prints.
func TestFrameNamesTheBinary(t *testing.T) {
	s := newServer(jobSource{finishedJob(t)}, Options{})
	s.sample()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var f struct {
		Weir map[string]any `json:"weir"`
	}
	get(t, srv, "/api/frame", 200, &f)
	want, _ := json.Marshal(buildinfo.Get())
	var w map[string]any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Weir, w) || f.Weir["version"] == "" || f.Weir["go"] != goruntime.Version() {
		t.Errorf("frame's weir: %v, want %s (weir version --json)", f.Weir, want)
	}
}

// Rates and back-pressure come from the growth of counters between frames.
func TestRates(t *testing.T) {
	top := runtime.Topology{Operators: []runtime.OperatorInfo{
		{Name: "src", UID: "src", Parallelism: 1, Source: true, Task: "src"},
		{Name: "map", UID: "map", Parallelism: 1, Task: "map", Inputs: []runtime.EdgeInfo{{From: "src", FromUID: "src", Partitioning: "rebalance"}}},
	}}
	snap := func(read, in, out, bp, blocked int64) []runtime.Metric {
		return []runtime.Metric{
			{Operator: "src", Name: "recordsRead", Value: read},
			{Operator: "src", Name: "recordsOut", Value: out},
			{Operator: "src", Name: runtime.MetricBackPressuredMicros, Value: bp},
			{Operator: "src", Name: runtime.MetricBackPressured, Value: blocked, Gauge: true},
			{Operator: "map", Name: "recordsIn", Value: in},
		}
	}
	f1 := buildFrame(1, nil, sampleInput{atMs: 10_000, topology: top, metrics: snap(100, 90, 95, 0, 0)})
	if f1.Operators[0].InPerSec != 0 || f1.IntervalMs != 0 {
		t.Errorf("first frame has rates: %+v", f1.Operators[0])
	}
	f2 := buildFrame(2, f1, sampleInput{atMs: 12_000, topology: top, metrics: snap(300, 290, 295, 500_000, 0)})
	src, mp := f2.Operators[0], f2.Operators[1]
	if src.InPerSec != 100 || src.OutPerSec != 100 || mp.InPerSec != 100 || src.BackPressure != 0.25 || f2.IntervalMs != 2000 {
		t.Errorf("rates: src %+v map %+v", src, mp)
	}
	// Blocked through a whole interval: the counter has not moved yet.
	f3 := buildFrame(3, f2, sampleInput{atMs: 13_000, topology: top, metrics: snap(300, 290, 295, 500_000, 1)})
	if f3.Operators[0].BackPressure != 1 {
		t.Errorf("blocked throughout: back-pressure %v, want 1", f3.Operators[0].BackPressure)
	}
}

// The dashboard reads the Kafka connector's catch-up gauges by name.
func TestKafkaMetricNames(t *testing.T) {
	for _, c := range [][2]string{
		{kafkaPartitionEnd, kafka.MetricPartitionEndOffset}, {kafkaPartitionPosition, kafka.MetricPartitionPosition},
		{kafkaPartitionCaughtUp, kafka.MetricPartitionCaughtUp}, {kafkaPartitionMillis, kafka.MetricPartitionCatchUpMillis},
		{kafkaTopicCaughtUp, kafka.MetricTopicCaughtUp}, {kafkaTopicMillis, kafka.MetricTopicCatchUpMillis},
	} {
		if c[0] != c[1] {
			t.Errorf("dashboard reads %q, the connector writes %q", c[0], c[1])
		}
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{":8081": "127.0.0.1:8081", "127.0.0.1:0": "127.0.0.1:0",
		"0.0.0.0:80": "0.0.0.0:80", "[::1]:8081": "[::1]:8081", "localhost:9": "localhost:9"} {
		if got, err := ParseAddr(in); err != nil || got != want {
			t.Errorf("ParseAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "8081", "host:", "h:99999", "h:x", "a:b:c"} {
		if _, err := ParseAddr(bad); err == nil || !strings.Contains(err.Error(), "want host:port") && !strings.Contains(err.Error(), "port must be") {
			t.Errorf("ParseAddr(%q): %v, want an error saying what is accepted", bad, err)
		}
	}
	if _, err := Start("127.0.0.1:0", nil, Options{Interval: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "Interval") {
		t.Errorf("Start with a 1ms interval: %v", err)
	}
}

// Start listens, samples in the background and Close stops both.
func TestStartClose(t *testing.T) {
	job := finishedJob(t)
	s, err := Start(":0", job, Options{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("Addr %s: want loopback for an address without a host", s.Addr())
	}
	resp, err := http.Get(s.URL() + "api/frame")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(s.URL()); err == nil {
		t.Error("still serving after Close")
	}
}

// An agent subtask's status, when it answered, is newer than its gauges and
// names the keys holding the oldest watermark; a subtask that did not
// answer shows its gauges.
func TestHeldFromAgentStatus(t *testing.T) {
	top := runtime.Topology{Operators: []runtime.OperatorInfo{{Name: "agent", UID: "agent", Parallelism: 2, Task: "agent"}}}
	ms := []runtime.Metric{{Operator: "agent", Name: "actionsRun", Value: 7}}
	for sub := range 2 {
		ms = append(ms,
			runtime.Metric{Operator: "agent", Subtask: sub, Name: "heldWatermarks", Value: 1, Gauge: true},
			runtime.Metric{Operator: "agent", Subtask: sub, Name: "oldestHeldWatermarkAgeMs", Value: 100, Gauge: true},
			runtime.Metric{Operator: "agent", Subtask: sub, Name: "inFlightInputs", Value: 3, Gauge: true})
	}
	status := []agent.SubtaskStatus{{Operator: "agent", Subtask: 1, HeldWatermarks: 2, OldestHeldAgeMs: 250, InFlightInputs: 4,
		OldestHeldBy: []agent.HeldKey{{Key: "k1", Inputs: 2}}, OldestHeldByCount: 1}}
	f := buildFrame(1, nil, sampleInput{atMs: 1000, topology: top, metrics: ms, agents: status})
	if len(f.Held) != 2 {
		t.Fatalf("held: %+v", f.Held)
	}
	if h := f.Held[0]; h.Held != 1 || h.OldestAgeMs != 100 || h.InFlight != 3 || h.Keys != nil || h.Kind != "agent" {
		t.Errorf("subtask 0 (no status): %+v, want its gauges", h)
	}
	if h := f.Held[1]; h.Held != 2 || h.OldestAgeMs != 250 || h.InFlight != 4 || len(h.Keys) != 1 || h.Keys[0].Key != "k1" || h.KeyCount != 1 {
		t.Errorf("subtask 1: %+v, want its status", h)
	}
	if len(f.Agents) != 1 || f.Agents[0].ActionsRun != 7 || f.Agents[0].InFlight != 6 {
		t.Errorf("agents: %+v", f.Agents)
	}
}

// TestPendingApprovalsFromAgentStatus: an agent's frame lists the pending
// waits of all its subtasks (key, action, age, deadline), soonest deadline
// first.
func TestPendingApprovalsFromAgentStatus(t *testing.T) {
	top := runtime.Topology{Operators: []runtime.OperatorInfo{{Name: "agent", UID: "agent", Parallelism: 2, Task: "agent"}}}
	ms := []runtime.Metric{{Operator: "agent", Name: "actionsRun", Value: 1}}
	status := []agent.SubtaskStatus{
		{Operator: "agent", Subtask: 0, PendingWaits: []agent.PendingWait{{Key: "late", Action: "review", Wait: "approve", ID: "w1", AgeMs: 10, DeadlineMs: 9000}}},
		{Operator: "agent", Subtask: 1, PendingWaits: []agent.PendingWait{{Key: "soon", Action: "review", Wait: "approve", ID: "w2", AgeMs: 50, DeadlineMs: 2000}}},
		{Operator: "other", Subtask: 0, PendingWaits: []agent.PendingWait{{Key: "x", DeadlineMs: 1}}},
	}
	f := buildFrame(1, nil, sampleInput{atMs: 1000, topology: top, metrics: ms, agents: status})
	if len(f.Agents) != 1 {
		t.Fatalf("agents: %+v", f.Agents)
	}
	got := f.Agents[0].PendingApprovals
	if len(got) != 2 || got[0].Key != "soon" || got[0].Subtask != 1 || got[0].AgeMs != 50 || got[1].Key != "late" || got[1].DeadlineMs != 9000 {
		t.Fatalf("pending approvals %+v", got)
	}
	b, _ := json.Marshal(got[0])
	if want := `{"subtask":1,"key":"soon","action":"review","wait":"approve","id":"w2","ageMs":50,"deadlineMs":2000}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}

// TestGroupAPI: /api/group serves Options.Group, answers 404 without it
// and 502 when the group cannot be described; the group page is served.
func TestGroupAPI(t *testing.T) {
	job := finishedJob(t)
	none := httptest.NewServer(newServer(jobSource{job}, Options{}).Handler())
	defer none.Close()
	get(t, none, "/api/group", 404, nil)

	want := Group{Group: "g", Self: "a", Members: []GroupMember{
		{Member: "a", Host: "10.0.0.1", URL: "http://10.0.0.1:8081/", Tasks: []string{"keyed-0", "source-0"}},
		{Member: "b", Host: "10.0.0.2", Tasks: []string{"source-1"}}}}
	var fail atomic.Bool
	srv := httptest.NewServer(newServer(jobSource{job}, Options{Group: func(context.Context) (Group, error) {
		if fail.Load() {
			return Group{}, errors.New("no coordinator")
		}
		return want, nil
	}}).Handler())
	defer srv.Close()
	var got Group
	get(t, srv, "/api/group", 200, &got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("/api/group: %+v, want %+v", got, want)
	}
	if page := get(t, srv, "/group.html", 200, nil); !strings.Contains(page, "group.js") {
		t.Errorf("/group.html does not load group.js:\n%s", page)
	}
	fail.Store(true)
	if body := get(t, srv, "/api/group", 502, nil); !strings.Contains(body, "no coordinator") {
		t.Errorf("/api/group of a failing describe: %s", body)
	}
}
