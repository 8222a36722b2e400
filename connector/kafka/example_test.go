package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

type Order struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

// A job reading a topic from the embedded broker: it reports when the
// history has been read (the topic caught up with its end offsets).
func ExampleNewSource() {
	b, _ := broker.Start(broker.Options{Topics: map[string]int32{"orders": 1}})
	defer b.Close()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	for i, v := range []string{`{"id":"a","qty":1}`, `{"id":"b","qty":2}`, `not json`} {
		cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte(v), Timestamp: time.UnixMilli(int64(1000 + i))})
	}
	cl.Close()

	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := kafka.NewSource(kafka.Options{Brokers: []string{b.Addr()}, Topics: []string{"orders"}}, kafka.JSON[Order]())
	orders := weir.FromSource(env, "orders", src, watermark.ForMonotonous[Order]())
	got := make(chan string, 10)
	weir.ToSink(orders, "print", func(*runtime.Context) (weir.SinkWriter[Order], error) {
		return weir.SinkFunc[Order](func(r weir.Record[Order]) error {
			got <- fmt.Sprintf("%s x%d at %d", r.Value.ID, r.Value.Qty, r.Timestamp)
			return nil
		}), nil
	})
	weir.ToSink(weir.DeadLetters(orders), "bad", func(*runtime.Context) (weir.SinkWriter[weir.DeadLetter], error) {
		return weir.SinkFunc[weir.DeadLetter](func(r weir.Record[weir.DeadLetter]) error {
			got <- fmt.Sprintf("dead letter at offset %d", r.Value.Position)
			return nil
		}), nil
	})
	job, _ := env.Start(context.Background())
	for range 3 {
		fmt.Println(<-got)
	}
	for !src.CaughtUp() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("caught up:", src.Status()[0].Position == src.Status()[0].End)
	job.Cancel()
	job.Wait()
	// Output:
	// a x1 at 1000
	// b x2 at 1001
	// dead letter at offset 2
	// caught up: true
}
