package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// Options.Partitions: only the listed partitions are read, and the topic
// catches up when they have (K6 counts only them).
func TestPartitionsRestrictsTheSource(t *testing.T) {
	b := startBroker(t, map[string]int32{"a": 4})
	cl := client(t, b)
	var want []string
	for p := range int32(4) {
		for i := range 20 {
			v := fmt.Sprintf("a%d-%d", p, i)
			produce(t, cl, rec("a", p, int64(1000+i), v))
			if p == 1 || p == 3 {
				want = append(want, fmt.Sprintf("a/%d/%d=%s@%d", p, i, v, 1000+i))
			}
		}
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"a"}, Partitions: []int32{3, 1}}, WithMetadata(String()))
	out := collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[Message[string]]()))
	_, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "the two partitions", func() bool { return out.len() >= len(want) })
	weirtest.Eventually(t, "catch-up of the two partitions", src.CaughtUp)
	stop()
	if got := sortedStrings(out.records()); fmt.Sprint(got) != fmt.Sprint(sortedCopy(want)) {
		t.Fatalf("records differ:\ngot  %v\nwant %v", got, want)
	}
	if n := len(src.Status()); n != 2 {
		t.Fatalf("status lists %d partitions, want 2", n)
	}
}

// A partition the topic lacks, a negative one, and Partitions with
// discovery are refused, naming the problem.
func TestPartitionsValidated(t *testing.T) {
	b := startBroker(t, map[string]int32{"a": 2})
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Brokers: b.Addrs(), Topics: []string{"a"}, Partitions: []int32{-1}}, "want partition numbers >= 0"},
		{Options{Brokers: b.Addrs(), Topics: []string{"a"}, Partitions: []int32{0}, DiscoveryInterval: 1}, "cannot be combined"},
		{Options{Brokers: b.Addrs(), Topics: []string{"a"}, Partitions: []int32{5}}, `topic "a" has no partition 5`},
	} {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
		weir.Collect(weir.FromSource(env, "kafka", NewSource(c.opts, String()), watermark.ForMonotonous[string]()))
		err := env.Execute(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %+v: error %v, want one containing %q", c.opts.Partitions, err, c.want)
		}
	}
}
