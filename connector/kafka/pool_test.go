package kafka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

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

// The reader's slab pool (pool.go) never hands out a slab shorter than
// asked for (franz-go would grow it by copying), hands out the smallest
// free slab that fits, keeps within its bounds, and never hands out a slab
// twice before it is put back.
func TestSlabPoolModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := &slabPool{}
		var out [][]kgo.Record // slabs handed out, not put back
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if len(out) > 0 && rapid.Bool().Draw(t, "put") {
				i := rapid.IntRange(0, len(out)-1).Draw(t, "which")
				s := out[i]
				out = append(out[:i], out[i+1:]...)
				before := len(p.free)
				free := slices.Clone(p.free)
				var smallest, total int
				for j, f := range p.free {
					if j == 0 || cap(f) < smallest {
						smallest = cap(f)
					}
					total += cap(f)
				}
				p.PutRecords(s)
				kept := slices.ContainsFunc(p.free, func(f []kgo.Record) bool { return &f[:1][0] == &s[:1][0] })
				// Room by dropping the free slabs smaller than s?
				slabs, records := before, total
				for _, f := range free {
					if cap(f) < cap(s) {
						slabs--
						records -= cap(f)
					}
				}
				room := slabs < maxFreeSlabs && records+cap(s) <= maxFreeRecords
				if kept != room {
					t.Fatalf("a free list of %d slabs, %d records (smallest %d) kept a slab of %d: %v; want %v", before, total, smallest, cap(s), kept, room)
				}
				if len(p.free) < before && !kept {
					t.Fatalf("a free list of %d slabs dropped some for a slab of %d it did not keep", before, cap(s))
				}
			} else {
				n := rapid.OneOf(rapid.IntRange(1, 50), rapid.IntRange(1000, 40000)).Draw(t, "n")
				best := -1
				for _, f := range p.free {
					if cap(f) >= n && (best < 0 || cap(f) < best) {
						best = cap(f)
					}
				}
				s := p.GetRecords(n)
				if len(s) < n && cap(s) < n {
					t.Fatalf("GetRecords(%d) returned a slab of %d", n, cap(s))
				}
				if best >= 0 && cap(s) != best {
					t.Fatalf("GetRecords(%d) returned a slab of %d; the smallest free one that fits has %d", n, cap(s), best)
				}
				for _, o := range out {
					if &o[:1][0] == &s[:1][0] {
						t.Fatalf("GetRecords(%d) handed out a slab already in use", n)
					}
				}
				out = append(out, s)
			}
			total := 0
			for _, f := range p.free {
				total += cap(f)
			}
			if len(p.free) > maxFreeSlabs || total > maxFreeRecords || total != p.records {
				t.Fatalf("free list: %d slabs, %d records (counted %d); bounds %d, %d", len(p.free), total, p.records, maxFreeSlabs, maxFreeRecords)
			}
		}
	})
}
