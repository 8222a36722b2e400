package httpsink_test

import (
	"net/http"
	"os"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/httpsink"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/watermark"
)

type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
	TS     int64   `json:"ts"`
}

// Orders go to a billing service 100 per request, at most 20 requests a
// second, each with an Idempotency-Key; the orders it refuses are kept in a
// file.
func Example() {
	env := weir.NewEnvironment(weir.Config{})
	orders := weir.FromSource(env, "orders", jsonl.Source[Order]("orders.jsonl"),
		watermark.ForMonotonous[Order]().WithTimestamp(func(o Order, _ int64) (int64, bool) { return o.TS, true }))
	refused := httpsink.Sink(orders, "to-billing", httpsink.Options[Order]{
		URL:               "https://billing.example/v1/orders",
		Batch:             100,
		Format:            httpsink.FormatLines,
		Header:            http.Header{"Authorization": {"Bearer " + os.Getenv("BILLING_TOKEN")}},
		RequestsPerSecond: 20,
	})
	weir.ToSink(refused, "refused", jsonl.Sink[httpsink.DeadLetter[Order]]("refused.jsonl"))
	_ = env // env.Start(ctx) runs it
}
