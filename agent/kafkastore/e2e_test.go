package kafkastore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// pausingSource emits its records, then waits until release is closed.
type pausingSource struct {
	recs    []string
	release <-chan struct{}
}

func (s pausingSource) CreateReader(ctx runtime.SourceContext) (runtime.Reader[string], error) {
	r := &pausingReader{s: s}
	if ctx.Subtask != 0 {
		r.next = len(s.recs)
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

type pausingReader struct {
	s    pausingSource
	next int
}

func (r *pausingReader) Poll(out runtime.SourceOutput[string]) (runtime.PollStatus, error) {
	for r.next < len(r.s.recs) {
		out.Collect(0, r.s.recs[r.next], int64(r.next))
		r.next++
	}
	select {
	case <-r.s.release:
		return runtime.Done, nil
	default:
		return runtime.Wait, nil
	}
}
func (r *pausingReader) Ready() <-chan struct{} { return r.s.release }
func (r *pausingReader) Close() error           { return nil }
func (r *pausingReader) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, int64(r.next))}, nil
}

// TestJobRestoredElsewhere: a job at parallelism 2 records durable calls in
// the Kafka store, checkpoints while its actions wait, and dies; the broker
// restarts from its data directory; the job restored at parallelism 1 (the
// union of both subtasks' markers) replays the calls instead of repeating
// them and completes.
func TestJobRestoredElsewhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := t.TempDir()
	b, err := broker.Start(broker.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	keys := []string{"order-1", "order-2", "order-3", "order-4"}
	var charges atomic.Int64
	hang := make(chan struct{})
	arrived := make(chan string, len(keys))
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("pay", func(c *agent.RunnerContext, ev agent.Event) error {
		in, _ := agent.Input[string](ev)
		r, err := agent.Durable(c, "charge", in, func(context.Context, string) (string, error) {
			charges.Add(1)
			return "receipt-" + in, nil
		})
		if err != nil {
			return err
		}
		arrived <- in
		select {
		case <-hang:
		case <-c.Context().Done():
			return c.Context().Err()
		}
		c.Output(in + " " + r)
		return nil
	}, agent.TypeInput)}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	build := func(par int, restore string, release <-chan struct{}) (*weir.Environment, *[]string, *sync.Mutex) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), RestoreFrom: restore}})
		src := weir.FromSource[string](env, "src", pausingSource{recs: keys, release: release}, watermark.NoWatermarks[string]()).UID("src")
		store := kafkastore.Factory(kafkastore.Options{Brokers: b.Addrs(), Topic: "job-states", Logger: quiet})
		out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
			agent.Options{Store: store}).UID("agent")
		var mu sync.Mutex
		var got []string
		weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
			return weir.SinkFunc[string](func(r weir.Record[string]) error {
				mu.Lock()
				got = append(got, r.Value)
				mu.Unlock()
				return nil
			}), nil
		})
		return env, &got, &mu
	}
	env, _, _ := build(2, "", make(chan struct{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range keys {
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatal("the actions did not all reach their durable call")
		}
	}
	_, cp, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	b.Close()
	if b, err = broker.Start(broker.Options{DataDir: data}); err != nil {
		t.Fatal(err)
	}

	close(hang)
	done := make(chan struct{})
	close(done)
	env2, got, mu := build(1, cp, done)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(*got)
	var want []string
	for _, k := range keys {
		want = append(want, fmt.Sprintf("%s receipt-%s", k, k))
	}
	if charges.Load() != int64(len(keys)) || !slices.Equal(*got, want) {
		t.Fatalf("%d charges (want %d), outputs %q", charges.Load(), len(keys), *got)
	}
	if n := env2.Metrics().Sum("agent", "callsReplayed"); n != int64(len(keys)) {
		t.Fatalf("callsReplayed = %d", n)
	}
}

// TestStoreFailureFailsJob: when the broker refuses the store's writes the
// job fails with the broker's error, even with ContinueOnError, and the
// action's output is held back.
func TestStoreFailureFailsJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Let the topic be created, then refuse every produce.
	c := b.Cluster()
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.PolicyViolation.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	var calls atomic.Int64
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("pay", func(c *agent.RunnerContext, ev agent.Event) error {
		in, _ := agent.Input[string](ev)
		// The action swallows the store's error: the job fails anyway.
		_, _ = agent.Durable(c, "charge", in, func(context.Context, string) (string, error) {
			calls.Add(1)
			return "receipt", nil
		})
		c.Output(in)
		return nil
	}, agent.TypeInput)}}
	done := make(chan struct{})
	close(done)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128})
	src := weir.FromSource[string](env, "src", pausingSource{recs: []string{"order-1"}, release: done}, watermark.NoWatermarks[string]()).UID("src")
	store := kafkastore.Factory(kafkastore.Options{Brokers: b.Addrs(), Topic: "failing",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
		agent.Options{Store: store, ContinueOnError: true}).UID("agent")
	var got atomic.Int64
	weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
		return weir.SinkFunc[string](func(weir.Record[string]) error { got.Add(1); return nil }), nil
	})
	err = env.Execute(ctx)
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("job ended with %v, want the broker's POLICY_VIOLATION", err)
	}
	if got.Load() != 0 {
		t.Fatalf("%d outputs left although nothing was recorded", got.Load())
	}
}

// TestJobCancelledWhileTheStoreRestores: a job cancelled while its agent
// subtask rebuilds the Kafka store in Open (every fetch failing with a
// retriable error, RequestTimeout an hour away) ends: the operator
// restores through RestoreContext with a context that ends with the job.
func TestJobCancelledWhileTheStoreRestores(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	b := testenv.StartBroker(t, broker.Options{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := kafkastore.Options{Brokers: b.Addrs(), Topic: "job-states", Partitions: 1, RequestTimeout: time.Hour, Logger: quiet}
	// A state in the topic, so that the restore of a fresh start fetches.
	s, err := kafkastore.Open(opts, keygroup.Range{Start: 0, End: 127}, 128)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(storetest.State("k", 0, 0, 0, 1, true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fetched := make(chan struct{}, 1)
	h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(kmsg.Request) bool {
			select {
			case fetched <- struct{}{}:
			default:
			}
			return true
		}})
	defer h.Remove()
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("a", func(c *agent.RunnerContext, ev agent.Event) error {
		return nil
	}, agent.TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128})
	src := weir.FromSource[string](env, "src", pausingSource{recs: []string{"k"}, release: make(chan struct{})}, watermark.NoWatermarks[string]())
	out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
		agent.Options{Store: kafkastore.Factory(opts)})
	weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
		return weir.SinkFunc[string](func(weir.Record[string]) error { return nil }), nil
	})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fetched:
	case <-ctx.Done():
		t.Fatal("the store's restore fetched nothing")
	}
	job.Cancel()
	ended := make(chan error, 1)
	go func() { ended <- job.Wait() }()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled job ended with %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("the job cancelled while its store restored did not end")
	}
}
