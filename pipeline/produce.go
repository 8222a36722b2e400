package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/format"
)

// produceFiles loads each JSON-lines file into its topic if the topic is
// empty (so a restart on a persistent embedded broker does not load it
// twice). Lines are produced as they are (a line that is not a JSON object
// is produced too: the job sends it to its dead letters).
func produceFiles(ctx context.Context, brokers []string, ps []ProduceSpec, reg format.Registry) error {
	if len(ps) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return fmt.Errorf("pipeline: produce: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, p := range ps {
		ends, err := adm.ListEndOffsets(ctx, p.Topic)
		if err != nil {
			return fmt.Errorf("%s: produce: %w", p.Pos, err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		if n > 0 {
			continue
		}
		f, err := os.Open(p.File)
		if err != nil {
			return fmt.Errorf("%s: produce: %w", p.Pos, err)
		}
		var kp, tp fieldPath
		if p.Key != "" {
			kp, _ = parseFieldPath(p.Key)
		}
		if p.Timestamp != "" {
			tp, _ = parseFieldPath(p.Timestamp)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var recs []*kgo.Record
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			if len(line) == 0 {
				continue
			}
			r := &kgo.Record{Topic: p.Topic, Value: line}
			if kp != nil || tp != nil {
				if v, err := decodeRecord(line); err == nil {
					if kp != nil {
						r.Key = []byte(keyString(kp.get(v)))
					}
					if tp != nil {
						if ts, ok := timestampOf(v, tp); ok {
							r.Timestamp = time.UnixMilli(ts)
						}
					}
				}
			}
			recs = append(recs, r)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: produce: %s: %w", p.Pos, p.File, err)
		}
		if err := encodeProduced(ctx, reg, p, recs); err != nil { // pipeline/format.go
			return err
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("%s: produce to %s: %w", p.Pos, p.Topic, err)
		}
	}
	return nil
}
