package kafka

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// countWaker counts the wake-ups of a topic's readers.
type countWaker struct{ n int }

func (w *countWaker) topicCaughtUp() { w.n++ }

// K5 at the exact boundary: a partition is caught up when its consumer
// position (the next offset to emit) equals the end-offset snapshot, not
// one offset before it: at end-1 the record at end-1 is still to come.
// Checked through Poll on both paths that apply the rule: the start-up
// (start offset against the end) and the position after an emitted batch;
// in both, the record at end-1 comes in a last batch.
func TestCatchUpExactlyAtTheEndOffset(t *testing.T) {
	const end = 10
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, path := range []string{"start", "batch"} {
		t.Run(path, func(t *testing.T) {
			w := &countWaker{}
			tr := newTracker(time.Now, true)
			// A started reader fed by the test instead of fetch goroutines.
			r := &reader[string]{log: quiet, run: &run{tracker: tr}, started: true,
				opts: Options{RecordsPerPoll: 100}, deser: forReader(String()), msgs: make(chan fetchMsg, 4)}
			s := &split{id: 0, topic: "t", partition: 0, pos: -1, end: -1,
				track: tr.register("t", 1, 0, 0, w)}
			r.splits = []*split{s}
			out := &recOut[string]{}
			poll := func(m fetchMsg) {
				t.Helper()
				r.msgs <- m
				if _, err := r.Poll(out); err != nil {
					t.Fatal(err)
				}
			}
			batch := func(from, to int64) fetchMsg {
				m := fetchMsg{split: 0, next: to}
				for o := from; o < to; o++ {
					m.records = append(m.records, &kgo.Record{Topic: "t", Offset: o, Value: []byte(fmt.Sprint("v", o))})
				}
				return m
			}
			status := func() PartitionStatus { return tr.status()[0] }
			switch path {
			case "start":
				poll(fetchMsg{init: []splitInit{{split: 0, start: end - 1, end: end}}})
			case "batch":
				poll(fetchMsg{init: []splitInit{{split: 0, start: 0, end: end}}})
				poll(batch(0, end-1))
			}
			if st := status(); s.track.caughtUp.Load() || st.CaughtUp || st.TopicCaughtUp || w.n != 0 {
				t.Fatalf("position %d, end %d: caught up (split %v, status %+v, wake-ups %d); the record at %d is still to come",
					s.pos, end, s.track.caughtUp.Load(), st, w.n, end-1)
			}
			poll(batch(end-1, end))
			if st := status(); !s.track.caughtUp.Load() || !st.CaughtUp || !st.TopicCaughtUp || w.n != 1 {
				t.Fatalf("position %d = end %d: not caught up (split %v, status %+v, wake-ups %d)", s.pos, end, s.track.caughtUp.Load(), st, w.n)
			}
		})
	}
}
