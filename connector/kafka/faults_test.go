package kafka

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// Broker faults injected through kfake's control hooks: the broker answers
// a request with an error code (or drops the connection) instead of
// serving it, so a test sees the connector's reaction at once instead of
// waiting for a time-out.

// failFetch makes the broker answer the next n Fetch requests that name
// topic with code for every partition (n < 0: all of them); it returns the
// number of requests failed so far.
func failFetch(c *kfake.Cluster, topic string, n int, code int16) *atomic.Int32 {
	var failed atomic.Int32
	c.ControlKey(kmsg.Fetch.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		named := false
		for _, rt := range req.Topics {
			if rt.Topic != topic && rt.Topic != "" {
				continue
			}
			named = true
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = rp.Partition
				p.ErrorCode = code
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if !named || (n >= 0 && int(failed.Load()) >= n) {
			return nil, nil, false
		}
		failed.Add(1)
		return resp, nil, true
	})
	return &failed
}

// A retriable fetch error (the partition's leader moved) is retried: the
// reader looks the leader up again and reads every record once, in order,
// without failing.
func TestSourceRetriesTransientFetchErrors(t *testing.T) {
	b := startBroker(t, map[string]int32{"t": 1})
	cl := client(t, b)
	var want []string
	for i := range 20 {
		produce(t, cl, rec("t", 0, int64(i), fmt.Sprint("v", i)))
		want = append(want, fmt.Sprint("v", i))
	}
	failed := failFetch(b.Cluster(), "t", 3, kerr.NotLeaderForPartition.Code)
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t"}}, String())
	rs := readers(t, src, 1, nil)
	pollUntil(t, "every record", rs, func() bool { return len(rs[0].out.vals) >= len(want) })
	if got := failed.Load(); got != 3 {
		t.Fatalf("%d fetches failed, want 3: the fault was not injected", got)
	}
	for range 20 { // anything more (a duplicate) would come now
		pollUntil(t, "", rs, func() bool { return true })
	}
	if got := fmt.Sprint(rs[0].out.vals); got != fmt.Sprint(want) {
		t.Fatalf("values %s, want %v once each, in order", got, want)
	}
}

// A fetch that is refused for good (not authorized) fails the reader, with
// an error naming the request, the partition and the offset, and keeping
// the broker's error as its cause.
func TestSourceFailsOnNonRetriableFetchError(t *testing.T) {
	b := startBroker(t, map[string]int32{"t": 1})
	cl := client(t, b)
	produce(t, cl, rec("t", 0, 1, "a"), rec("t", 0, 2, "b"))
	failFetch(b.Cluster(), "t", -1, kerr.TopicAuthorizationFailed.Code)
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t"}}, String())
	rs := readers(t, src, 1, nil)
	var err error
	pollUntil(t, "the failure", rs[:0], func() bool {
		_, err = rs[0].r.Poll(rs[0].out)
		return err != nil
	})
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "fetch t[0] at offset 0") {
		t.Fatalf("error %v: want the authorization failure of fetch t[0] at offset 0", err)
	}
	if len(rs[0].out.vals) != 0 {
		t.Fatalf("values %v read from a partition the broker refused", rs[0].out.vals)
	}
}

// failRequests makes the broker answer the next n requests of key (n < 0:
// all) with the response build makes; it returns the count of requests
// failed so far.
func failRequests(c *kfake.Cluster, key kmsg.Key, n int, build func(kmsg.Request) kmsg.Response) *atomic.Int32 {
	var failed atomic.Int32
	c.ControlKey(key.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n >= 0 && int(failed.Load()) >= n {
			return nil, nil, false
		}
		failed.Add(1)
		return build(kr), nil, true
	})
	return &failed
}

// produceError answers a Produce request with code for every partition.
func produceError(code int16) func(kmsg.Request) kmsg.Response {
	return func(kr kmsg.Request) kmsg.Response {
		req := kr.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition = rp.Partition
				p.ErrorCode = code
				p.BaseOffset = -1
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
}

func sinkJob(t *testing.T, b interface{ Addrs() []string }, exactlyOnce bool, n int) error {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	var in []string
	for i := range n {
		in = append(in, fmt.Sprint("r", i))
	}
	s := weir.FromSlice(env, "in", in, watermark.ForMonotonous[string]().
		WithTimestamp(func(string, int64) (int64, bool) { return 1_000_000, true }))
	opts := SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil), TransactionalIDPrefix: "faults",
		// A moved leader makes the client reload metadata, at most every
		// MetadataMinAge (5 s by default): the retries need not wait.
		ClientOptions: []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)}}
	if exactlyOnce {
		ExactlyOnceSink(s, "out", opts)
	} else {
		Sink(s, "out", opts)
	}
	return env.Execute(testCtx(t))
}

// The sink's produce requests: a retriable error (leader moved) is retried
// by the client and every record lands once; a non-retriable one fails the
// job with an error naming the produce request and keeping the cause.
func TestSinkProduceErrors(t *testing.T) {
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactlyOnce=%v", exactlyOnce), func(t *testing.T) {
			b := startBroker(t, map[string]int32{"out": 1})
			failed := failRequests(b.Cluster(), kmsg.Produce, 2, produceError(kerr.NotLeaderForPartition.Code))
			if err := sinkJob(t, b, exactlyOnce, 10); err != nil {
				t.Fatalf("job failed on a transient produce error: %v", err)
			}
			if failed.Load() != 2 {
				t.Fatalf("%d produce requests failed, want 2: the fault was not injected", failed.Load())
			}
			got := values(readTopic(t, b.Addrs(), "out", true))
			if len(got) != 10 || fmt.Sprint(got) != fmt.Sprint(values(readTopic(t, b.Addrs(), "out", false))) {
				t.Fatalf("topic holds %v, want r0..r9 once each", got)
			}

			b2 := startBroker(t, map[string]int32{"out": 1})
			failRequests(b2.Cluster(), kmsg.Produce, -1, produceError(kerr.TopicAuthorizationFailed.Code))
			err := sinkJob(t, b2, exactlyOnce, 10)
			if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "produce to out[0]") {
				t.Fatalf("job error %v: want the authorization failure of produce to out[0]", err)
			}
			if got := readTopic(t, b2.Addrs(), "out", true); len(got) != 0 {
				t.Fatalf("%d records visible after a refused produce", len(got))
			}
		})
	}
}

// endTxnError answers an EndTxn request with code.
func endTxnError(code int16) func(kmsg.Request) kmsg.Response {
	return func(kr kmsg.Request) kmsg.Response {
		resp := kr.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp
	}
}

// The exactly-once sink's commit (EndTxn): a retriable error (a
// coordinator that is loading) is retried and the records are committed
// once; a non-retriable one (not authorized) fails the job, naming the
// transaction it could not commit, and nothing becomes visible to a
// read_committed reader.
func TestExactlyOnceSinkCommitErrors(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 1})
	failed := failRequests(b.Cluster(), kmsg.EndTxn, 2, endTxnError(kerr.CoordinatorLoadInProgress.Code))
	if err := sinkJob(t, b, true, 10); err != nil {
		t.Fatalf("job failed on a transient EndTxn error: %v", err)
	}
	if failed.Load() != 2 {
		t.Fatalf("%d EndTxn requests failed, want 2: the fault was not injected", failed.Load())
	}
	if got := values(readTopic(t, b.Addrs(), "out", true)); len(got) != 10 {
		t.Fatalf("committed %v, want r0..r9 once each", got)
	}

	b2 := startBroker(t, map[string]int32{"out": 1})
	failRequests(b2.Cluster(), kmsg.EndTxn, -1, endTxnError(kerr.TransactionalIDAuthorizationFailed.Code))
	err := sinkJob(t, b2, true, 10)
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || !strings.Contains(err.Error(), "commit transaction faults-1-0-") {
		t.Fatalf("job error %v: want the authorization failure of the commit of a faults-1-0-* transaction", err)
	}
	if got := readTopic(t, b2.Addrs(), "out", true); len(got) != 0 {
		t.Fatalf("%d records visible to read_committed after the commit was refused", len(got))
	}
}
