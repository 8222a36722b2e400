// Command scaleout runs one keyed job over as many processes as you start
// (package cluster): clicks counted per user in 10-second event-time
// windows, written exactly once to a Kafka topic. Start a broker, fill the
// input, then start the workers, in three terminals; kill one with kill -9
// and watch the others take its tasks over:
//
//	weir broker --topic clicks:8 --topic totals:1 --config group.min.session.timeout.ms=1000
//	go run ./examples/scaleout --produce 200000
//	go run ./examples/scaleout --checkpoints /tmp/scaleout     # three times
//
// Every worker prints the tasks it starts and stops. Give the workers the
// same --group and --checkpoints (a directory or an s3://, gs://, azblob://
// URL they all see).
//
// Without flags it runs by itself: an embedded broker, 20,000 clicks, and
// two workers in this process sharing the job's tasks over a bounded run;
// it prints the number of totals committed and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Click is an input record; its event time is the Kafka timestamp.
type Click struct {
	User string `json:"user"`
}

// Total is an output record.
type Total struct {
	User   string `json:"user"`
	Window int64  `json:"window"`
	Clicks int64  `json:"clicks"`
}

func main() {
	brokers := flag.String("brokers", "", "Kafka bootstrap servers (none: run by itself on an embedded broker)")
	group := flag.String("group", "clicks-per-user", "the job's name: its consumer group, internal topics and transactional ids")
	dir := flag.String("checkpoints", "", "the checkpoint directory every worker sees")
	produce := flag.Int("produce", 0, "write this many clicks to the clicks topic and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *brokers == "" {
		if err := selfContained(ctx, *group); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *produce > 0 {
		if err := fill(ctx, *brokers, *produce); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *dir == "" {
		log.Fatal("scaleout: --checkpoints is required (a directory every worker sees)")
	}
	cfg := cluster.Config{Brokers: []string{*brokers}, Group: *group, SourceTopic: "clicks", KeyedTasks: 4,
		CheckpointBase: *dir, OnTask: func(ev cluster.TaskEvent) {
			fmt.Printf("%s %-8s %s %s\n", time.UnixMilli(ev.Time).Format("15:04:05.000"), ev.Kind, ev.Task, ev.Restored)
		}}
	if err := cluster.Run(ctx, cfg, clicksJob()); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// clicksJob counts clicks per user in 10-second event-time windows.
func clicksJob() cluster.Job[Click, Click, string, Total] {
	return cluster.Job[Click, Click, string, Total]{
		Source:     kafka.JSON[Click](),
		Watermarks: watermark.ForBoundedOutOfOrderness[Click](time.Second),
		Key:        func(c Click) string { return c.User },
		Keyed: func(ks weir.KeyedStream[string, Click]) weir.Stream[Total] {
			counts := window.AggregateKeyed(ks, "clicks", window.Tumbling(10*time.Second), window.Count[Click]())
			return weir.Map(counts, "total", func(r window.Result[string, int64]) Total {
				return Total{User: r.Key, Window: r.Window.Start, Clicks: r.Value}
			})
		},
		Sink: kafka.SinkOptions[Total]{Topic: "totals", Serialize: kafka.SerializeJSON[Total](nil)},
	}
}

// selfContained runs the job over an embedded broker with two workers (two
// group members in this process) until the bounded input is counted.
func selfContained(ctx context.Context, group string) error {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"clicks": 8, "totals": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		return err
	}
	defer b.Close()
	addr := b.Addrs()[0]
	if err := fill(ctx, addr, 20000); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "weir-scaleout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := cluster.Config{Brokers: b.Addrs(), Group: group, SourceTopic: "clicks", KeyedTasks: 4,
		CheckpointBase: dir, CheckpointInterval: 200 * time.Millisecond, Bounded: true,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- cluster.Run(ctx, cfg, clicksJob()) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("totals"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var totals, clicks int64
	for totals == 0 || clicks < 20000 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			var t Total
			if json.Unmarshal(r.Value, &t) == nil {
				totals++
				clicks += t.Clicks
			}
		})
	}
	fmt.Printf("two workers committed %d totals counting %d clicks, exactly once\n", totals, clicks)
	return nil
}

// fill writes n clicks over the clicks topic's partitions, a millisecond
// of event time apart within each.
func fill(ctx context.Context, brokers string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now().Add(-time.Duration(n) * time.Millisecond)
	for i := range n {
		b, _ := json.Marshal(Click{User: fmt.Sprintf("user-%02d", rand.IntN(50))})
		cl.Produce(ctx, &kgo.Record{Value: b, Timestamp: start.Add(time.Duration(i) * time.Millisecond)}, nil)
	}
	return cl.Flush(ctx)
}
