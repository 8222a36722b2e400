package jsonl

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/runtime"
)

// writeBufferSize is the size of a sink subtask's write buffer.
const writeBufferSize = 64 << 10

// Sink returns a sink for weir.ToSink that writes each record's value as
// one JSON line (encoding/json, without HTML escaping) to the file
// PartPath(path, subtask, parallelism): path itself when the sink runs with
// parallelism 1, path + "-" + subtask index otherwise. A job that starts
// afresh creates or truncates each file when the sink subtask opens; a job
// restored from a checkpoint or savepoint cuts each file back to its length
// at that checkpoint and appends to it. The directory must exist. Record
// timestamps are not written: a job that reads the file back must find the
// event time in the value.
//
// Writes are buffered, and flushed (and synced) at every checkpoint and
// when the subtask closes, however the job ends. The files' lengths are the
// sink's state (J6).
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
	abs   string // f's absolute path: the name in the sink's state
	bw    *bufio.Writer
	enc   *json.Encoder
	dirty bool // written to since the last Flush
}

// filesList names the sink's state: one item per subtask, its file's
// absolute path and its length at the checkpoint (checkpoint.Union, so
// that a restored subtask of any parallelism finds every file of the job
// before it).
const filesList = "files"

// openLineWriter opens the sink subtask's file (PartPath), truncated when
// the job starts afresh. When it was restored, the file is cut back to
// the length the checkpoint recorded, so that the lines written after the
// checkpoint, which the restored job writes again, are not in it twice
// (J6); subtask 0 also cuts the files of the restored job that no subtask
// of this one writes (another parallelism).
func openLineWriter(ctx *runtime.Context, path string) (*lineWriter, error) {
	name, err := filepath.Abs(PartPath(path, ctx.Subtask, ctx.Parallelism))
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	r := ctx.Restored()
	if r == nil {
		return newLineWriter(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	}
	items, err := r.List(filesList)
	if err != nil {
		return nil, fmt.Errorf("jsonl: restoring %s: %w", name, err)
	}
	lengths := make(map[string]int64, len(items))
	for _, it := range items {
		n, size, ok := decodeFileLength(it)
		if !ok {
			return nil, fmt.Errorf("jsonl: restoring %s: a file length in the checkpoint is corrupt", name)
		}
		lengths[n] = size
	}
	if len(items) == 0 {
		// A checkpoint of a weir that did not record lengths: append.
		return newLineWriter(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	}
	if ctx.Subtask == 0 {
		own := make(map[string]bool, ctx.Parallelism)
		for i := 0; i < max(ctx.Parallelism, 1); i++ {
			n, err := filepath.Abs(PartPath(path, i, ctx.Parallelism))
			if err != nil {
				return nil, fmt.Errorf("jsonl: %w", err)
			}
			own[n] = true
		}
		for n, size := range lengths {
			if !own[n] {
				if err := cutTo(ctx.Logger, n, size, false); err != nil {
					return nil, err
				}
			}
		}
	}
	size, ok := lengths[name]
	if !ok {
		// Not written by the restored job (it ran at another parallelism):
		// what the file holds is not this job's output.
		return newLineWriter(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	}
	if err := cutTo(ctx.Logger, name, size, true); err != nil {
		return nil, err
	}
	return newLineWriter(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
}

// cutTo truncates the file name to size, the length a checkpoint recorded.
// A file shorter than that (rotated, cut or removed by someone else since)
// is left as it is, with a warning: the lines it lost are not weir's to
// write again. A missing file is created when create is set.
func cutTo(log *slog.Logger, name string, size int64, create bool) error {
	flag := os.O_WRONLY
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(name, flag, 0o666)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	switch now := fi.Size(); {
	case now > size:
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("jsonl: cutting %s back to its checkpointed length: %w", name, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("jsonl: %s: %w", name, err)
		}
		if log != nil {
			log.Info("jsonl: cut the lines written after the restored checkpoint", "file", name, "length", size, "cut", now-size)
		}
	case now < size && log != nil:
		log.Warn("jsonl: file shorter than at the restored checkpoint (rotated or cut since?); appending to it", "file", name, "length", now, "checkpointed", size)
	}
	return nil
}

func encodeFileLength(name string, size int64) []byte {
	b := binary.AppendUvarint(nil, uint64(size))
	return append(b, name...)
}

func decodeFileLength(b []byte) (name string, size int64, ok bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > math.MaxInt64 {
		return "", 0, false
	}
	return string(b[n:]), int64(v), true
}

func newLineWriter(path string, flag int) (*lineWriter, error) {
	f, err := os.OpenFile(path, flag, 0o666)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	bw := bufio.NewWriterSize(f, writeBufferSize)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &lineWriter{f: f, abs: path, bw: bw, enc: enc}, nil
}

func (w *lineWriter) write(v any) error {
	w.dirty = true
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("jsonl: %s: %w", w.f.Name(), err)
	}
	killpoint.Hit("sink.after-write") // crash tests: a line in the buffer, some flushed
	return nil
}

// Flush writes the lines buffered since the last Flush to the file and
// syncs it.
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

// SnapshotState implements runtime.Snapshotter (weir.SinkWriter): at a
// checkpoint the lines written since the last one go to the file and to
// its device, and the file's length is the sink's state (J6).
func (w *lineWriter) SnapshotState(sw *runtime.SnapshotWriter) error {
	if err := w.Flush(); err != nil {
		return err
	}
	fi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	sw.List(filesList, checkpoint.Union, [][]byte{encodeFileLength(w.abs, fi.Size())})
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
