package kafka

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// K14: after Stop is closed the source emits every record produced before
// it, then ends on its own (the job finishes); records produced after the
// listing are not read, and each partition's output is a gap-free prefix.
func TestStopEndsAtListedEndOffsets(t *testing.T) {
	b := startBroker(t, map[string]int32{"s": 2, "u": 1})
	cl := client(t, b)
	for i := range 30 {
		produce(t, cl, rec("s", int32(i%2), int64(1000+i), fmt.Sprint("a", i)))
	}
	stop := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 3, Logger: quiet})
	// Parallelism 3 over 3 partitions; subtask 3 of 4 would have none.
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"s", "u"}, Stop: stop}, WithMetadata(String()))
	out := collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[Message[string]]()).Parallelism(4))
	job, _ := weirtest.Start(t, env)
	weirtest.Eventually(t, "history", func() bool { return out.len() >= 30 })
	for i := range 20 {
		produce(t, cl, rec("s", int32(i%2), int64(2000+i), fmt.Sprint("b", i)), rec("u", 0, int64(2000+i), fmt.Sprint("u", i)))
	}
	close(stop)
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	// Records produced from now on may or may not be before the listing.
	for i := range 5 {
		produce(t, cl, rec("s", 0, int64(3000+i), fmt.Sprint("c", i)))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("job: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not end after Stop")
	}
	next := map[string]int64{}
	recs := out.records()
	slices.SortFunc(recs, func(a, b weir.Record[Message[string]]) int { return cmp.Compare(a.Value.Offset, b.Value.Offset) })
	for _, r := range recs {
		k := fmt.Sprintf("%s/%d", r.Value.Topic, r.Value.Partition)
		if r.Value.Offset != next[k] {
			t.Fatalf("%s: offset %d, want %d (a gap or a repeat)", k, r.Value.Offset, next[k])
		}
		next[k]++
	}
	if next["s/0"] < 25 || next["s/1"] != 25 || next["u/0"] != 20 {
		t.Fatalf("read %v, want at least s/0: 25, s/1: 25, u/0: 20", next)
	}
}
