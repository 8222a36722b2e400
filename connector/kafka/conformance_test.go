package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// conformanceSink is ExactlyOnceSink as the conformance suite drives it.
// A destination is "<broker,broker>/<topic>": the kill9 mode's children
// write to the test's broker.
var conformanceSink = sinkconformance.Sink{
	Name: "kafka",
	Attach: func(s weir.Stream[string], dest string) {
		addrs, topic := splitDest(dest)
		ExactlyOnceSink(s, "out", SinkOptions[string]{Brokers: addrs, Topic: topic,
			Serialize: SerializeString(nil), TransactionalIDPrefix: "conformance-" + topic}).UID("out")
	},
	Committed: func(tb testing.TB, dest string) []string {
		addrs, topic := splitDest(dest)
		return values(readTopic(tb.(*testing.T), addrs, topic, true))
	},
}

func splitDest(dest string) (addrs []string, topic string) {
	a, topic, _ := strings.Cut(dest, "/")
	return strings.Split(a, ","), topic
}

// TestExactlyOnceSinkConformance runs the exactly-once sink conformance
// suite (random in-process failures, and kill -9 of child processes, each
// followed by a restore; the committed output read under read_committed)
// for ExactlyOnceSink.
func TestExactlyOnceSinkConformance(t *testing.T) {
	b := startBroker(t, nil)
	n := 0
	s := conformanceSink
	s.NewDest = func(t testing.TB) string {
		topic := fmt.Sprintf("conf-%d", n)
		n++
		if err := b.CreateTopic(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		return strings.Join(b.Addrs(), ",") + "/" + topic
	}
	sinkconformance.Run(t, s, sinkconformance.Options{Records: 500})
}
