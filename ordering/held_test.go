package ordering

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// H1-H3: whatever the interleaving of pushes (sorted runs, out-of-order
// records, more first tiebreak values than maxRuns) and releases, and
// whatever the chunk size of the runs, the
// queue releases exactly the held records with ts <= wm, in the order of
// one heap (less), and holds the rest.
func TestHeldQueueReleasesInHeapOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Small chunks, so that runs span several and recycle them.
		q := heldQueue[int]{chunk: rapid.IntRange(1, 5).Draw(t, "chunk")}
		var ref []heldRec[int] // held, per the reference
		seq := uint64(0)
		wm := int64(-1)
		manyRuns := rapid.Bool().Draw(t, "manyRuns")
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for range steps {
			if rapid.IntRange(0, 4).Draw(t, "op") > 0 {
				t1 := rapid.Int64Range(0, 3).Draw(t, "t1")
				if manyRuns {
					t1 = int64(seq) // a fresh run per record: beyond maxRuns soon
				}
				h := heldRec[int]{ts: wm + 1 + rapid.Int64Range(0, 20).Draw(t, "dt"), t1: t1,
					t2: rapid.Int64Range(0, 3).Draw(t, "t2"), seq: seq, v: int(seq)}
				seq++
				q.push(h)
				ref = append(ref, h)
				continue
			}
			wm += rapid.Int64Range(0, 15).Draw(t, "dwm")
			var got []heldRec[int]
			n := q.release(wm, func(h *heldRec[int]) { got = append(got, *h) })
			slices.SortFunc(ref, func(a, b heldRec[int]) int {
				if a.less(&b) {
					return -1
				}
				return 1
			})
			k := 0
			for k < len(ref) && ref[k].ts <= wm {
				k++
			}
			want := ref[:k]
			if n != len(got) || len(got) != len(want) {
				t.Fatalf("released %d (reported %d), want %d", len(got), n, len(want))
			}
			for i := range want {
				if got[i].seq != want[i].seq {
					t.Fatalf("release %d: seq %d, want %d", i, got[i].seq, want[i].seq)
				}
			}
			ref = slices.Clone(ref[k:])
			if q.len() != len(ref) || len(q.all()) != len(ref) {
				t.Fatalf("holds %d (all: %d), want %d", q.len(), len(q.all()), len(ref))
			}
		}
	})
}

// BenchmarkHeldQueue: 39 partitions of timestamp-ordered records pushed
// interleaved, then released at once (a catch-up), against one heap of all
// records (the previous design, as baseline in the same run).
func BenchmarkHeldQueue(b *testing.B) {
	const n = 200_000
	recs := make([]heldRec[int], n)
	for i := range recs {
		p := int64(i % 39)
		recs[i] = heldRec[int]{ts: int64(i/39)*7 + p, t1: p, t2: int64(i), seq: uint64(i)}
	}
	b.Run("runs", func(b *testing.B) {
		for b.Loop() {
			var q heldQueue[int]
			for _, h := range recs {
				q.push(h)
			}
			q.release(1<<62, func(*heldRec[int]) {})
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("one-heap", func(b *testing.B) {
		for b.Loop() {
			var q heldQueue[int]
			for _, h := range recs {
				q.pushSpill(h)
			}
			for len(q.spill) > 0 {
				q.popSpill()
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
