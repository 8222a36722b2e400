package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/runtime"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startBroker(t *testing.T, topics map[string]int32) *broker.Broker {
	t.Helper()
	return testenv.StartBroker(t, broker.Options{Topics: topics})
}

func client(t *testing.T, b *broker.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 45*time.Second) }

// rec builds a record for partition p with value v and timestamp ts (ms).
func rec(topic string, p int32, ts int64, v string) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Value: []byte(v), Key: []byte(v), Timestamp: time.UnixMilli(ts)}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func endOffsets(t *testing.T, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	l, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// lastRecordOffsets reads every record of topic (read_uncommitted) and
// returns, per partition, the offset of the last record a consumer sees.
func lastRecordOffsets(t *testing.T, b *broker.Broker, topic string, isolation kgo.IsolationLevel) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cl := client(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	out := map[int32]int64{}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = r.Offset })
	}
	return out
}

// sink collects records from any subtask, safe to read while the job runs.
type sink[T any] struct {
	mu   sync.Mutex
	recs []weir.Record[T]
}

func (s *sink[T]) add(r weir.Record[T]) error {
	s.mu.Lock()
	s.recs = append(s.recs, r)
	s.mu.Unlock()
	return nil
}

func (s *sink[T]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

func (s *sink[T]) records() []weir.Record[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]weir.Record[T](nil), s.recs...)
}

func collectTo[T any](st weir.Stream[T]) *sink[T] {
	s := &sink[T]{}
	weir.ToSink(st, "test-sink", func(*runtime.Context) (weir.SinkWriter[T], error) {
		return weir.SinkFunc[T](s.add), nil
	})
	return s
}

func sortedStrings(recs []weir.Record[Message[string]]) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s/%d/%d=%s@%d", r.Value.Topic, r.Value.Partition, r.Value.Offset, r.Value.Value, r.Timestamp))
	}
	sort.Strings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }

// holdUntil is an Options.BeforeStart that keeps subtask (every subtask if
// it is -1) from starting until gate is closed: a partition that starts
// late.
func holdUntil(gate <-chan struct{}, subtask int) func(ctx context.Context, subtask int) error {
	return func(ctx context.Context, sub int) error {
		if subtask < 0 || sub == subtask {
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return nil
	}
}
