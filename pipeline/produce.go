package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/internal/fsync"
)

// produceFiles loads each JSON-lines file into its topic if the topic is
// empty (so a restart on a persistent embedded broker does not load it
// twice); the files of one topic are loaded together, in their order. Lines are produced as they are (a line that is not a JSON object
// is produced too: the job sends it to its dead letters).
//
// A load that stopped part way (the process killed while producing) is
// finished by the next start rather than skipped: with dir, the embedded
// broker's data directory, a marker file names the topic while its load is
// under way. Every record's partition is a function of the file (the key's
// hash as Kafka's default partitioner computes it, or, without a key, its
// place among the keyless lines modulo the partitions), and the producer
// is idempotent, so each partition holds a prefix of its records: the
// next start produces the rest of each.
func produceFiles(ctx context.Context, brokers []string, dir string, ps []ProduceSpec, reg format.Registry) error {
	if len(ps) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("pipeline: produce: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The files of one topic are one load, in the order listed.
	var topics []string
	byTopic := map[string][]ProduceSpec{}
	for _, p := range ps {
		if _, ok := byTopic[p.Topic]; !ok {
			topics = append(topics, p.Topic)
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	}
	for _, topic := range topics {
		specs := byTopic[topic]
		first := specs[0]
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("%s: produce: %w", first.Pos, err)
		}
		have := map[int32]int64{}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { have[o.Partition] = o.Offset; n += o.Offset })
		marker := ""
		if dir != "" {
			marker = filepath.Join(dir, "weir-produce-"+url.PathEscape(topic)+".loading")
		}
		_, statErr := os.Stat(marker)
		resume := marker != "" && statErr == nil
		if n > 0 && !resume {
			continue
		}
		var recs []*kgo.Record
		for _, p := range specs {
			rs, err := readProduced(p)
			if err != nil {
				return err
			}
			if err := encodeProduced(ctx, reg, p, rs); err != nil { // pipeline/format.go
				return err
			}
			recs = append(recs, rs...)
		}
		if err := partitionProduced(first, recs, int32(len(have))); err != nil {
			return err
		}
		if resume { // keep what each partition lacks
			seen := map[int32]int64{}
			kept := recs[:0]
			for _, r := range recs {
				if seen[r.Partition]++; seen[r.Partition] > have[r.Partition] {
					kept = append(kept, r)
				}
			}
			recs = kept
		}
		if marker != "" {
			if err := fsync.WriteFile(marker, nil, 0o644); err != nil {
				return fmt.Errorf("%s: produce: %w", first.Pos, err)
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("%s: produce to %s: %w", first.Pos, topic, err)
		}
		if marker != "" {
			if err := os.Remove(marker); err != nil {
				return fmt.Errorf("%s: produce: %w", first.Pos, err)
			}
		}
	}
	return nil
}

// readProduced reads p's file into records.
func readProduced(p ProduceSpec) ([]*kgo.Record, error) {
	f, err := os.Open(p.File)
	if err != nil {
		return nil, fmt.Errorf("%s: produce: %w", p.Pos, err)
	}
	defer f.Close()
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
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: produce: %s: %w", p.Pos, p.File, err)
	}
	return recs, nil
}

// partitionProduced sets the partition of each of p's records, for a
// topic of parts partitions, as a function of the records alone (see
// produceFiles): a keyed record's is its key's murmur2 hash modulo parts,
// as Kafka's default partitioner computes it; the others take turns.
func partitionProduced(p ProduceSpec, recs []*kgo.Record, parts int32) error {
	if parts <= 0 {
		return fmt.Errorf("%s: produce: topic %s has no partitions", p.Pos, p.Topic)
	}
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic(p.Topic)
	var keyless int32
	for _, r := range recs {
		if r.Key != nil {
			r.Partition = int32(byKey.Partition(r, int(parts)))
		} else {
			r.Partition = keyless % parts
			keyless++
		}
	}
	return nil
}
