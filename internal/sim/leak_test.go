package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// TestLeakCheckFindsAGoroutineTheJobLeft: S6 finds a goroutine that a real
// weir job's operator started and never stopped, names where it waits,
// and passes once it has exited.
func TestLeakCheckFindsAGoroutineTheJobLeft(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	id := labelled(context.Background(), func(ctx context.Context) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSlice(env, "src", []int{1, 2, 3}, watermark.ForMonotonous[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
		weir.Collect(weir.Map(src, "leaky", func(v int) int {
			if v == 2 {
				go leakUntil(release)
			}
			return v
		}))
		if err := env.Execute(ctx); err != nil {
			t.Fatal(err)
		}
	})
	// The goroutine may not have run yet (a loaded machine): until it
	// has, the profile shows it without frames.
	var n int
	var stacks []string
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		if n, stacks = goroutinesLabelled(id); len(stacks) == 1 && strings.Contains(stacks[0], "leakUntil") {
			break
		}
	}
	if n != 1 || len(stacks) != 1 || !strings.Contains(stacks[0], "leakUntil") {
		t.Fatalf("found %d labelled goroutines %q; want the one in leakUntil", n, stacks)
	}
	release <- struct{}{}
	if f := checkLeaks(id); f != nil {
		t.Fatalf("after it exited: %v %q", f, f.Records)
	}
}

func leakUntil(ch chan struct{}) { <-ch }
