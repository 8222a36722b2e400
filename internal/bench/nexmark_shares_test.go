package bench

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/nexmark"
)

// TestMeasureNexmarkShares runs each query of WEIR_NEXMARK_SHARES (for
// example q0,q2,q7) from the generator and from the embedded broker as
// JSON, and the hand-written query over a hand-written franz-go consumer
// of the same records decoded by the same JSON library (kafka-loop),
// alternating, WEIR_NEXMARK_ROUNDS times (default 3), with a CPU
// profile of each run's Execute alone (not the broker's preload) written
// to WEIR_NEXMARK_PROFILES (a directory, default the test's temporary
// one) as QUERY-FROM-ROUND.pprof, and logs the CPU seconds per million
// events. Split a Kafka profile by package with `go tool pprof -top
// -focus` (BENCHMARKS.md, "Nexmark from the broker: where the CPU goes"):
// the JSON decode, the client, the in-process broker, the query.
func TestMeasureNexmarkShares(t *testing.T) {
	qs := os.Getenv("WEIR_NEXMARK_SHARES")
	if qs == "" {
		t.Skip("set WEIR_NEXMARK_SHARES=q0,q2 [WEIR_NEXMARK_EVENTS=N WEIR_NEXMARK_ROUNDS=R WEIR_NEXMARK_PROFILES=DIR] to measure")
	}
	events := int64(envInt(t, "WEIR_NEXMARK_EVENTS", 1_000_000))
	rounds := envInt(t, "WEIR_NEXMARK_ROUNDS", 3)
	dir := os.Getenv("WEIR_NEXMARK_PROFILES")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := nexmark.New(nexmark.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "nexmark"
	b, err := broker.Start(broker.Options{Topics: map[string]int32{topic: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := nexmark.Produce(context.Background(), b.Addrs(), topic, 1, g, events); err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(qs, ",") {
		q, ok := nexmark.Lookup(name)
		if !ok {
			t.Fatalf("no Nexmark query %q; want one of %s", name, strings.Join(nexmark.Names(), ", "))
		}
		for round := range rounds {
			for _, from := range []string{"generator", "kafka", "kafka-loop"} {
				var run func() (int64, error)
				if from == "kafka-loop" {
					run = func() (int64, error) { return consumeLoop(b.Addrs(), topic, events, q.Reference) }
				} else {
					var results atomic.Int64
					env := weir.NewEnvironment(weir.Config{Parallelism: 1})
					var src weir.Stream[nexmark.Event]
					if from == "kafka" {
						stop := make(chan struct{})
						close(stop)
						src = nexmark.KafkaSource(env, "nexmark", b.Addrs(), topic, stop)
					} else {
						src = nexmark.Source(env, "nexmark", g, events, 1)
					}
					q.Build(src, &results)
					settle()
					run = func() (int64, error) {
						err := env.Execute(context.Background())
						return results.Load(), err
					}
				}
				cpu, n := profiled(t, filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", name, from, round)), run)
				t.Logf("%s from %s, round %d: %.3f CPU s per M events, %d results (load %.1f)", name, from, round, float64(cpu)/1e9/(float64(events)/1e6), n, loadAvg())
			}
		}
	}
}

// profiled runs run under a CPU profile written to path and returns the
// process's CPU time it took and run's count of results.
func profiled(t *testing.T, path string, run func() (int64, error)) (cpuNs, results int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	cpu0 := cpuNanos()
	n, err := run()
	cpuNs = cpuNanos() - cpu0
	pprof.StopCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	return cpuNs, n
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// consumeLoop is the hand-written side from the broker: a franz-go
// consumer reads the topic from its start, decodes each value with the
// JSON library weir's kafka.JSON uses, and hands the events to the
// query's reference function; it stops after events records.
func consumeLoop(brokers []string, topic string, events int64, ref func(iter.Seq[nexmark.Event]) int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var failed error
	n := ref(func(yield func(nexmark.Event) bool) {
		var seen int64
		for seen < events {
			fs := cl.PollFetches(context.Background())
			if err := fs.Err0(); err != nil {
				failed = err
				return
			}
			for it := fs.RecordIter(); !it.Done(); {
				r := it.Next()
				var e nexmark.Event
				if err := json.Unmarshal(r.Value, &e); err != nil {
					failed = err
					return
				}
				seen++
				if !yield(e) {
					return
				}
			}
		}
	})
	return n, failed
}
