package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"
)

// K14 at the batch level: whatever the batch's offsets (ascending, with
// gaps as compaction and control records leave them), the stop offset and
// how many records each poll takes, the records emitted are exactly those
// of the batch below the stop offset, in order, and the position after the
// batch never passes the stop offset. stopSplit is called before each poll
// of the batch's rest, as Poll calls it.
func TestStopSplitCutsAtTheStopOffset(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(t, "records")
		off := rapid.Int64Range(0, 5).Draw(t, "first")
		m := fetchMsg{}
		var want []int64
		end := rapid.Int64Range(0, 200).Draw(t, "stop")
		for range n {
			m.records = append(m.records, &kgo.Record{Offset: off})
			if off < end {
				want = append(want, off)
			}
			off += rapid.Int64Range(1, 4).Draw(t, "gap")
		}
		m.next = off + rapid.Int64Range(0, 3).Draw(t, "tail")
		r := &reader[string]{stopEnds: map[int]int64{0: end}}
		s := &split{id: 0}
		var got []int64
		for {
			if r.stopSplit(s, &m) {
				t.Fatal("stopSplit reported a split without a stop offset")
			}
			if r.curIdx >= len(m.records) {
				break
			}
			take := rapid.IntRange(1, 8).Draw(t, "perPoll")
			for ; take > 0 && r.curIdx < len(m.records); take-- {
				got = append(got, m.records[r.curIdx].Offset)
				r.curIdx++
			}
		}
		if len(got) != len(want) {
			t.Fatalf("emitted %v, want %v (stop %d)", got, want, end)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("emitted %v, want %v (stop %d)", got, want, end)
			}
		}
		if m.next > end {
			t.Fatalf("position after the batch %d passes the stop offset %d", m.next, end)
		}
	})
}
