package ordering

import (
	"fmt"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Clock adds a source without records whose watermark follows processing
// time: every tick it reports now - lag (C1-C3 of the package
// documentation). Combine it with data streams (weir.Union, or a two-input
// operator) to keep event time moving once they have caught up: their
// caught-up splits are idle, so they leave the minimum and the clock
// drives it; until then they hold it, and the clock changes nothing. The
// lag bounds how late a live record may arrive and still be put in order.
//
// The stream carries no records; T is whatever the streams it is combined
// with carry. Its parallelism is 1.
func Clock[T any](env *weir.Environment, name string, lag, tick time.Duration) weir.Stream[T] {
	if tick <= 0 {
		panic(fmt.Sprintf("ordering: Clock %q: tick must be positive, got %v", name, tick))
	}
	if lag < 0 {
		panic(fmt.Sprintf("ordering: Clock %q: lag must not be negative, got %v", name, lag))
	}
	src := runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		c := ctx.Clock
		if c == nil {
			c = clock.Real
		}
		return &clockReader[T]{clk: c, lag: lag.Milliseconds(), tick: tick, last: watermark.Min,
			ready: make(chan struct{}, 1), done: make(chan struct{})}, nil
	})
	return weir.FromSource(env, name, src, watermark.NoWatermarks[T]()).Parallelism(1)
}

// clockReader emits the clock's watermark on split 0. A goroutine turns the
// ticks of a clock.Timer (which a clock.Manual fires when a test advances
// it) into Ready signals.
type clockReader[T any] struct {
	clk   clock.Clock
	lag   int64
	tick  time.Duration
	last  int64
	ready chan struct{}
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	start bool
}

func (r *clockReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.start {
		r.start = true
		out.AddSplit(0)
		t := r.clk.NewTimer(r.tick)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer t.Stop()
			for {
				select {
				case <-t.C():
					select {
					case r.ready <- struct{}{}:
					default:
					}
					t.Reset(r.tick)
				case <-r.done:
					return
				}
			}
		}()
	}
	if wm := clock.NowMillis(r.clk) - r.lag; wm > r.last {
		r.last = wm
		out.EmitWatermark(0, wm)
	}
	return runtime.Wait, nil
}

func (r *clockReader[T]) Ready() <-chan struct{} { return r.ready }

func (r *clockReader[T]) Close() error {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
	return nil
}
