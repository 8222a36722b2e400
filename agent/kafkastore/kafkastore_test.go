package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/keygroup"
)

const maxP = 128

var (
	all   = keygroup.Range{Start: 0, End: maxP - 1}
	lower = keygroup.Range{Start: 0, End: maxP/2 - 1}
	upper = keygroup.Range{Start: maxP / 2, End: maxP - 1}
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var topicSeq atomic.Int64

func newTopic() string { return fmt.Sprintf("states-%d", topicSeq.Add(1)) }

func startBroker(t testing.TB, dir string) *broker.Broker {
	t.Helper()
	return testenv.StartBroker(t, broker.Options{DataDir: dir})
}

func options(b *broker.Broker, topic string, parts int32) Options {
	return Options{Brokers: b.Addrs(), Topic: topic, Partitions: parts, Logger: quiet}
}

func open(t testing.TB, opts Options, rng keygroup.Range) *Store {
	t.Helper()
	s, err := Open(opts, rng, maxP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func must(t interface {
	Helper()
	Fatal(...any)
}, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func markerOf(t testing.TB, s *Store) []byte {
	t.Helper()
	m, err := s.Marker()
	must(t, err)
	return m
}

// ids returns the run keys of the states s holds, sorted.
func ids(s *Store) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, r := range s.idx.All() {
		e := r.V
		if k != e.key || r.ID != e.id || agent.Position(r.Pos) != e.pos {
			panic(fmt.Sprintf("run %q filed under key %q, id %q, position %+v", e.id, k, r.ID, r.Pos))
		}
		out = append(out, fmt.Sprintf("%s/%d/%d", e.key, e.pos.Seq, e.pos.EventID))
	}
	slices.Sort(out)
	return out
}

func TestConformance(t *testing.T) {
	b := startBroker(t, "")
	storetest.Run(t, func(t *testing.T) agent.ActionStateStore { return open(t, options(b, newTopic(), 4), all) })
}

// TestTopic: the store creates a compacted topic; it refuses an existing
// topic that is not compacted.
func TestTopic(t *testing.T) {
	b := startBroker(t, "")
	topic := newTopic()
	open(t, options(b, topic, 3), all)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	must(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	must(t, err)
	rc, err := rcs.On(topic, nil)
	must(t, err)
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if policy != "compact" {
		t.Fatalf("cleanup.policy = %q", policy)
	}
	td, err := adm.ListTopics(context.Background(), topic)
	must(t, err)
	if n := len(td[topic].Partitions); n != 3 {
		t.Fatalf("%d partitions", n)
	}

	plain := newTopic()
	must(t, b.CreateTopic(plain, 1, map[string]string{"cleanup.policy": "delete"}))
	if _, err := Open(options(b, plain, 1), all, maxP); err == nil || !strings.Contains(err.Error(), "cleanup.policy=compact") {
		t.Fatalf("Open on a non-compacted topic: %v", err)
	}
}

// TestRoundTripAcrossRestart: states Put before a broker restart (data
// directory) are rebuilt by a new store from the marker; the store keeps
// a partition per key-group range.
func TestRoundTripAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	topic := newTopic()
	s := open(t, options(b, topic, 2), all)
	m0 := markerOf(t, s)
	var want []*agent.ActionState
	for i := range 10 {
		st := storetest.State(fmt.Sprintf("k%d", i%3), int64(i), 0, 0, (i*13)%maxP, i%2 == 0)
		want = append(want, st)
		must(t, s.Put(st))
	}
	for _, st := range want {
		got, err := s.Get(st.ID)
		must(t, err)
		if !storetest.Equal(got, st) {
			t.Fatalf("Get = %+v, want %+v", got, st)
		}
	}
	must(t, s.Close())
	b.Close()

	b2 := startBroker(t, dir)
	s2 := open(t, options(b2, topic, 2), all)
	if len(ids(s2)) != 0 {
		t.Fatalf("a store opened without Restore holds %v", ids(s2))
	}
	must(t, s2.Restore([][]byte{m0}))
	for _, st := range want {
		got, err := s2.Get(st.ID)
		must(t, err)
		if !storetest.Equal(got, st) {
			t.Fatalf("after the restore Get = %+v, want %+v", got, st)
		}
	}
}

// TestRestoreFromMarker: a restore rebuilds exactly the states live at the
// marker plus those written after it; records of runs that were dead at
// the marker (an earlier job's, never pruned) are not read.
func TestRestoreFromMarker(t *testing.T) {
	b := startBroker(t, "")
	topic := newTopic()
	old := open(t, options(b, topic, 1), all)
	must(t, old.Put(storetest.State("ghost", 0, 0, 0, 3, true))) // an earlier run's state
	must(t, old.Close())

	s := open(t, options(b, topic, 1), all)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 3, true)))
	must(t, s.Put(storetest.State("a", 1, 0, 0, 3, false)))
	must(t, s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 0}}))
	m := markerOf(t, s) // live: a/1
	must(t, s.Put(storetest.State("a", 1, 0, 0, 3, true)))
	must(t, s.Put(storetest.State("b", 0, 0, 0, 9, false)))
	must(t, s.DiscardFrom([]byte("b"), agent.Position{}))
	must(t, s.Put(storetest.State("c", 0, 0, 0, 100, true)))

	r := open(t, options(b, topic, 1), all)
	must(t, r.Restore([][]byte{m}))
	if got, want := ids(r), []string{"a/1/0", "c/0/0"}; !slices.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	got, _ := r.Get(storetest.State("a", 1, 0, 0, 3, true).ID)
	if got == nil || !got.Completed {
		t.Fatalf("a/1 restored as %+v, want its latest (completed) state", got)
	}
	if !slices.Equal(ids(r), ids(s)) {
		t.Fatalf("restored %v, the writer holds %v", ids(r), ids(s))
	}
}

// TestKeyGroupRanges: two subtasks share a topic; after a restore each
// range sees only its own key groups, and a subtask owning both (scale-in)
// rebuilds everything from the union of the markers.
func TestKeyGroupRanges(t *testing.T) {
	b := startBroker(t, "")
	topic := newTopic()
	lo := open(t, options(b, topic, 2), lower)
	hi := open(t, options(b, topic, 2), upper)
	if lo.first != 0 || lo.last != 0 || hi.first != 1 || hi.last != 1 {
		t.Fatalf("partitions %d-%d and %d-%d, want 0 and 1", lo.first, lo.last, hi.first, hi.last)
	}
	ms := [][]byte{markerOf(t, lo), markerOf(t, hi)}
	for i := range 20 {
		kg := (i * 7) % maxP
		st := storetest.State(fmt.Sprintf("k%d", i), 0, 0, 0, kg, true)
		if lower.Contains(kg) {
			must(t, lo.Put(st))
		} else {
			must(t, hi.Put(st))
		}
	}
	if err := lo.Put(storetest.State("x", 0, 0, 0, maxP-1, true)); err == nil {
		t.Fatal("a store accepted a state of a key group it does not own")
	}
	for _, c := range []struct {
		rng  keygroup.Range
		want []string
	}{{lower, ids(lo)}, {upper, ids(hi)}, {all, slices.Sorted(slices.Values(append(ids(lo), ids(hi)...)))}} {
		r := open(t, options(b, topic, 2), c.rng)
		must(t, r.Restore(ms))
		if got := ids(r); !slices.Equal(got, c.want) {
			t.Fatalf("range %v restored %v, want %v", c.rng, got, c.want)
		}
		r.mu.Lock()
		for _, run := range r.idx.All() {
			if e := run.V; !c.rng.Contains(e.kg) {
				t.Fatalf("range %v holds key group %d", c.rng, e.kg)
			}
		}
		r.mu.Unlock()
	}
}

// readTopic returns every record of the topic.
func readTopic(t *testing.T, b *broker.Broker, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	must(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	must(t, err)
	total := int64(0)
	offs := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		total += o.Offset
		offs[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(out), total)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestPruneTombstones: Prune writes tombstones for the named key's runs up
// to the sequence number and for nothing else; they persist, so a restore
// from an earlier marker does not bring the runs back.
func TestPruneTombstones(t *testing.T) {
	b := startBroker(t, "")
	topic := newTopic()
	s := open(t, options(b, topic, 1), all)
	m := markerOf(t, s)
	for seq := range int64(3) {
		must(t, s.Put(storetest.State("a", seq, 0, 0, 5, true)))
		must(t, s.Put(storetest.State("b", seq, 0, 0, 5, true)))
	}
	must(t, s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 1}}))
	var tomb []string
	for _, r := range readTopic(t, b, topic) {
		if r.Value == nil {
			tomb = append(tomb, string(r.Key))
		}
	}
	want := []string{string(storetest.State("a", 0, 0, 0, 5, true).ID.Encode()), string(storetest.State("a", 1, 0, 0, 5, true).ID.Encode())}
	slices.Sort(tomb)
	slices.Sort(want)
	if !slices.Equal(tomb, want) {
		t.Fatalf("tombstones for %q, want a/0 and a/1 only", tomb)
	}
	r := open(t, options(b, topic, 1), all)
	must(t, r.Restore([][]byte{m}))
	if got, want := ids(r), []string{"a/2/0", "b/0/0", "b/1/0", "b/2/0"}; !slices.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

// TestWriteFailure: a broker refusing writes fails every Put of the batch
// with the cause, and every later Put; Close reports it.
func TestWriteFailure(t *testing.T) {
	b := startBroker(t, "")
	s := open(t, options(b, newTopic(), 1), all)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 1, true)))
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition = rp.Partition
				p.ErrorCode = kerr.InvalidRecord.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Put(storetest.State("b", int64(i), 0, 0, 1, true))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("Put %d: %v, want the broker's INVALID_RECORD", i, err)
		}
	}
	if err := s.Put(storetest.State("c", 0, 0, 0, 1, true)); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a later Put: %v", err)
	}
	if err := s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 0}}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a later Prune: %v", err)
	}
	if err := s.Close(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("Close: %v", err)
	}
}

// TestBrokerGone: writes to a closed broker fail (after the delivery
// time-out) instead of hanging.
func TestBrokerGone(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	opts.DeliveryTimeout = time.Second
	s := open(t, opts, all)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 1, true)))
	b.Close()
	done := make(chan error, 1)
	go func() { done <- s.Put(storetest.State("a", 1, 0, 0, 1, true)) }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), "kafkastore: ") {
			t.Fatalf("Put to a closed broker: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Put to a closed broker did not return")
	}
}

// TestModel: random sequences of Put, DiscardFrom, Prune and reopening
// (marker, close, a new store restored from it) keep the Kafka store equal
// to agent.MemoryStore.
func TestModel(t *testing.T) {
	b := startBroker(t, "")
	keys := []string{"a", "b", "c"}
	kgOf := map[string]int{"a": 3, "b": 3, "c": 90}
	rapid.Check(t, func(rt *rapid.T) {
		opts := options(b, newTopic(), 2)
		s, err := Open(opts, all, maxP)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		model := agent.NewMemoryStore()
		var universe []*agent.ActionState
		compare := func() {
			for _, st := range universe {
				got, err := s.Get(st.ID)
				if err != nil {
					rt.Fatal(err)
				}
				want, _ := model.Get(st.ID)
				if !storetest.Equal(got, want) {
					rt.Fatalf("Get(%s/%d/%d) = %+v, model %+v", st.ID.Key, st.Pos.Seq, st.Pos.EventID, got, want)
				}
			}
			for _, k := range keys {
				gp, gok := s.Latest([]byte(k))
				mp, mok := model.Latest([]byte(k))
				if gp != mp || gok != mok {
					rt.Fatalf("Latest(%s) = %v %v, model %v %v", k, gp, gok, mp, mok)
				}
			}
		}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3, 4:
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				st := storetest.State(k, rapid.Int64Range(0, 3).Draw(rt, "seq"), rapid.Int64Range(0, 2).Draw(rt, "event"),
					rapid.IntRange(0, 1).Draw(rt, "action"), kgOf[k], rapid.Bool().Draw(rt, "completed"))
				universe = append(universe, st)
				if err := s.Put(st); err != nil {
					rt.Fatal(err)
				}
				must(rt, model.Put(st))
			case 5:
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				pos := agent.Position{Seq: rapid.Int64Range(0, 3).Draw(rt, "seq"), EventID: rapid.Int64Range(0, 2).Draw(rt, "event")}
				if err := s.DiscardFrom([]byte(k), pos); err != nil {
					rt.Fatal(err)
				}
				must(rt, model.DiscardFrom([]byte(k), pos))
			case 6, 7:
				var upTo []agent.KeySeq
				for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(keys), rapid.ID[string]).Draw(rt, "keys") {
					upTo = append(upTo, agent.KeySeq{Key: []byte(k), Seq: rapid.Int64Range(0, 3).Draw(rt, "seq")})
				}
				if err := s.Prune(upTo); err != nil {
					rt.Fatal(err)
				}
				must(rt, model.Prune(upTo))
			default:
				m, err := s.Marker()
				if err != nil {
					rt.Fatal(err)
				}
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				if s, err = Open(opts, all, maxP); err != nil {
					rt.Fatal(err)
				}
				if err := s.Restore([][]byte{m}); err != nil {
					rt.Fatal(err)
				}
			}
			compare()
		}
	})
}

// TestPutQueuedCoalesces: while a batch is in flight, a run's state queued
// by PutQueued and its later state queued after it go out as one record
// (the later one); both writers' Waits return once it is acknowledged,
// and a restore finds the later state.
func TestPutQueuedCoalesces(t *testing.T) {
	b := startBroker(t, "")
	topic := newTopic()
	s := open(t, options(b, topic, 1), all)
	m0 := markerOf(t, s)
	c := b.Cluster()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() {
			close(entered)
			c.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	first := make(chan error, 1)
	go func() { first <- s.Put(storetest.State("x", 0, 0, 0, 1, true)) }()
	<-entered // the first batch is in flight, held by the broker
	call := storetest.State("r", 0, 0, 0, 1, false)
	done := storetest.State("r", 0, 0, 0, 1, true)
	p1, err := s.PutQueued(call)
	must(t, err)
	p2, err := s.PutQueued(done)
	must(t, err)
	close(release)
	must(t, <-first)
	must(t, p1.Wait())
	must(t, p2.Wait())
	s.mu.Lock()
	writes, coalesced := s.writes, s.coalesced
	s.mu.Unlock()
	if writes != 2 || coalesced != 1 {
		t.Fatalf("%d records written, %d Puts coalesced; want 2 and 1", writes, coalesced)
	}
	s2 := open(t, options(b, topic, 1), all)
	must(t, s2.Restore([][]byte{m0}))
	got, err := s2.Get(done.ID)
	must(t, err)
	if !storetest.Equal(got, done) {
		t.Fatalf("after the restore Get = %+v, want the completed state", got)
	}
}

// TestListOffsetsRetriesRetriableErrors: a leader election while the store
// opens and restores (LEADER_NOT_AVAILABLE on ListOffsets, three times)
// delays the listing instead of failing the job's attempt. The simulator
// found Open failing at once ("listing the end offsets").
func TestListOffsetsRetriesRetriableErrors(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 2)
	s := open(t, opts, all)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 1, true)))
	m := markerOf(t, s)
	must(t, s.Close())
	for _, op := range []string{"open", "restore"} {
		var n atomic.Int64
		h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.LeaderNotAvailable, Count: -1,
			When: func(kmsg.Request) bool { return n.Add(1) <= 3 }})
		var err error
		switch op {
		case "open":
			var s2 *Store
			if s2, err = Open(opts, all, maxP); err == nil {
				s2.Close()
			}
		case "restore":
			s2 := open(t, opts, all)
			h.Remove()
			n.Store(0)
			h = b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.LeaderNotAvailable, Count: -1,
				When: func(kmsg.Request) bool { return n.Add(1) <= 3 }})
			err = s2.Restore([][]byte{m})
		}
		h.Remove()
		if err != nil {
			t.Fatalf("%s with ListOffsets failing three times: %v", op, err)
		}
		if n.Load() < 4 {
			t.Fatalf("%s: %d ListOffsets requests, want the 3 failed ones and a retry", op, n.Load())
		}
	}
}

// TestRestoreRetriesRetriableFetchErrors: a restore whose fetches fail
// with retriable errors many times in a row (a long leader election)
// waits them out within RequestTimeout instead of giving up after a
// count (the simulator's seed 4800376196970880383 failed on six).
func TestRestoreRetriesRetriableFetchErrors(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	s := open(t, opts, all)
	for i := range 5 {
		must(t, s.Put(storetest.State("a", int64(i), 0, 0, 1, true)))
	}
	m := markerOf(t, s)
	must(t, s.Close())
	s2 := open(t, opts, all)
	var n atomic.Int64
	h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(kmsg.Request) bool { return n.Add(1) <= 12 }})
	defer h.Remove()
	if err := s2.Restore([][]byte{m}); err != nil {
		t.Fatalf("restore with twelve retriable fetch errors in a row: %v", err)
	}
	if n.Load() <= 12 {
		t.Fatalf("%d fetches, want the 12 failed ones and more", n.Load())
	}
	if got := ids(s2); len(got) != 5 {
		t.Fatalf("restored states %v, want 5", got)
	}
}
