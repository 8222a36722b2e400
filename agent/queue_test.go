package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// queueStore is a MemoryStore that is a Queuer whose writes become
// durable only when the test says so: each PutQueued hands the test a
// gatedWrite (on writes) and Put waits like one.
type queueStore struct {
	*MemoryStore
	writes chan *gatedWrite
}

type gatedWrite struct {
	st      *ActionState
	err     error
	waiting chan struct{} // closed when Wait is first called
	once    sync.Once
	durable chan struct{} // closed by the test
}

func (w *gatedWrite) Wait() error {
	w.once.Do(func() { close(w.waiting) })
	<-w.durable
	return w.err
}

func (s *queueStore) PutQueued(st *ActionState) (Pending, error) {
	if err := s.MemoryStore.Put(st); err != nil {
		return nil, err
	}
	w := &gatedWrite{st: st, waiting: make(chan struct{}), durable: make(chan struct{})}
	s.writes <- w
	return w, nil
}

func (s *queueStore) Put(st *ActionState) error {
	p, err := s.PutQueued(st)
	if err != nil {
		return err
	}
	return p.Wait()
}

func (s *queueStore) Close() error { return nil }

func (s *queueStore) factory() StoreFactory {
	return func(*runtime.Context) (ActionStateStore, error) { return s, nil }
}

// next returns the store's next write.
func (s *queueStore) next(t *testing.T, ctx context.Context) *gatedWrite {
	t.Helper()
	select {
	case w := <-s.writes:
		return w
	case <-ctx.Done():
		t.Fatal("no write queued")
		return nil
	}
}

func awaitClosed(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestQueuedCallRecords: with a Queuer store, a durable call's record is
// queued and the action goes on, but its next durable call does not start
// until that record is durable, and its outputs do not leave until its
// completed state (and the last call's record) are.
func TestQueuedCallRecords(t *testing.T) {
	ctx := testCtx(t)
	qs := &queueStore{MemoryStore: NewMemoryStore(), writes: make(chan *gatedWrite, 16)}
	var started [2]atomic.Bool
	a := &Agent{Actions: []Action{NewAction("two-calls", func(c *RunnerContext, ev Event) error {
		for i := range 2 {
			if _, err := Durable(c, "call", i, func(context.Context, string) (int, error) {
				started[i].Store(true)
				return i, nil
			}); err != nil {
				return err
			}
		}
		c.Output("done")
		return nil
	}, TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k", Text: "x"}, 1)), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: qs.factory()}))
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()

	call0 := qs.next(t, ctx)
	if c := call0.st.Calls; call0.st.Completed || len(c) != 1 {
		t.Fatalf("first write: %+v, want the record of call 0", call0.st)
	}
	// The action waits for call 0's record before call 1 can start.
	awaitClosed(t, ctx, call0.waiting, "the wait for call 0's record")
	if started[1].Load() {
		t.Fatal("call 1 started before call 0's record was durable")
	}
	close(call0.durable)
	call1 := qs.next(t, ctx)
	if !started[1].Load() || len(call1.st.Calls) != 2 || call1.st.Completed {
		t.Fatalf("second write: %+v, want the record of call 1", call1.st)
	}
	// The completed state is queued before the wait for call 1's record.
	completed := qs.next(t, ctx)
	if !completed.st.Completed || len(completed.st.Sent) != 1 {
		t.Fatalf("third write: %+v, want the completed state", completed.st)
	}
	awaitClosed(t, ctx, call1.waiting, "the wait for call 1's record")
	close(call1.durable)
	awaitClosed(t, ctx, completed.waiting, "the wait for the completed state")
	if evs, _ := rc.snapshot(); len(values(evs)) != 0 {
		t.Fatalf("outputs %v left before the completed state was durable", values(evs))
	}
	close(completed.durable)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	if got := values(evs); len(got) != 1 || got[0] != "done" {
		t.Fatalf("outputs %v, want [done]", got)
	}
}

// TestQueuedRecordFailure: a call's record that fails after the call
// returned (queued) fails the job, with ContinueOnError too and whether
// the action then succeeds or fails; no output leaves.
func TestQueuedRecordFailure(t *testing.T) {
	for _, actionFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "action-succeeds", true: "action-fails"}[actionFails], func(t *testing.T) {
			ctx := testCtx(t)
			qs := &queueStore{MemoryStore: NewMemoryStore(), writes: make(chan *gatedWrite, 16)}
			a := &Agent{Actions: []Action{NewAction("one-call", func(c *RunnerContext, ev Event) error {
				if _, err := Durable(c, "call", 0, func(context.Context, string) (int, error) { return 0, nil }); err != nil {
					return err
				}
				if actionFails {
					return errors.New("the action's own failure")
				}
				c.Output("done")
				return nil
			}, TypeInput)}}
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k", Text: "x"}, 1)), watermark.NoWatermarks[msg]())
			rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a,
				Options{Store: qs.factory(), ContinueOnError: true}))
			done := make(chan error, 1)
			go func() { done <- env.Execute(ctx) }()
			go func() {
				for {
					select {
					case w := <-qs.writes:
						w.err = errors.New("disk full")
						close(w.durable)
					case <-ctx.Done():
						return
					}
				}
			}()
			err := <-done
			if err == nil || !strings.Contains(err.Error(), "action-state store") || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("job ended with %v, want the store's failure", err)
			}
			if evs, _ := rc.snapshot(); len(values(evs)) != 0 {
				t.Fatalf("outputs %v left although the store failed", values(evs))
			}
		})
	}
}
