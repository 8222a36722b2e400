package kafkastore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/testenv"
)

var _ agent.ContextRestorer = (*Store)(nil)

// armedClock is a manual clock that reports every timer armed on it.
type armedClock struct {
	*clock.Manual
	armed chan time.Duration
}

func (c armedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Manual.NewTimer(d)
	select {
	case c.armed <- d:
	default:
	}
	return t
}

// TestRestoreContextCancelled: a restore whose offset listings or fetches
// fail with retriable errors (RequestTimeout an hour away) returns, once
// its context is cancelled, an error wrapping context.Canceled. A failed
// listing is retried by the client itself first: the test cancels while
// that goes on. A failed fetch is retried by the store after a wait on the
// clock the context carries, a manual clock that never moves: the test
// cancels during that wait, which only the cancellation can end.
func TestRestoreContextCancelled(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	opts.RequestTimeout = time.Hour
	s := open(t, opts, all)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 1, true)))
	m := markerOf(t, s)
	must(t, s.Close())
	for _, key := range []kmsg.Key{kmsg.ListOffsets, kmsg.Fetch} {
		t.Run(key.Name(), func(t *testing.T) {
			watchdog := testenv.Context(t, time.Minute)
			s2 := open(t, opts, all)
			failed := make(chan struct{}, 1)
			h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerr.NotLeaderForPartition, Count: -1,
				When: func(kmsg.Request) bool {
					select {
					case failed <- struct{}{}:
					default:
					}
					return true
				}})
			defer h.Remove()
			clk := armedClock{clock.NewManual(time.Unix(1_000_000, 0)), make(chan time.Duration, 1)}
			ctx, cancel := context.WithCancel(clock.NewContext(context.Background(), clk))
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s2.RestoreContext(ctx, [][]byte{m}) }()
			// Cancel once the listing has failed (the client is retrying
			// it), or once the store waits to retry the fetch.
			if key == kmsg.ListOffsets {
				select {
				case <-failed:
				case <-watchdog.Done():
					t.Fatal("no ListOffsets request failed")
				}
			} else {
				select {
				case <-clk.armed:
				case err := <-done:
					t.Fatalf("the restore returned (%v) before it waited to retry", err)
				case <-watchdog.Done():
					t.Fatal("the restore armed no wait on its context's clock")
				}
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "kafkastore: ") {
					t.Fatalf("cancelled restore: %v, want a kafkastore error wrapping context.Canceled", err)
				}
			case <-watchdog.Done():
				t.Fatal("the cancelled restore did not return")
			}
		})
	}
}

// TestOpenContextCancelled: an open whose topic never shows in the
// cluster's metadata (every Metadata answer for it says
// LEADER_NOT_AVAILABLE, RequestTimeout an hour away) waits between tries
// on the clock its context carries, a manual clock that never moves; once
// the context is cancelled it returns an error wrapping context.Canceled.
// Open used to sleep there on the wall clock, blind to any cancellation.
func TestOpenContextCancelled(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	opts.RequestTimeout = time.Hour
	watchdog := testenv.Context(t, time.Minute)
	h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: opts.Topic, Err: kerr.LeaderNotAvailable, Count: -1})
	defer h.Remove()
	clk := armedClock{clock.NewManual(time.Unix(1_000_000, 0)), make(chan time.Duration, 1)}
	ctx, cancel := context.WithCancel(clock.NewContext(context.Background(), clk))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := OpenContext(ctx, opts, all, 128)
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case <-clk.armed:
	case err := <-done:
		t.Fatalf("the open returned (%v) before it waited for the topic", err)
	case <-watchdog.Done():
		t.Fatal("the open armed no wait on its context's clock")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "kafkastore: ") {
			t.Fatalf("cancelled open: %v, want a kafkastore error wrapping context.Canceled", err)
		}
	case <-watchdog.Done():
		t.Fatal("the cancelled open did not return")
	}
}
