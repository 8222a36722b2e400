package jsonl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// writeBufferSize is the size of a sink subtask's write buffer.
const writeBufferSize = 64 << 10

// Sink returns a sink for weir.ToSink that writes each record's value as
// one JSON line (encoding/json, without HTML escaping) to the file
// PartPath(path, subtask, parallelism): path itself when the sink runs with
// parallelism 1, path + "-" + subtask index otherwise. A job that starts
// afresh creates or truncates each file when the sink subtask opens; a job
// restored from a checkpoint or savepoint appends to it. The directory must
// exist. Record timestamps are not written: a job that reads the file back
// must find the event time in the value.
//
// Writes are buffered, and flushed (and synced) at every checkpoint and
// when the subtask closes, however the job ends; the sink is at-least-once,
// not transactional (J6).
func Sink[T any](path string) func(ctx *runtime.Context) (weir.SinkWriter[T], error) {
	return func(ctx *runtime.Context) (weir.SinkWriter[T], error) {
		w, err := openLineWriter(ctx, path)
		if err != nil {
			return nil, err
		}
		return &sinkWriter[T]{w}, nil
	}
}

// PartPath returns the file a Sink or DeadLetterSink subtask writes: path
// when parallelism is 1 (or less), path + "-" + subtask otherwise.
func PartPath(path string, subtask, parallelism int) string {
	if parallelism <= 1 {
		return path
	}
	return path + "-" + strconv.Itoa(subtask)
}

// PartPaths names the files of every subtask of a sink of that
// parallelism at once, for messages: path, or path-{0..parallelism-1} (a
// shell's brace form, which expands to the PartPath of each subtask).
func PartPaths(path string, parallelism int) string {
	if parallelism <= 1 {
		return path
	}
	return path + "-{0.." + strconv.Itoa(parallelism-1) + "}"
}

// lineWriter is a buffered JSON-lines file.
type lineWriter struct {
	f     *os.File
	bw    *bufio.Writer
	enc   *json.Encoder
	dirty bool // written to since the last Flush
}

// openLineWriter opens the sink subtask's file (PartPath): truncated when
// the job starts afresh, appended to when it was restored (J6), so that
// what a run wrote before its last checkpoint is not lost when a later
// run resumes from it.
func openLineWriter(ctx *runtime.Context, path string) (*lineWriter, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if ctx.Restored() != nil {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	return newLineWriter(PartPath(path, ctx.Subtask, ctx.Parallelism), flag)
}

func newLineWriter(path string, flag int) (*lineWriter, error) {
	f, err := os.OpenFile(path, flag, 0o666)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	bw := bufio.NewWriterSize(f, writeBufferSize)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &lineWriter{f: f, bw: bw, enc: enc}, nil
}

func (w *lineWriter) write(v any) error {
	w.dirty = true
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("jsonl: %s: %w", w.f.Name(), err)
	}
	return nil
}

// Flush implements weir.SinkFlusher: at a checkpoint, the lines written
// since the last one go to the file and to its device (J6).
func (w *lineWriter) Flush() error {
	if !w.dirty {
		return nil
	}
	w.dirty = false
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("jsonl: %s: %w", w.f.Name(), err)
	}
	return nil
}

func (w *lineWriter) Close() error {
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("jsonl: %s: %w", w.f.Name(), err)
	}
	return nil
}

type sinkWriter[T any] struct{ *lineWriter }

func (w *sinkWriter[T]) Write(r weir.Record[T]) error { return w.write(r.Value) }

// DeadLetterSink returns a sink for weir.ToSink that writes dead letters
// (weir.DeadLetters of a source) as JSON lines, one object per dead letter
// with the fields
//
//	source, split, position, reason  as in weir.DeadLetter
//	raw        the raw input as a string, if it is valid UTF-8
//	rawBase64  the raw input in base64, if it is not
//	value      the decoded value as JSON, if there is one
//	valueError why the value could not be encoded, instead of value
//	time       the record's timestamp: when the source rejected the input
//	           (processing time, Unix ms)
//
// Files, buffering and guarantees are those of Sink. A value that cannot be
// encoded does not fail the job.
//
//	weir.ToSink(weir.DeadLetters(s), "dead-letters", jsonl.DeadLetterSink("dead.jsonl"))
func DeadLetterSink(path string) func(ctx *runtime.Context) (weir.SinkWriter[weir.DeadLetter], error) {
	return func(ctx *runtime.Context) (weir.SinkWriter[weir.DeadLetter], error) {
		w, err := openLineWriter(ctx, path)
		if err != nil {
			return nil, err
		}
		return &deadLetterWriter{w}, nil
	}
}

type deadLetterLine struct {
	Source     string          `json:"source"`
	Split      int             `json:"split"`
	Position   int64           `json:"position"`
	Reason     string          `json:"reason"`
	Raw        *string         `json:"raw,omitempty"`
	RawBase64  []byte          `json:"rawBase64,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	ValueError string          `json:"valueError,omitempty"`
	Time       int64           `json:"time"`
}

type deadLetterWriter struct{ *lineWriter }

func (w *deadLetterWriter) Write(r weir.Record[weir.DeadLetter]) error {
	d := r.Value
	l := deadLetterLine{Source: d.Source, Split: d.Split, Position: d.Position, Reason: d.Reason, Time: r.Timestamp}
	if d.Raw != nil {
		if utf8.Valid(d.Raw) {
			s := string(d.Raw)
			l.Raw = &s
		} else {
			l.RawBase64 = d.Raw
		}
	}
	if d.Value != nil {
		if v, err := json.Marshal(d.Value); err != nil {
			l.ValueError = err.Error()
		} else {
			l.Value = v
		}
	}
	return w.write(&l)
}
