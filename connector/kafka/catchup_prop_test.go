package kafka

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"
)

// checkWaker runs check when the topic catches up, on the goroutine that
// completed it (inside Poll), so the check sees the state of that moment.
type checkWaker struct {
	n     int
	check func()
}

func (w *checkWaker) topicCaughtUp() {
	w.n++
	w.check()
}

// K5 and K6 against a model, over random interleavings of writes to the
// partitions' logs (before and after the snapshot), fetches (the fetch
// goroutines' step: a batch of at most a few records, the log end the
// broker reports, fetchPart.fetched deciding what is handed over) and
// polls (the reader's Poll, at most a few records each). The real reader
// and tracker decide; the model only knows each log and each partition's
// latest fetch. Checked:
//   - when the topic catches up, every partition's position has reached
//     its snapshot and the log end of its latest fetch (nothing written
//     before its latest fetch is left to read, queued batches included);
//   - once writes stop and everything is fetched and polled, the topic
//     has caught up (the rule does not wait for anything Kafka cannot
//     show: a last empty fetch is enough).
//
// Replay a failure with -rapid.seed (rapid prints it).
func TestCatchUpMatchesModel(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.IntRange(1, 3).Draw(t, "partitions")
		perPoll := rapid.IntRange(1, 4).Draw(t, "recordsPerPoll")
		tr := newTracker(time.Now, true)
		r := &reader[string]{log: quiet, run: &run{tracker: tr}, started: true,
			opts: Options{RecordsPerPoll: perPoll}, deser: forReader(String()), msgs: make(chan fetchMsg, 1<<12)}
		logs := make([]int64, parts)     // each partition's log length
		latest := make([]int64, parts)   // the log end at each partition's latest fetch
		snapshot := make([]int64, parts) // the end-offset snapshot
		var fps []*fetchPart
		w := &checkWaker{}
		w.check = func() {
			for p, fp := range fps {
				pos := fp.track.position.Load()
				if pos < snapshot[p] || pos < latest[p] {
					t.Fatalf("topic caught up with partition %d at position %d: snapshot %d, log end at its latest fetch %d",
						p, pos, snapshot[p], latest[p])
				}
			}
		}
		for p := range parts {
			logs[p] = int64(rapid.IntRange(0, 6).Draw(t, fmt.Sprint("history", p)))
			s := &split{id: p, topic: "t", partition: int32(p), pos: -1, end: -1, track: tr.register("t", parts, int32(p), 0, w)}
			r.splits = append(r.splits, s)
		}
		// The reader's start-up: snapshot, start at 0, the snapshot as
		// the first known log end (as fetchMain does).
		var inits []splitInit
		for p, s := range r.splits {
			snapshot[p], latest[p] = logs[p], logs[p]
			s.track.logEnd.Store(logs[p])
			inits = append(inits, splitInit{split: p, start: 0, end: logs[p]})
			fps = append(fps, &fetchPart{split: p, topic: "t", partition: int32(p), track: s.track, sentLogEnd: logs[p]})
		}
		r.msgs <- fetchMsg{init: inits}
		out := &recOut[string]{}
		poll := func() {
			if _, err := r.Poll(out); err != nil {
				t.Fatal(err)
			}
		}
		fetch := func(p int, most int64) {
			fp := fps[p]
			n := min(logs[p]-fp.offset, most)
			m := fetchMsg{split: p, next: fp.offset + n}
			for o := fp.offset; o < fp.offset+n; o++ {
				m.records = append(m.records, &kgo.Record{Topic: "t", Partition: int32(p), Offset: o, Value: []byte("v")})
			}
			latest[p] = logs[p]
			if fp.fetched(m.next, logs[p], int(n)) {
				fp.offset = m.next
				r.msgs <- m
			}
		}
		steps := rapid.IntRange(0, 80).Draw(t, "steps")
		for range steps {
			p := rapid.IntRange(0, parts-1).Draw(t, "partition")
			switch rapid.IntRange(0, 2).Draw(t, "what") {
			case 0:
				logs[p] += int64(rapid.IntRange(1, 5).Draw(t, "written"))
			case 1:
				fetch(p, int64(rapid.IntRange(1, 4).Draw(t, "fetchMost")))
			case 2:
				poll()
			}
		}
		// Writes stop: fetch and poll until everything is read.
		for range 1000 {
			for p := range parts {
				fetch(p, 4)
			}
			poll()
			poll()
		}
		for p, fp := range fps {
			if pos := fp.track.position.Load(); pos != logs[p] {
				t.Fatalf("partition %d at position %d after the drain, log %d", p, pos, logs[p])
			}
		}
		if w.n != 1 || !fps[0].track.topic.caughtUp.Load() {
			t.Fatalf("after the drain: topic caught up %v, wake-ups %d; want caught up once (status %+v)",
				fps[0].track.topic.caughtUp.Load(), w.n, tr.status())
		}
	})
}
