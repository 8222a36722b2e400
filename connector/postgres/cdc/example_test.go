package cdc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/connector/postgres/cdc"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// The changes of table orders, a snapshot of its rows first, written once
// each to exactly-once files: the slot's position is confirmed to the
// server when the checkpoint covering it completes.
func ExampleNewSource() {
	env := weir.NewEnvironment(weir.Config{Checkpoint: runtime.CheckpointConfig{Interval: time.Second, Dir: "/tmp/orders-cdc/checkpoints"}})
	src := cdc.NewSource(cdc.Options{URL: "postgres://weir@localhost/shop", Tables: []string{"orders"}, Snapshot: true})
	changes := weir.FromSource(env, "orders", src, watermark.ForBoundedOutOfOrderness[cdc.Change](time.Second)).UID("orders")
	lines := weir.Map(changes, "format", func(c cdc.Change) string {
		return fmt.Sprintf("%s %s %v -> %v", c.Op, c.Table, c.Before, c.After)
	}).UID("format")
	weir.TwoPhaseCommit(lines, "files", file.ExactlyOnce("/tmp/orders-cdc/out", func(s string) ([]byte, error) { return []byte(s), nil })).UID("files")
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
	}
}
