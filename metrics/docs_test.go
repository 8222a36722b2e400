package metrics_test

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/demo"
	"github.com/weirproject/weir/metrics"
)

// documented reads docs/metrics.md: every table row's metric and its
// labels.
func documented(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(weir_[a-z_]+)` \\| (counter|gauge|histogram) \\| ([a-z, ]+) \\|")
	out := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			labels = append(labels, strings.TrimSpace(l))
		}
		out[m[1]] = labels
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md: no metric rows found")
	}
	return out
}

// registered finds every metric name registered in weir's source: literal
// names given to Counter, Gauge and LabeledGauge (of runtime.Context and
// runtime.SourceContext) and to the runtime's own counter and gauge, and
// constants named Metric... or Counter... holding a metric name.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	call := regexp.MustCompile(`\b(?:Counter|Gauge|LabeledCounter|LabeledGauge|LabeledHistogram|counter|gauge|histogram)\(([^()]*)\)`)
	lastLiteral := regexp.MustCompile(`"([a-zA-Z]+)"[^"]*$`)
	constant := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(?:Metric|Counter|Gauge)\w*\s*=\s*"([a-zA-Z]+)"`)
	out := map[string][]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			if l := lastLiteral.FindStringSubmatch(m[1]); l != nil {
				out[metrics.Name(l[1])] = append(out[metrics.Name(l[1])], path)
			}
		}
		for _, m := range constant.FindAllStringSubmatch(src, -1) {
			out[metrics.Name(m[1])] = append(out[metrics.Name(m[1])], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsAreDocumented: docs/metrics.md lists every metric weir
// registers, with the labels a running job serves it with, and nothing
// that is no longer registered.
func TestMetricsAreDocumented(t *testing.T) {
	docs := documented(t)
	regs := registered(t)
	for name, where := range regs {
		if _, ok := docs[name]; !ok {
			t.Errorf("%s (registered in %s) is missing from docs/metrics.md", name, strings.Join(slices.Compact(where), ", "))
		}
	}
	for name := range docs {
		if _, ok := regs[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which nothing registers any more", name)
		}
	}

	// The labels, as a running job serves them: the demo's job (Kafka
	// source, sort, windows, agent, checkpoints) scraped once it has caught
	// up.
	served := scrapeDemo(t)
	if len(served) == 0 {
		t.Fatal("the demo served no metrics")
	}
	for name, labels := range served {
		want, ok := docs[name]
		if !ok {
			t.Errorf("the demo serves %s, which docs/metrics.md does not list", name)
			continue
		}
		// The exposition sorts label names; compare them as sets.
		if !slices.Equal(slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: served with labels %v, docs/metrics.md says %v", name, labels, want)
		}
	}
}

// scrapeDemo runs a small demo with a metrics address and returns every
// metric it serves once caught up, with its label names.
func scrapeDemo(t *testing.T) map[string][]string {
	t.Helper()
	w := &narrative{addr: make(chan string, 1), caughtUp: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := demo.Run(ctx, w, demo.Options{Orders: 2000, Days: 1, Customers: 5, Items: 20, Live: time.Minute,
			Rate: 200, CheckpointDir: t.TempDir(), MetricsAddr: "127.0.0.1:0"})
		done <- err
	}()
	var addr string
	select {
	case addr = <-w.addr:
	case err := <-done:
		t.Fatalf("the demo ended before serving metrics: %v", err)
	}
	select {
	case <-w.caughtUp:
	case err := <-done:
		t.Fatalf("the demo ended before catching up: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	out := parseExposition(t, resp.Body)
	resp.Body.Close()
	cancel()
	<-done
	return out
}

// parseExposition returns the metric names of a Prometheus text exposition
// with their label names (sorted, as the exposition has them).
func parseExposition(t *testing.T, r io.Reader) map[string][]string {
	t.Helper()
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	out := map[string][]string{}
	histograms := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && f[3] == "histogram" {
			histograms[f[2]] = true
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		var labels []string
		if i := strings.LastIndex(rest, "}"); i >= 0 {
			for _, m := range labelName.FindAllStringSubmatch(rest[:i], -1) {
				if m[1] != "le" {
					labels = append(labels, m[1])
				}
			}
		} else {
			name, _, _ = strings.Cut(line, " ")
		}
		// A histogram's series (_bucket with its le label, _sum, _count)
		// are the one metric the docs list.
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && histograms[base] {
				name = base
			}
		}
		if prev, ok := out[name]; ok && !slices.Equal(prev, labels) {
			t.Errorf("%s is served with labels %v and %v", name, prev, labels)
		}
		out[name] = labels
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("served: %s", strings.Join(names, " "))
	return out
}

// narrative watches the demo's narrative for the metrics address and the
// end of the catch-up.
type narrative struct {
	mu       sync.Mutex
	addr     chan string
	caughtUp chan struct{}
	closed   bool
}

var metricsLine = regexp.MustCompile(`metrics on http://(\S+)/metrics`)

func (n *narrative) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m := metricsLine.FindSubmatch(b); m != nil {
		n.addr <- string(m[1])
	}
	if !n.closed && strings.Contains(string(b), "every topic caught up") {
		close(n.caughtUp)
		n.closed = true
	}
	return len(b), nil
}
