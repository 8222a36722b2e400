package jsonl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/watermark"
)

type Order struct {
	ID       int     `json:"id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	TS       int64   `json:"ts"` // Unix ms; 0 when missing
}

// Reads orders from a JSON Lines file, writes the good ones to another
// file and the bad ones, with the reason, to a dead-letter file.
func Example() {
	dir, err := os.MkdirTemp("", "jsonl-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "archive.jsonl")
	deadLetters := filepath.Join(dir, "dead.jsonl")

	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	orders := weir.FromSource(env, "orders", jsonl.Source[Order]("testdata/orders.jsonl"),
		watermark.ForBoundedOutOfOrderness[Order](time.Second).
			WithTimestamp(func(o Order, _ int64) (int64, bool) { return o.TS, o.TS > 0 }))
	weir.ToSink(orders, "archive", jsonl.Sink[Order](archive))
	weir.ToSink(weir.DeadLetters(orders), "dead-letters", jsonl.DeadLetterSink(deadLetters))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		panic(err)
	}

	a, _ := os.ReadFile(archive)
	fmt.Printf("archive:\n%s", a)
	d, _ := os.ReadFile(deadLetters)
	fmt.Println("dead letters:")
	for _, line := range splitLines(d) {
		var x struct {
			Position int64           `json:"position"`
			Reason   string          `json:"reason"`
			Raw      string          `json:"raw"`
			Value    json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(line, &x); err != nil {
			panic(err)
		}
		fmt.Printf("position %d: %s\n", x.Position, x.Reason)
		if x.Raw != "" {
			fmt.Printf("  raw: %s\n", x.Raw)
		}
		if x.Value != nil {
			fmt.Printf("  value: %s\n", x.Value)
		}
	}
	fmt.Println("deadLetters metric:", env.Metrics().Sum("orders", "deadLetters"))
	// Output:
	// archive:
	// {"id":1,"customer":"ann","amount":12.5,"ts":1000}
	// {"id":2,"customer":"bob","amount":3,"ts":1500}
	// {"id":5,"customer":"bob","amount":1,"ts":2500}
	// dead letters:
	// position 3: jsonl: testdata/orders.jsonl:3: invalid character 'o' looking for beginning of value
	//   raw: {"id":3,"customer":"ann","amount":oops,"ts":2000}
	// position 0: record has no usable timestamp
	//   value: {"id":4,"customer":"cid","amount":7.25,"ts":0}
	// deadLetters metric: 2
}

// With Options.Timestamp the reader takes the event time from each record,
// so a record without one is a dead letter that names its file and line.
// The strategy then has no Timestamp function: it uses the source's.
func ExampleSourceWith() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := jsonl.SourceWith(jsonl.Options[Order]{
		Timestamp:             func(o Order) (int64, bool) { return o.TS, o.TS > 0 },
		DisallowUnknownFields: true,
	}, "testdata/orders.jsonl")
	orders := weir.FromSource(env, "orders", src, watermark.ForBoundedOutOfOrderness[Order](time.Second))
	good := weir.Collect(orders)
	dead := weir.Collect(weir.DeadLetters(orders))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		panic(err)
	}
	for _, r := range good.Records() {
		fmt.Printf("order %d of %s at %d\n", r.Value.ID, r.Value.Customer, r.Timestamp)
	}
	for _, d := range dead.Values() {
		fmt.Println(d.Reason)
	}
	// Output:
	// order 1 of ann at 1000
	// order 2 of bob at 1500
	// order 5 of bob at 2500
	// jsonl: testdata/orders.jsonl:3: invalid character 'o' looking for beginning of value
	// jsonl: testdata/orders.jsonl:4: record has no usable timestamp
}

func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		lines = append(lines, b[:i])
		b = b[min(i+1, len(b)):]
	}
	return lines
}
