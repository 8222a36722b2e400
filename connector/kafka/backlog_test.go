package kafka

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/watermark"
)

// K5 end to end, with records written while the job replays: partition 0
// has a short history and reaches its end-offset snapshot at once, but a
// loader keeps writing history to it (more of it than partition 1 has left
// to replay); both partitions then get live records. A partition declared
// caught up at its snapshot (the rule before the log end of the latest
// fetch took part) made the topic idle when partition 1 reached its
// snapshot, partition 1's live record carried event time to live time, and
// the loader's records still queued on partition 0 came late: thousands of
// order violations after a per-key sort. With the backlog rule, partition
// 0 holds event time until it has read what was written before its latest
// fetch, and nothing is late.
//
// Deterministic by construction, not timing: the job is held (a map that
// blocks on its first record, so the fetchers stop on back-pressure) until
// every record is written, and the test producer writes small batches, so
// each fetch brings about one batch of each partition: partition 0 reads
// its loader backlog at partition 1's pace, and that backlog is three
// times partition 1's replay.
func TestBacklogBehindTheSnapshotIsNotCaughtUp(t *testing.T) {
	for run := range 3 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			violations, total := backlogRun(t)
			if violations != 0 {
				t.Fatalf("%d of %d records out of order after the sort, want 0", violations, total)
			}
		})
	}
}

func backlogRun(t *testing.T) (violations, total int64) {
	const (
		history0 = 10   // partition 0's history at the start
		loaded0  = 6000 // written to partition 0 after the snapshot
		history1 = 2000 // partition 1's history
		live     = 5    // live records per partition, after the rest
	)
	b := startBroker(t, map[string]int32{"t": 2})
	cl := client(t, b, kgo.ProducerBatchMaxBytes(1024), kgo.ProducerLinger(0))
	base := time.Now().UnixMilli() - 10_000_000
	val := func(p int32, seq int) string { return fmt.Sprintf("k%d/%d/%d", seq%4, p, seq) }
	var recs []*kgo.Record
	for i := range history0 {
		recs = append(recs, rec("t", 0, base+int64(i)*10, val(0, i)))
	}
	for i := range history1 {
		recs = append(recs, rec("t", 1, base+int64(i)*30, val(1, i)))
	}
	produce(t, cl, recs...)

	gate, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stop := make(chan struct{})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"t"}, Stop: stop,
		PartitionMaxBytes: 512, BufferedFetches: 2, FetchMaxWait: 20 * time.Millisecond}, String())
	// A watermark after every record (each partition's timestamps
	// ascend), so that event time moves with the records, not with a
	// periodic emission that a fast machine may outrun.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1, Logger: quiet})
	strategy := watermark.ForGenerator(func() watermark.Generator[string] {
		return watermark.Punctuated(func(_ string, ts int64) (int64, bool) { return ts - 1, true })
	})
	in := weir.FromSource(env, "t", src, strategy)
	held1 := weir.Map(in, "hold", func(v string) string {
		once.Do(func() { close(held) })
		<-gate
		return v
	})
	late := weir.NewOutputTag[string]("late")
	sorted := ordering.Sort(weir.KeyBy(held1, func(v string) string { return v[:2] }), "sort",
		ordering.SortOptions[string]{Violations: late})
	out, lateOut := collectTo(sorted), collectTo(weir.SideOutput(sorted, late))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()

	select {
	case <-held: // the snapshot is taken; the fetchers stop on back-pressure
	case err := <-done:
		t.Fatalf("job ended before its first record: %v", err)
	}
	recs = recs[:0]
	for i := range loaded0 {
		recs = append(recs, rec("t", 0, base+int64(history0+i)*10, val(0, history0+i)))
	}
	for i := range live {
		now := time.Now().UnixMilli() + int64(i)
		recs = append(recs, rec("t", 0, now, val(0, history0+loaded0+i)), rec("t", 1, now, val(1, history1+i)))
	}
	produce(t, cl, recs...)
	close(gate)
	close(stop) // read up to the end offsets listed now, that is, everything
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := history0 + loaded0 + history1 + 2*live
	if n := out.len(); n != want {
		t.Fatalf("%d records out, want %d", n, want)
	}
	// The sort's own count and its side output agree.
	if n, m := env.Metrics().Sum("sort", "orderViolations"), int64(lateOut.len()); n != m {
		t.Fatalf("orderViolations %d, side output %d", n, m)
	}
	for _, r := range lateOut.records() {
		if !strings.Contains(r.Value, "/0/") {
			t.Errorf("late record %q is not partition 0's", r.Value)
			break
		}
	}
	if st := statusOf(src, "t", 0); !st.CaughtUp || st.LogEnd < int64(history0+loaded0) {
		t.Errorf("partition 0 status %+v: want caught up, with the log end of the loaded records", st)
	}
	return int64(lateOut.len()), int64(want)
}
