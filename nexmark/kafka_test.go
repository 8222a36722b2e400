package nexmark

import (
	"context"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
)

// Events produced into the embedded broker as JSON and read back through
// the Kafka source are the generator's events, and a query over them gives
// the reference's results.
func TestKafkaRoundTrip(t *testing.T) {
	const n, partitions = 5000, 2
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"nexmark": partitions}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g := testGenerator(t, 5)
	if err := Produce(context.Background(), b.Addrs(), "nexmark", partitions, g, n); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	close(stopped)
	read := func(build func(weir.Stream[Event])) {
		env := weir.NewEnvironment(weir.Config{Parallelism: partitions})
		src := KafkaSource(env, "nexmark", b.Addrs(), "nexmark", stopped)
		build(src)
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var events *weir.Collected[Event]
	read(func(s weir.Stream[Event]) { events = weir.Collect(s) })
	var want, got []Event
	for e := range g.Events(0, n) {
		want = append(want, e)
	}
	got = events.Values()
	if w, g := sorted(want), sorted(got); len(w) != len(g) || !equalStrings(w, g) {
		t.Fatalf("read %d events back, want the %d produced", len(got), len(want))
	}
	var q5 *weir.Collected[Q5Out]
	read(func(s weir.Stream[Event]) { q5 = weir.Collect(Q5(s)) })
	sameResults(t, "q5 from Kafka", sorted(q5.Values()), sorted(runRef(g, n, RefQ5)))
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
