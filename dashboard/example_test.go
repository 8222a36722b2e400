package dashboard_test

import (
	"context"
	"fmt"
	"log"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/watermark"
)

// Attach the dashboard to a job started from Go: it serves the page and
// the API on the address given (here a free loopback port) until Close.
func ExampleStart() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "numbers", []int64{1, 2, 3}, watermark.ForMonotonous[int64]().
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, true }))
	weir.Collect(weir.Map(src, "double", func(v int64) int64 { return 2 * v }))
	job, err := env.Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ui, err := dashboard.Start("127.0.0.1:0", job, dashboard.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer ui.Close()
	fmt.Println("dashboard on", ui.URL())
	if err := job.Wait(); err != nil {
		log.Fatal(err)
	}
}
