package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/internal/demo"
	"github.com/weirproject/weir/runtime"
)

// chromium finds a Chromium or Chrome binary (WEIR_CHROMIUM names one).
func chromium(t *testing.T) string {
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium to test the page in: install Debian's chromium (apt-get install chromium; .ci/run does) or set WEIR_CHROMIUM")
	return ""
}

// narrative collects the demo's output and finds the addresses it prints.
type narrative struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (n *narrative) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.buf.Write(p)
}

func (n *narrative) find(re *regexp.Regexp) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := re.FindSubmatch(n.buf.Bytes())
	if m == nil {
		return ""
	}
	return string(m[1])
}

// waitFor polls cond until it holds. The bound only keeps a broken test
// from hanging (a browser starting on a loaded machine can be slow); it
// asserts nothing about how long the wait takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// shown is what the page shows: the frame number and every figure by key.
type shown struct {
	Seq  int64             `json:"seq"`
	Figs map[string]string `json:"figs"`
}

const readPage = `(() => {
  const figs = {};
  for (const e of document.querySelectorAll("[data-k]")) figs[e.getAttribute("data-k")] = e.getAttribute("data-v");
  return {seq: Number(document.body.dataset.seq || 0), figs};
})()`

// TestPageShowsTheJobsFigures runs the demo job with the dashboard, opens
// the page in headless Chromium while the job runs, and checks that every
// figure the page shows is the one of the frame it says it shows (D3),
// that the frame holds the job's own metrics (those /api/metrics and the
// Prometheus endpoint expose), and that the panels are filled.
//
// With WEIR_DASHBOARD_SCREENSHOTS=dir it writes screenshots of the page
// there (docs/dashboard-*.png are made so).
func TestPageShowsTheJobsFigures(t *testing.T) {
	browser := chromium(t)
	out := &narrative{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := demo.Run(ctx, out, demo.Options{Orders: 6000, Days: 1, Parallelism: 2, Rate: 300, Live: time.Hour,
			CheckpointDir: t.TempDir(), UIAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0"})
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("demo: %v", err)
		}
	}()
	var url, prom string
	waitFor(t, "the demo to print the dashboard's address", func() bool {
		url = out.find(regexp.MustCompile(`dashboard on (http://\S+)`))
		prom = out.find(regexp.MustCompile(`metrics on (http://\S+)`))
		return url != "" && prom != ""
	})
	var before []runtime.Metric
	getJSON(t, url+"api/metrics", &before)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1500, 1900), chromedp.Flag("disable-gpu", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	// Wait until the page shows a frame in which the history has been
	// read, the agent has decided orders (and asked its model) and a
	// checkpoint has completed.
	var page shown
	waitFor(t, "the page to show a caught-up job with agent actions, model calls and a checkpoint", func() bool {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[shown](readPage))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		page = s
		n := func(k string) float64 { v, _ := strconv.ParseFloat(s.Figs[k], 64); return v }
		return s.Seq > 0 && n("kafka.orders.catchUpMs") >= 0 && s.Figs["kafka.orders.catchUpMs"] != "" &&
			n("agent.inventory-agent.actionsRun") > 0 && n("agent.inventory-agent.model.planner.calls") > 0 &&
			n("cp.completed") > 0 && n("dead.total") == 5
	})
	var f dashboard.Frame
	getJSON(t, fmt.Sprintf("%sapi/frame?seq=%d", url, page.Seq), &f)
	var after []runtime.Metric
	getJSON(t, url+"api/metrics", &after)

	// 1. Every figure of the frame is on the page, with the frame's value.
	want := figures(f)
	for k, v := range want {
		got, ok := page.Figs[k]
		if !ok {
			t.Errorf("frame %d: %s = %s is not on the page", f.Seq, k, v)
			continue
		}
		if !same(got, v) {
			t.Errorf("frame %d: the page shows %s = %q, the API %q", f.Seq, k, got, v)
		}
	}
	for k := range page.Figs {
		if _, ok := want[k]; !ok {
			t.Errorf("the page shows %s, which frame %d does not have", k, f.Seq)
		}
	}
	if len(want) < 50 {
		t.Errorf("only %d figures compared", len(want))
	}

	// 2. The frame holds the job's metrics: counters read before the page
	// opened <= the frame's <= read after; gauges fixed since the start
	// (end offsets) equal; the Prometheus endpoint agrees.
	sum := func(ms []runtime.Metric, op, name string) int64 {
		var s int64
		for _, m := range ms {
			if m.Operator == op && m.Name == name {
				s += m.Value
			}
		}
		return s
	}
	between := func(what string, got int64, op, name string) {
		lo, hi := sum(before, op, name), sum(after, op, name)
		if got < lo || got > hi {
			t.Errorf("%s = %d in frame %d; the job's %s/%s went from %d to %d around it", what, got, f.Seq, op, name, lo, hi)
		}
	}
	ops := map[string]dashboard.OperatorFrame{}
	for _, o := range f.Operators {
		ops[o.UID] = o
	}
	between("records read by events", ops["events"].RecordsIn, "events", "recordsRead")
	between("records into sort-by-item", ops["sort-by-item"].RecordsIn, "sort-by-item", "recordsIn")
	between("agent actions", f.Agents[0].ActionsRun, "inventory-agent", "actionsRun")
	between("completed checkpoints", f.Checkpoints.Completed, "job", "checkpointsCompleted")
	if got := sum(after, "events", "deadLetters"); f.DeadLetters.Total != got || got != 5 {
		t.Errorf("dead letters: frame %d, job %d, want the demo's 5 malformed records", f.DeadLetters.Total, got)
	}
	promText := scrape(t, prom)
	for _, p := range f.Kafka {
		// (the text format sorts labels by name)
		line := fmt.Sprintf(`weir_kafka_partition_end_offset{operator="events",partition="%s",subtask="%d",topic="%s"} %d`, p.Partition, p.Subtask, p.Topic, p.End)
		if !strings.Contains(promText, line+"\n") {
			t.Errorf("Prometheus does not have %s", line)
		}
		if !p.CaughtUp || p.CatchUpMs < 0 || p.Progress != 1 {
			t.Errorf("partition %s/%s: %+v, want caught up", p.Topic, p.Partition, p)
		}
	}
	if len(f.Kafka) != 8 || len(f.KafkaTopics) != 3 {
		t.Errorf("kafka: %d partitions, %d topics; want the demo's 8 and 3", len(f.Kafka), len(f.KafkaTopics))
	}
	if len(f.Agents) != 1 || len(f.Agents[0].Models) != 1 || f.Agents[0].Models[0].Calls == 0 {
		t.Errorf("agents: %+v, want calls to the planner model", f.Agents)
	}
	if len(f.Held) != 2 || len(f.Watermarks) == 0 || len(f.Late) != 1 {
		t.Errorf("held %d subtasks, watermarks %d, late %d", len(f.Held), len(f.Watermarks), len(f.Late))
	}

	if dir := os.Getenv("WEIR_DASHBOARD_SCREENSHOTS"); dir != "" {
		// A longer history for the chart and the checkpoint table.
		waitFor(t, "20 more frames", func() bool {
			s, err := chromedp.Run(bctx, chromedp.Evaluate[shown](readPage))
			return err == nil && s.Seq >= page.Seq+20
		})
		shots := map[string]string{"dashboard-full.png": "", "dashboard-graph.png": "#graph-section",
			"dashboard-kafka.png": "#kafka-section", "dashboard-checkpoints.png": "#checkpoints-section"}
		for name, sel := range shots {
			var png []byte
			var err error
			if sel == "" {
				png, err = chromedp.Run(bctx, chromedp.FullScreenshot(100))
			} else {
				png, err = chromedp.Run(bctx, chromedp.Screenshot(chromedp.CSS(sel)))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// same compares a figure's value on the page with the API's: numbers as
// JSON numbers (both sides parse them into float64, as the browser does).
func same(page, api string) bool {
	if page == api {
		return true
	}
	a, err1 := strconv.ParseFloat(page, 64)
	b, err2 := strconv.ParseFloat(api, 64)
	return err1 == nil && err2 == nil && (a == b || math.Abs(a-b) <= 1e-9*math.Abs(b))
}

// figures are the frame's figures under the page's keys (app.js).
func figures(f dashboard.Frame) map[string]string {
	m := map[string]string{}
	put := func(k string, v any) {
		switch x := v.(type) {
		case nil:
			m[k] = ""
		case *int64:
			if x == nil {
				m[k] = ""
			} else {
				m[k] = strconv.FormatInt(*x, 10)
			}
		case float64:
			m[k] = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			m[k] = fmt.Sprint(v)
		}
	}
	for _, o := range f.Operators {
		k := "op." + o.UID + "."
		put(k+"inPerSec", o.InPerSec)
		put(k+"outPerSec", o.OutPerSec)
		put(k+"recordsIn", o.RecordsIn)
		put(k+"recordsOut", o.RecordsOut)
		put(k+"backPressure", o.BackPressure)
	}
	for _, t := range f.KafkaTopics {
		put("kafka."+t.Topic+".catchUpMs", t.CatchUpMs)
	}
	for _, p := range f.Kafka {
		k := "kafka." + p.Topic + "." + p.Partition + "."
		put(k+"progress", p.Progress)
		put(k+"position", p.Position)
		put(k+"end", p.End)
		put(k+"catchUpMs", p.CatchUpMs)
	}
	for _, w := range f.Watermarks {
		k := fmt.Sprintf("wm.%s.%d.", w.Operator, w.Subtask)
		put(k+"watermark", w.Watermark)
		put(k+"lagMs", w.LagMs)
	}
	for _, h := range f.Held {
		k := fmt.Sprintf("held.%s.%d.", h.Operator, h.Subtask)
		put(k+"held", h.Held)
		put(k+"oldestAgeMs", h.OldestAgeMs)
		put(k+"inFlight", h.InFlight)
		var keys []string
		for _, x := range h.Keys {
			keys = append(keys, fmt.Sprintf("%s (%d)", x.Key, x.Inputs))
		}
		put(k+"keys", strings.Join(keys, ", "))
	}
	for _, a := range f.Agents {
		k := "agent." + a.Operator + "."
		put(k+"inFlight", a.InFlight)
		put(k+"runningKeys", a.RunningKeys)
		put(k+"actionsRun", a.ActionsRun)
		put(k+"actionsPerSec", a.ActionsPerSec)
		put(k+"actionErrors", a.ActionErrors)
		put(k+"meanLatencyMs", a.MeanLatencyMs)
		put(k+"totalLatencyMs", a.TotalLatencyMs)
		put(k+"p99LatencyMs", a.P99LatencyMs)
		for kind, cs := range map[string][]dashboard.Calls{"model": a.Models, "tool": a.Tools} {
			for _, c := range cs {
				ck := k + kind + "." + c.Name + "."
				put(ck+"calls", c.Calls)
				put(ck+"errors", c.Errors)
				put(ck+"retries", c.Retries)
				put(ck+"rateLimited", c.RateLimited)
				put(ck+"tokens", c.InputTokens+c.OutputTokens)
				put(ck+"p99LatencyMs", c.P99LatencyMs)
			}
		}
	}
	put("cp.completed", f.Checkpoints.Completed)
	put("cp.failed", f.Checkpoints.Failed)
	for _, c := range f.Checkpoints.History {
		k := fmt.Sprintf("cp.%d.", c.ID)
		put(k+"status", c.Status)
		put(k+"durationMs", c.DurationMs)
		put(k+"bytes", c.Bytes)
		put(k+"syncPauseMicros", c.SyncPauseMicros)
		put(k+"acknowledged", c.Acknowledged)
		put(k+"cause", c.Cause)
	}
	put("weir.version", f.Weir.Version)
	put("weir.commit", f.Weir.Commit)
	put("weir.go", f.Weir.Go)
	put("weir.platform", f.Weir.Platform)
	put("weir.tags", strings.Join(f.Weir.Tags, ","))
	put("dead.total", f.DeadLetters.Total)
	for _, s := range f.DeadLetters.PerSource {
		put("dead."+s.Name, s.Count)
	}
	for _, l := range f.Late {
		k := "late." + l.Operator + "."
		put(k+"dropped", l.Dropped)
		put(k+"toSideOutput", l.ToSideOutput)
		put(k+"lastWatermark", l.LastWatermark)
	}
	return m
}
