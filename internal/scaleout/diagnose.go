package scaleout

import (
	"context"
	"encoding/binary"
	"log/slog"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
)

// exchangeCounts counts the data values and control records of each producer in
// the exchange topic (read_committed or not): what a failed comparison
// logs, to tell a loss in the source tasks from one in the keyed tasks.
func exchangeCounts(ctx context.Context, brokers []string, topic string, committed bool) (map[int32]int, map[int32]int, error) {
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: committed, Stop: stop}, kafka.WithMetadata(kafka.Bytes()))
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[kafka.Message[[]byte]]()))
	if err := env.Execute(ctx); err != nil {
		return nil, nil, err
	}
	data, ctl := map[int32]int{}, map[int32]int{}
	for _, m := range got.Values() {
		p := int32(binary.BigEndian.Uint32(m.Key))
		if n := cluster.ExchangeValues(m.Headers, m.Value); n > 0 {
			data[p] += n
		} else {
			ctl[p]++
		}
	}
	return data, ctl, nil
}
