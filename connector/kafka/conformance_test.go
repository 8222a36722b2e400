package kafka

import (
	"fmt"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// TestExactlyOnceSinkConformance runs the exactly-once sink conformance
// suite (random in-process failures and restores; the committed output
// read under read_committed) for ExactlyOnceSink.
func TestExactlyOnceSinkConformance(t *testing.T) {
	topics := map[string]int32{}
	for i := range 8 {
		topics[fmt.Sprintf("conf-%d", i)] = 2
	}
	b := startBroker(t, topics)
	n := 0
	sinkconformance.Run(t, sinkconformance.Sink{
		NewDest: func(t testing.TB) string {
			topic := fmt.Sprintf("conf-%d", n)
			n++
			return topic
		},
		Attach: func(s weir.Stream[string], topic string) {
			ExactlyOnceSink(s, "out", SinkOptions[string]{Brokers: b.Addrs(), Topic: topic,
				Serialize: SerializeString(nil), TransactionalIDPrefix: "conformance-" + topic}).UID("out")
		},
		Committed: func(tb testing.TB, topic string) []string {
			return values(readTopic(t, b.Addrs(), topic, true))
		},
	}, sinkconformance.Options{Records: 500})
}
