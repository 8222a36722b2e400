package experiment

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/testenv"
)

// BenchmarkReplay replays the default history (end-offset policy, no
// stagger) beside franz-go's consumer reading it, for profiling:
//
//	go test -run XXX -bench Replay -benchtime 3x -cpuprofile cpu.out ./ordering/experiment/
//
// WEIR_REPLAY_RECORDS=200000 replays a history of that many records
// instead of the default; WEIR_REPLAY_HELD=encoded has the sort hold its
// records encoded (SortOptions.HeldCodec) instead of as values. Besides the rates it reports the process CPU time
// per history event of each pass (weir-cpu-us/event, raw-cpu-us/event):
// everything the process does meanwhile, the embedded broker included, and
// for weir the job's start and stop; on a shared machine the rate is
// bounded by the cores the process gets divided by this cost.
func BenchmarkReplay(b *testing.B) {
	cfg := Defaults.withDefaults()
	if s := os.Getenv("WEIR_REPLAY_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("WEIR_REPLAY_RECORDS=%q: want a positive number of records", s)
		}
		cfg.HistoryRecords = n
	}
	// WEIR_REPLAY_HELD=encoded holds the sort's records encoded (the
	// comparison for SortOptions.HeldCodec).
	cfg.HeldEncoded = os.Getenv("WEIR_REPLAY_HELD") == "encoded"
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	hist := history(cfg, time.Now())
	topics := map[string]int32{}
	for t := range cfg.Topics {
		topics[topicName(t)] = int32(cfg.Partitions)
	}
	br, err := broker.Start(broker.Options{Topics: topics})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := produceAll(ctx, cl, hist); err != nil {
		b.Fatal(err)
	}
	var histN int64
	for t := range hist {
		for p := range hist[t] {
			histN += int64(len(hist[t][p]))
		}
	}
	var weirSum, rawSum float64
	var weirCPU, rawCPU time.Duration
	for b.Loop() {
		c0 := cpuTime()
		raw, err := rawConsume(ctx, cfg, br.Addrs(), histN)
		c1 := cpuTime()
		if err != nil {
			b.Fatal(err)
		}
		rate, err := replay(ctx, cfg, "end-offsets", br.Addrs(), histN)
		if err != nil {
			b.Fatal(err)
		}
		weirCPU += cpuTime() - c1
		rawCPU += c1 - c0
		weirSum += rate
		rawSum += raw
	}
	b.ReportMetric(weirSum/float64(b.N), "weir-events/s")
	b.ReportMetric(rawSum/float64(b.N), "raw-events/s")
	b.ReportMetric(weirSum/rawSum, "weir/raw")
	perEvent := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(histN) / float64(b.N) }
	b.ReportMetric(perEvent(weirCPU), "weir-cpu-us/event")
	b.ReportMetric(perEvent(rawCPU), "raw-cpu-us/event")
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration { return testenv.CPUTime() }
