package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/runtime"
)

// A scripted single-split source: records, watermarks and pauses, whose
// position survives checkpoints.
type stepKind int

const (
	stepRecord stepKind = iota
	stepWatermark
	stepPause
	stepIdle
)

type step[T any] struct {
	kind  stepKind
	v     T
	ts    int64
	until <-chan struct{}
}

func rec[T any](v T, ts int64) step[T]           { return step[T]{kind: stepRecord, v: v, ts: ts} }
func wmark[T any](ts int64) step[T]              { return step[T]{kind: stepWatermark, ts: ts} }
func pause[T any](ch <-chan struct{}) step[T]    { return step[T]{kind: stepPause, until: ch} }
func idle[T any]() step[T]                       { return step[T]{kind: stepIdle} }
func scripted[T any](steps ...step[T]) script[T] { return script[T]{steps: steps} }

type script[T any] struct{ steps []step[T] }

func (s script[T]) CreateReader(ctx runtime.SourceContext) (runtime.Reader[T], error) {
	r := &scriptReader[T]{steps: s.steps}
	if ctx.Subtask != 0 {
		r.next = len(s.steps)
	}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(runtime.SplitsList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			n, _ := binary.Varint(it)
			r.next = int(n)
		}
	}
	return r, nil
}

type scriptReader[T any] struct {
	steps []step[T]
	next  int
	ready <-chan struct{}
}

func (r *scriptReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	for n := 0; n < 64; n++ {
		if r.next >= len(r.steps) {
			return runtime.Done, nil
		}
		s := r.steps[r.next]
		switch s.kind {
		case stepRecord:
			out.Collect(0, s.v, s.ts)
		case stepWatermark:
			out.EmitWatermark(0, s.ts)
		case stepIdle:
			out.SetSplitIdle(0, true)
		case stepPause:
			select {
			case <-s.until:
			default:
				r.ready = s.until
				return runtime.Wait, nil
			}
		}
		r.next++
	}
	return runtime.More, nil
}

func (r *scriptReader[T]) Ready() <-chan struct{} { return r.ready }
func (r *scriptReader[T]) Close() error           { return nil }
func (r *scriptReader[T]) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, int64(r.next))}, nil
}

// recorder is a sink that records records and watermarks in the order it
// receives them.
type recorder[T any] struct {
	mu      sync.Mutex
	events  []recEvent[T]
	changed chan struct{}
}

type recEvent[T any] struct {
	wm   bool
	idle bool
	ts   int64
	v    T
}

func (e recEvent[T]) String() string {
	if e.idle {
		return "IDLE"
	}
	if e.wm {
		return fmt.Sprintf("WM(%d)", e.ts)
	}
	return fmt.Sprintf("%v@%d", e.v, e.ts)
}

func record[T any](s weir.Stream[T]) *recorder[T] {
	rc := &recorder[T]{changed: make(chan struct{})}
	weir.Transform(s, "record", func() runtime.OneInputOperator[T, struct{}] { return &recordOp[T]{rc: rc} }).Parallelism(1)
	return rc
}

func (rc *recorder[T]) add(e recEvent[T]) {
	rc.mu.Lock()
	rc.events = append(rc.events, e)
	close(rc.changed)
	rc.changed = make(chan struct{})
	rc.mu.Unlock()
}

func (rc *recorder[T]) snapshot() ([]recEvent[T], chan struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recEvent[T](nil), rc.events...), rc.changed
}

// waitFor waits until cond holds for the events recorded so far.
func (rc *recorder[T]) waitFor(t *testing.T, ctx context.Context, what string, cond func([]recEvent[T]) bool) []recEvent[T] {
	t.Helper()
	for {
		evs, ch := rc.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; recorded %v", what, ctx.Err(), evs)
		}
	}
}

type recordOp[T any] struct {
	runtime.Base[struct{}]
	rc *recorder[T]
}

func (o *recordOp[T]) ProcessRecord(r runtime.Record[T]) error {
	o.rc.add(recEvent[T]{ts: r.Timestamp, v: r.Value})
	return nil
}
func (o *recordOp[T]) ProcessWatermark(ts int64) error {
	o.rc.add(recEvent[T]{wm: true, ts: ts})
	return nil
}
func (o *recordOp[T]) ProcessIdle(idle bool) error {
	if idle {
		o.rc.add(recEvent[T]{idle: true})
	}
	return nil
}
func (o *recordOp[T]) EndInput() error { return nil }

// gatedModel answers "re:<prompt>" once the gate of the prompt (if any) is
// open; it reports calls as they arrive and counts concurrent calls.
type gatedModel struct {
	mu       sync.Mutex
	gates    map[string]chan struct{}
	entered  chan string
	latency  func(prompt string) time.Duration
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	calls    atomic.Int64
}

func newGatedModel() *gatedModel {
	return &gatedModel{gates: map[string]chan struct{}{}, entered: make(chan string, 1024)}
}

// gate makes calls with prompt p wait until the returned function is
// called.
func (m *gatedModel) gate(p string) func() {
	ch := make(chan struct{})
	m.mu.Lock()
	m.gates[p] = ch
	m.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func lastUser(req model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

func (m *gatedModel) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	p := lastUser(req)
	m.calls.Add(1)
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		old := m.maxSeen.Load()
		if n <= old || m.maxSeen.CompareAndSwap(old, n) {
			break
		}
	}
	select {
	case m.entered <- p:
	default:
	}
	m.mu.Lock()
	g := m.gates[p]
	m.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if m.latency != nil {
		if d := m.latency(p); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
	}
	return &model.Response{Message: model.Assistant("re:" + p)}, nil
}

// waitEntered waits until a call with prompt p has arrived.
func (m *gatedModel) waitEntered(t *testing.T, ctx context.Context, p string) {
	t.Helper()
	for {
		select {
		case got := <-m.entered:
			if got == p {
				return
			}
		case <-ctx.Done():
			t.Fatalf("model call %q did not arrive: %v", p, ctx.Err())
		}
	}
}

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 30*time.Second) }

// msg is the input record of most tests.
type msg struct {
	Key  string `json:"key"`
	Text string `json:"text"`
	N    int    `json:"n"`
}

// chatAgent calls model "m" with the input text and outputs the reply.
func chatAgent(m model.ChatModel) *Agent {
	return &Agent{
		Models: map[string]model.ChatModel{"m": m},
		Actions: []Action{NewAction("chat", func(ctx *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			resp, err := ctx.Chat("m", model.Request{Messages: []model.Message{model.User(in.Text)}})
			if err != nil {
				return err
			}
			ctx.Output(resp.Message.Content)
			return nil
		}, TypeInput)},
	}
}
