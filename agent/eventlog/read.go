package eventlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/kafkasec"
)

// Read reads JSON lines of entries from r and calls fn for each whose key
// is key ("" means every key), in file order. A line that is not an entry
// is an error naming its line number; fn's error stops the reading and is
// returned.
func Read(r io.Reader, key string, fn func(agent.LogEntry) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e agent.LogEntry
		if err := json.Unmarshal(line, &e); err != nil || e.Kind == "" {
			if err == nil {
				err = fmt.Errorf("no kind")
			}
			return fmt.Errorf("eventlog: line %d is not a log entry (%v)", n, err)
		}
		if key != "" && e.Key != key {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("eventlog: reading: %w", err)
	}
	return nil
}

// ReadFile is Read on the file at path.
func ReadFile(path, key string, fn func(agent.LogEntry) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("eventlog: %w", err)
	}
	defer f.Close()
	if err := Read(f, key, fn); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadTopic reads the topic from its start up to the end offsets it has
// when ReadTopic starts, and calls fn for every entry whose key is key (""
// means every key), in offset order per partition (a key's entries are in
// one partition, so in order). It stops at those end offsets, or when ctx
// is done. sec is TLS and SASL to the brokers (zero: plaintext).
func ReadTopic(ctx context.Context, brokers []string, sec kafkasec.Security, topic, key string, fn func(agent.LogEntry) error) error {
	if len(brokers) == 0 {
		return fmt.Errorf("eventlog: no brokers given to read topic %q", topic)
	}
	secOpts, err := sec.Opts()
	if err != nil {
		return fmt.Errorf("eventlog: %w", err)
	}
	cl, err := kgo.NewClient(append(secOpts, kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return fmt.Errorf("eventlog: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("eventlog: listing the end offsets of topic %q: %w", topic, sec.Explain(err))
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("eventlog: topic %q: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic && o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("eventlog: reading topic %q partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var stop error
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if stop != nil || !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			var e agent.LogEntry
			if err := json.Unmarshal(r.Value, &e); err != nil || e.Kind == "" {
				stop = fmt.Errorf("eventlog: topic %q partition %d offset %d is not a log entry", topic, r.Partition, r.Offset)
				return
			}
			if key != "" && e.Key != key {
				return
			}
			stop = fn(e)
		})
		if stop != nil {
			return stop
		}
	}
	return nil
}
