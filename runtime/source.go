package runtime

import (
	"fmt"
	"log/slog"
	"strings"
	"unsafe"

	"github.com/weirproject/weir/clock"
)

// Source creates the readers of a source operator, one per subtask.
//
// Lifecycle: CreateReader is called once per subtask while the job is being
// built, before any reader is polled. Each Reader is then driven by its
// subtask goroutine alone (Poll, Ready) and closed once when the subtask
// ends, however it ends.
type Source[T any] interface {
	CreateReader(ctx SourceContext) (Reader[T], error)
}

// SourceFunc adapts a function to Source.
type SourceFunc[T any] func(ctx SourceContext) (Reader[T], error)

// CreateReader calls f.
func (f SourceFunc[T]) CreateReader(ctx SourceContext) (Reader[T], error) { return f(ctx) }

// SourceContext tells a reader which part of the source it reads.
type SourceContext struct {
	// Name of the source operator.
	Name string
	// Subtask and Parallelism: the reader reads the splits assigned to
	// subtask Subtask of Parallelism.
	Subtask, Parallelism int
	Clock                clock.Clock
	Logger               *slog.Logger
	// Restored holds the split states of a restored job (the SplitsList
	// list), or is nil on a fresh start.
	Restored *Restored
	// Counter and Gauge return the named metrics of this source subtask
	// (for per-split progress such as a partition's end offset).
	Counter func(name string) *Counter
	Gauge   func(name string) *Gauge
	// LabeledGauge returns a gauge of this source subtask with further
	// labels (Context.LabeledGauge), for per-split metrics such as a Kafka
	// partition's position. Nil in contexts built without a job.
	LabeledGauge func(name string, labels ...Label) *Gauge
}

// PollStatus says what a reader wants after a Poll.
type PollStatus int

const (
	// More means more records are available now: poll again.
	More PollStatus = iota
	// Wait means nothing is available now: the subtask waits until Ready
	// delivers, while still serving its mailbox and timers.
	Wait
	// Done means the reader has ended (bounded input). The subtask then
	// emits the final watermark (watermark.Max) and ends its output.
	Done
)

// Reader reads the splits of one source subtask.
type Reader[T any] interface {
	// Poll emits what is available now to out and returns without
	// blocking. It should emit a bounded number of records per call (a few
	// hundred) so the subtask can serve its mailbox between calls. The
	// first call adds the splits the reader starts with (AddSplit): the
	// periodic watermark emission starts after it, and a subtask with no
	// split then goes idle (watermark I16).
	Poll(out SourceOutput[T]) (PollStatus, error)
	// Ready returns a channel that delivers (or is closed) when Poll may
	// have something after it returned Wait. It may return nil if Poll
	// never returns Wait.
	Ready() <-chan struct{}
	// Close releases the reader's resources.
	Close() error
}

// SourceWatermarker is implemented by the SourceOutput the runtime hands a
// Reader: SourceWatermark is the watermark the source subtask has emitted
// over its splits so far (watermark.Min before the first). A reader that
// marks an idle split active again, and must have it hold the output
// where it stands rather than rejoin the minimum later (watermark I5),
// emits this as the split's watermark.
type SourceWatermarker interface {
	SourceWatermark() int64
}

// SourceOutput is where a Reader emits records. Split ids are small
// non-negative integers chosen by the reader (for Kafka, an index over the
// assigned partitions); each split gets its own watermark generator and the
// subtask's watermark is the minimum over its active splits.
type SourceOutput[T any] interface {
	// Collect emits value v of split with the source's timestamp ts (Unix
	// ms, or NoTimestamp). The source's watermark.Strategy may derive the
	// timestamp from v instead; a record without a usable timestamp goes to
	// the dead-letter output.
	Collect(split int, v T, ts int64)
	// AddSplit announces a split before its first record. Collect on an
	// unknown split adds it.
	AddSplit(split int)
	// FinishSplit says a split has ended: it no longer holds the watermark.
	FinishSplit(split int)
	// SetSplitIdle marks a split idle (it leaves the minimum) or active,
	// for readers that know better than a time-out (for example a Kafka
	// partition that has caught up with its end offset).
	SetSplitIdle(split int, idle bool)
	// EmitWatermark reports split's watermark directly, for readers that
	// know their split's event-time progress better than a generator (and
	// for scripted sources in tests). It combines with the generators'
	// watermarks: a split's watermark is the highest either reported.
	EmitWatermark(split int, ts int64)
	// DeadLetter reports input that could not become a record (it did not
	// decode, or has no timestamp), with the reason. It is counted and sent
	// to the source's dead-letter output.
	DeadLetter(d DeadLetter)
}

// SourceRefOutput is implemented by the SourceOutput the runtime hands a
// Reader: CollectRef is Collect with the value passed by pointer, for
// readers of large record types (it saves copies of the value on the
// per-record path). *v is read during the call only: the reader may reuse
// it at once.
type SourceRefOutput[T any] interface {
	CollectRef(split int, v *T, ts int64)
}

// SourceBatchOutput is implemented by the SourceOutput the runtime hands a
// Reader: CollectAll(split, recs) is Collect(split, r.Value, r.Timestamp)
// for each r of recs, in order, at less cost per record. The records go
// downstream in runs, one call per run and operator where the operator
// after the source takes them so; where the split's watermark generator
// keeps only the highest timestamp (watermark.RunGenerator: bounded
// out-of-orderness, ascending, none) and every record carries a timestamp
// the source does not reassign, the generator observes the run once; any
// other generator sees each record in turn. What the job sees is what one
// Collect per record makes it see. recs belongs to the runtime during the
// call, which may set the records' timestamps to those the source's
// strategy assigns (watermark.Strategy.Timestamp); the reader may reuse it
// once the call returns.
type SourceBatchOutput[T any] interface {
	CollectAll(split int, recs []Record[T])
}

// CollectRun hands recs, records of split, to out: in one call where out
// takes runs (SourceBatchOutput), else one Collect per record. A reader
// that builds runs calls it instead of choosing itself.
func CollectRun[T any](out SourceOutput[T], split int, recs []Record[T]) {
	if all, ok := out.(SourceBatchOutput[T]); ok {
		all.CollectAll(split, recs)
		return
	}
	for i := range recs {
		out.Collect(split, recs[i].Value, recs[i].Timestamp)
	}
}

// RunRecords is how many records of type T a reader's run
// (SourceBatchOutput) should hold at most: as many as fit in 16 KiB, at
// least 4. A run is written by the reader and read again by the operators
// after the source; one that fits in the core's first-level cache is read
// from there (a run of 512 large records is not: the Nexmark event's 312
// bytes make 160 KiB).
func RunRecords[T any]() int {
	return max(4, runBytes/int(unsafe.Sizeof(Record[T]{})))
}

const runBytes = 16 << 10

// DeadLetter is input a source could not turn into a record.
type DeadLetter struct {
	// Source is the name of the source operator.
	Source string `json:"source"`
	// Split and Position locate the input (for files, the line number;
	// for Kafka, the partition and offset).
	Split    int   `json:"split"`
	Position int64 `json:"position"`
	// Raw is the undecodable input, if there was one.
	Raw []byte `json:"raw,omitempty"`
	// Value is the decoded value, when decoding worked but the record had
	// no usable timestamp.
	Value any `json:"value,omitempty"`
	// Reason says what was wrong.
	Reason string `json:"reason"`
}

// String formats d for people: the source, where the input was, the
// reason, and the start of the raw input (or the value) it concerns.
func (d DeadLetter) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s split %d position %d: %s", d.Source, d.Split, d.Position, d.Reason)
	switch {
	case len(d.Raw) > 0:
		raw := d.Raw
		if len(raw) > 80 {
			raw = raw[:80]
		}
		fmt.Fprintf(&b, " (input %q", raw)
		if len(d.Raw) > 80 {
			fmt.Fprintf(&b, "… %d bytes", len(d.Raw))
		}
		b.WriteString(")")
	case d.Value != nil:
		fmt.Fprintf(&b, " (value %+v)", d.Value)
	}
	return b.String()
}

// DeadLetterTag is the side output of every source that carries its dead
// letters.
var DeadLetterTag = NewOutputTag[DeadLetter]("dead-letters")
