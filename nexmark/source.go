package nexmark

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Source adds a source of g's events 0 .. events-1 (events < 0: without
// end, until the job is cancelled) in `splits` splits: split s emits event
// numbers s, s+splits, s+2*splits, ... in increasing order, so every event
// is emitted exactly once however many splits and subtasks there are (N6).
// Splits are spread over the source's subtasks (split s to subtask
// s % parallelism), each with its own monotonous watermark (timestamps
// never decrease within a split, N2); the subtask's watermark is the
// minimum over its splits, so no event is late downstream. Split positions
// are checkpointed and restore at any parallelism. splits < 1 means 1.
//
// Events are generated as they are read, as fast as the job takes them:
// the event rate of the Config sets event time, not pace.
func Source(env *weir.Environment, name string, g *Generator, events int64, splits int) weir.Stream[Event] {
	splits = max(splits, 1)
	src := runtime.SourceFunc[Event](func(ctx runtime.SourceContext) (runtime.Reader[Event], error) {
		r := &reader{g: g, events: events, splits: int64(splits)}
		if ctx.Restored != nil {
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				s, n := binary.Varint(it)
				next, m := int64(0), 0
				if n > 0 {
					next, m = binary.Varint(it[n:])
				}
				if n <= 0 || m <= 0 || s < 0 || s >= int64(splits) || next < 0 {
					return nil, fmt.Errorf("nexmark: source %q: corrupt split position in the checkpoint (or it was taken with another number of splits than %d)", ctx.Name, splits)
				}
				r.pos = append(r.pos, splitPos{split: s, next: next})
			}
			return r, nil
		}
		for s := ctx.Subtask; s < splits; s += ctx.Parallelism {
			r.pos = append(r.pos, splitPos{split: int64(s), next: int64(s)})
		}
		return r, nil
	})
	return weir.FromSource(env, name, src, watermark.ForMonotonous[Event]())
}

type splitPos struct {
	split int64
	next  int64 // the next event number of the split
}

type reader struct {
	g       *Generator
	events  int64
	splits  int64
	pos     []splitPos
	started bool
	ev      Event
	ended   []int // splits that ended in the current Poll
}

// perPoll is how many events one split emits per Poll.
const perPoll = 128

func (r *reader) Poll(out runtime.SourceOutput[Event]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		for _, p := range r.pos {
			out.AddSplit(int(p.split))
		}
	}
	// The runtime's output takes the event by pointer: the 304-byte Event
	// is copied once per record, into the record, not at every call.
	ref, _ := out.(runtime.SourceRefOutput[Event])
	live := 0
	r.ended = r.ended[:0]
	for i := range r.pos {
		p := &r.pos[i]
		if r.events >= 0 && p.next >= r.events {
			continue
		}
		for k := 0; k < perPoll && (r.events < 0 || p.next < r.events); k++ {
			r.g.Fill(p.next, &r.ev)
			if ref != nil {
				ref.CollectRef(int(p.split), &r.ev, r.ev.Timestamp())
			} else {
				out.Collect(int(p.split), r.ev, r.ev.Timestamp())
			}
			p.next += r.splits
		}
		if r.events >= 0 && p.next >= r.events {
			r.ended = append(r.ended, int(p.split))
			continue
		}
		live++
	}
	// Splits that ended are finished (they stop holding the watermark)
	// only while others go on. The last ones are left to the end of the
	// reader, which emits the maximum watermark (the runtime would keep
	// finishing them from making the subtask idle before it, but there is
	// no need to finish what ends anyway; docs/nexmark.md, "Fixed: a
	// finished source subtask was idle for a moment").
	if live > 0 {
		for _, s := range r.ended {
			out.FinishSplit(s)
		}
	}
	if live == 0 {
		if r.events < 0 {
			// More subtasks than splits: stay up, idle, so checkpoints
			// keep working.
			return runtime.Wait, nil
		}
		return runtime.Done, nil
	}
	return runtime.More, nil
}

func (r *reader) Ready() <-chan struct{} { return nil }
func (r *reader) Close() error           { return nil }

// SnapshotSplits implements runtime.SplitSnapshotter: each split and its
// next event number.
func (r *reader) SnapshotSplits(int64) ([][]byte, error) {
	items := make([][]byte, 0, len(r.pos))
	for _, p := range r.pos {
		items = append(items, binary.AppendVarint(binary.AppendVarint(nil, p.split), p.next))
	}
	return items, nil
}
