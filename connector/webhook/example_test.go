package webhook_test

import (
	"os"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
	TS     int64   `json:"ts"`
}

// Orders POSTed to http://127.0.0.1:8080/orders with the bearer token are
// answered 200 once a checkpoint (every 5 s) covers them.
func Example() {
	env := weir.NewEnvironment(weir.Config{Checkpoint: runtime.CheckpointConfig{Interval: 5 * time.Second, Dir: "checkpoints"}})
	src := webhook.New(webhook.Options[Order]{
		Path:      "/orders",
		Token:     os.Getenv("INGEST_TOKEN"),
		Timestamp: func(o Order) (int64, bool) { return o.TS, o.TS > 0 },
	})
	orders := weir.FromSource(env, "orders", runtime.Source[Order](src), watermark.ForBoundedOutOfOrderness[Order](time.Second))
	weir.Print(orders, os.Stdout)
	_ = env // env.Start(ctx) runs it
}
