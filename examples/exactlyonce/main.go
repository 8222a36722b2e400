// Command exactlyonce counts events per key with checkpoints every 50 ms
// into an exactly-once file sink, crashes part way, resumes from the latest
// checkpoint, and shows that every event was counted exactly once.
//
//	go run ./examples/exactlyonce
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

var errCrash = errors.New("simulated crash")

type counter struct {
	n *state.ValueState[int64, int64]
}

func (c *counter) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err error
	c.n, err = state.Value[int64, int64](ctx.State(), "n")
	return err
}

func (c *counter) ProcessElement(v int64, ctx *weir.KeyedContext[int64, string]) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	ctx.Collect(fmt.Sprintf("key %d count %d (event %d)", v%5, n+1, v))
	return nil
}

func (c *counter) OnTimer(int64, *weir.KeyedContext[int64, string]) error { return nil }

func run(dir string, crashAt int64) error {
	cfg := weir.Config{Parallelism: 2, MaxParallelism: 128,
		Checkpoint: weir.CheckpointConfig{Interval: 50 * time.Millisecond, Dir: filepath.Join(dir, "checkpoints")}}
	if latest, id, err := checkpoint.Latest(cfg.Checkpoint.Dir); err == nil {
		fmt.Println("resuming from checkpoint", id)
		cfg.Checkpoint.RestoreFrom = latest
	}
	env := weir.NewEnvironment(cfg)
	var seen atomic.Int64
	src := weir.GenerateSplits(env, "events", 2, 1000, func(split int, i int64) weir.Record[int64] {
		time.Sleep(200 * time.Microsecond)
		return weir.Record[int64]{Value: i*2 + int64(split), Timestamp: i}
	}, watermark.ForMonotonous[int64]()).UID("events")
	src = weir.MapErr(src, "maybe-crash", func(v int64) (int64, error) {
		if seen.Add(1) == crashAt {
			return 0, errCrash
		}
		return v, nil
	}).UID("maybe-crash")
	counts := weir.Process(weir.KeyBy(src, func(v int64) int64 { return v % 5 }), "count",
		func() weir.KeyedProcessFunction[int64, int64, string] { return &counter{} }).UID("count")
	weir.TwoPhaseCommit(counts, "out", file.ExactlyOnce(filepath.Join(dir, "out"),
		func(s string) ([]byte, error) { return []byte(s), nil })).UID("out")
	return env.Execute(context.Background())
}

func main() {
	dir, err := os.MkdirTemp("", "weir-exactlyonce")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(dir, 1200); !errors.Is(err, errCrash) {
		log.Fatalf("first run: %v", err)
	}
	fmt.Println("first run crashed after 1200 events")
	if err := run(dir, -1); err != nil {
		log.Fatal(err)
	}
	parts, err := file.Committed(filepath.Join(dir, "out"))
	if err != nil {
		log.Fatal(err)
	}
	events := map[string]int{}
	lines := 0
	for _, b := range parts {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			lines++
			events[l[strings.Index(l, "(event "):]]++
		}
	}
	dups := 0
	for _, n := range events {
		if n > 1 {
			dups++
		}
	}
	fmt.Printf("committed %d lines for %d distinct events of 2000; duplicates: %d\n", lines, len(events), dups)
}
