// Command asynclookup enriches a stream with a slow lookup without
// stalling it: the async I/O operator keeps up to 50 calls in flight and,
// in ordered mode, emits the results in input order.
//
//	go run ./examples/asynclookup
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/asyncio"
	"github.com/weirproject/weir/watermark"
)

func main() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	ids := weir.Generate(env, "ids", 200, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]())
	lookup := func(ctx context.Context, id int64) ([]string, error) {
		select { // a remote call taking 5-25 ms
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []string{fmt.Sprintf("user-%03d", id)}, nil
	}
	names := asyncio.Ordered(ids, "lookup", lookup, asyncio.Options{Capacity: 50, Timeout: time.Second})
	out := weir.Collect(names)
	start := time.Now()
	if err := env.Execute(context.Background()); err != nil {
		log.Fatal(err)
	}
	v := out.Values()
	fmt.Printf("%d lookups of ~15 ms each in %v (one at a time would take ~3 s)\n", len(v), time.Since(start).Round(10*time.Millisecond))
	fmt.Println("first:", v[0], "last:", v[len(v)-1])
}
