package replay

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/kafkasec"
)

// InputRange selects the records of an input topic: offsets [FromOffset,
// ToOffset) in every partition, and timestamps [From, To). A negative
// offset or a zero time is no bound.
type InputRange struct {
	FromOffset, ToOffset int64
	From, To             time.Time
}

func (r InputRange) has(rec *kgo.Record) bool {
	switch {
	case r.FromOffset >= 0 && rec.Offset < r.FromOffset,
		r.ToOffset >= 0 && rec.Offset >= r.ToOffset,
		!r.From.IsZero() && rec.Timestamp.Before(r.From),
		!r.To.IsZero() && !rec.Timestamp.Before(r.To):
		return false
	}
	return true
}

// ReadInputs reads the agent's input history from topic (up to the end
// offsets it has when ReadInputs starts) and returns a Run per record in
// rng, with the input and its key from decode (skip: the record is not an
// input of the agent, such as one a filter drops) and no recorded
// decision: Evaluate then reports every new decision as changed and
// refuses (or stubs) every tool call, unless Recorded gives them the
// decisions and tool results an event log recorded. Runs are in timestamp
// order (then partition and offset); a key's runs get sequence numbers
// 0, 1, ... in that order.
func ReadInputs(ctx context.Context, brokers []string, sec kafkasec.Security, topic, operator string, rng InputRange,
	decode func(*kgo.Record) (key string, input any, skip bool, err error)) ([]*Run, error) {
	if len(brokers) == 0 {
		return nil, fmt.Errorf("replay: no brokers given to read topic %q", topic)
	}
	secOpts, err := sec.Opts()
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	start := kgo.NewOffset().AtStart()
	if rng.FromOffset > 0 {
		start = kgo.NewOffset().At(rng.FromOffset)
	}
	cl, err := kgo.NewClient(append(secOpts, kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))...)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("replay: listing the end offsets of topic %q: %w", topic, sec.Explain(err))
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("replay: topic %q: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		end := o.Offset
		if rng.ToOffset >= 0 && rng.ToOffset < end {
			end = rng.ToOffset
		}
		if o.Topic == topic && end > 0 && end > rng.FromOffset {
			left[o.Partition] = end
		}
	})
	type rec struct {
		run       *Run
		ts        int64
		partition int32
		offset    int64
	}
	var recs []rec
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("replay: reading topic %q partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if ferr != nil || !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if !rng.has(r) {
				return
			}
			key, in, skip, err := decode(r)
			if err != nil {
				ferr = fmt.Errorf("replay: topic %q partition %d offset %d: %w", topic, r.Partition, r.Offset, err)
				return
			}
			if skip {
				return
			}
			recs = append(recs, rec{&Run{Operator: operator, Key: key, TimeMs: r.Timestamp.UnixMilli(), Input: in, HasInput: true, NoRecord: true},
				r.Timestamp.UnixMilli(), r.Partition, r.Offset})
		})
		if ferr != nil {
			return nil, ferr
		}
	}
	sort.SliceStable(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.ts != b.ts {
			return a.ts < b.ts
		}
		if a.partition != b.partition {
			return a.partition < b.partition
		}
		return a.offset < b.offset
	})
	seq := map[string]int64{}
	out := make([]*Run, len(recs))
	for i, r := range recs {
		r.run.Seq = seq[r.run.Key]
		seq[r.run.Key]++
		out[i] = r.run
	}
	return out, nil
}

// Recorded gives runs read from an input topic (ReadInputs) what an event
// log recorded for the same input: the recorded run of the same key whose
// input is the same (canonical JSON), each recorded run used once, in
// order. Such a run gets the recorded decision, tool calls (so that the
// new agent's calls that are the same are answered from the record),
// model calls and tokens; the others keep none. It returns how many runs
// found theirs.
func Recorded(inputs, recorded []*Run) int {
	byInput := map[string][]*Run{}
	for _, r := range recorded {
		if !r.HasInput {
			continue
		}
		k, err := inputKey(r.Key, r.Input)
		if err != nil {
			continue
		}
		byInput[k] = append(byInput[k], r)
	}
	n := 0
	for _, in := range inputs {
		k, err := inputKey(in.Key, in.Input)
		if err != nil || len(byInput[k]) == 0 {
			continue
		}
		r := byInput[k][0]
		byInput[k] = byInput[k][1:]
		in.Outputs, in.Errors, in.ToolCalls, in.ModelCalls, in.Tokens = r.Outputs, r.Errors, r.ToolCalls, r.ModelCalls, r.Tokens
		in.NoRecord = false
		n++
	}
	return n
}

// inputKey is a key and an input as one comparable string.
func inputKey(key string, input any) (string, error) {
	b, err := agent.CanonicalJSON(input)
	if err != nil {
		return "", err
	}
	return key + "\x00" + string(b), nil
}
