package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// Record slabs are reused across batches (pool.go): what a job keeps of a
// record (the value, the key, the headers, all uncopied with Bytes) must
// still be that record's once later batches have been parsed into the same
// slabs.
func TestPooledRecordsKeepTheirContents(t *testing.T) {
	b := startBroker(t, map[string]int32{"p": 2})
	cl := client(t, b)
	const batches, perBatch = 30, 100
	for i := range batches {
		var recs []*kgo.Record
		for j := range perBatch {
			n := i*perBatch + j
			recs = append(recs, &kgo.Record{Topic: "p", Partition: int32(n % 2), Timestamp: time.UnixMilli(int64(1000 + n)),
				Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, "v%d", n),
				Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "h%d", n)}, {Key: "n", Value: fmt.Appendf(nil, "%d", n)}}})
		}
		produce(t, cl, recs...)
	}
	// Fetches of a few kilobytes, so that the history takes many fetches
	// and slabs go round the pool.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"p"}, PartitionMaxBytes: 4 << 10}, WithMetadata(Bytes()))
	out := collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[Message[[]byte]]()))
	_, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "all records", func() bool { return out.len() >= batches*perBatch })
	stop()
	seen := map[int]bool{}
	for _, r := range out.records() {
		m := r.Value
		var n int
		if _, err := fmt.Sscanf(string(m.Value), "v%d", &n); err != nil {
			t.Fatalf("value %q: %v", m.Value, err)
		}
		seen[n] = true
		want := fmt.Sprintf("k%d v%d [h=h%d n=%d] p%d @%d", n, n, n, n, n%2, 1000+n)
		got := fmt.Sprintf("%s %s [%s=%s %s=%s] p%d @%d", m.Key, m.Value, m.Headers[0].Key, m.Headers[0].Value,
			m.Headers[1].Key, m.Headers[1].Value, m.Partition, r.Timestamp)
		if len(m.Headers) != 2 || got != want {
			t.Fatalf("record %d kept as %q, want %q", n, got, want)
		}
	}
	if len(seen) != batches*perBatch {
		t.Fatalf("%d distinct records, want %d", len(seen), batches*perBatch)
	}
}
