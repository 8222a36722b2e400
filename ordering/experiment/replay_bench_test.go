package experiment

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
)

// BenchmarkReplay replays the default history (end-offset policy, no
// stagger) beside franz-go's consumer reading it, for profiling:
//
//	go test -run XXX -bench Replay -benchtime 3x -cpuprofile cpu.out ./ordering/experiment/
func BenchmarkReplay(b *testing.B) {
	cfg := Defaults.withDefaults()
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
	for b.Loop() {
		raw, err := rawConsume(ctx, cfg, br.Addrs(), histN)
		if err != nil {
			b.Fatal(err)
		}
		rate, err := replay(ctx, cfg, "end-offsets", br.Addrs(), histN)
		if err != nil {
			b.Fatal(err)
		}
		weirSum += rate
		rawSum += raw
	}
	b.ReportMetric(weirSum/float64(b.N), "weir-events/s")
	b.ReportMetric(rawSum/float64(b.N), "raw-events/s")
	b.ReportMetric(weirSum/rawSum, "weir/raw")
}
