package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/weirproject/weir/runtime"
)

// DefaultMaxLineSize is the longest line, in bytes without the line ending,
// that a source decodes when Options.MaxLineSize is 0.
const DefaultMaxLineSize = 1 << 20

// RawPrefix is how many bytes of an over-long line a dead letter keeps in
// its Raw field.
const RawPrefix = 1 << 10

// linesPerPoll bounds the lines one Poll reads (J5).
const linesPerPoll = 256

// readBufferSize is the size of each file's read buffer. Longer lines are
// assembled in a separate buffer.
const readBufferSize = 64 << 10

// Options configure a source. The zero value is the default of Source.
type Options[T any] struct {
	// MaxLineSize is the longest line, in bytes without its line ending,
	// that is decoded. A longer line is a dead letter (with its first
	// RawPrefix bytes as Raw), not a failure. 0 means DefaultMaxLineSize.
	MaxLineSize int
	// DisallowUnknownFields makes an object key that matches no field of T
	// a decoding error (json.Decoder.DisallowUnknownFields), so the line
	// becomes a dead letter.
	DisallowUnknownFields bool
	// Ordered says that each subtask's files are in event-time order (the
	// records of a file are not behind the watermark of the files before
	// it): a file is announced as a split only when it is opened, so the
	// watermark advances file by file instead of being held at
	// watermark.Min by the files not yet read (J3). Records of a later file
	// that are behind the watermark reached are late.
	Ordered bool
	// Timestamp, if set, extracts the event time (Unix ms) of each record
	// in the reader, which attaches it as the source timestamp. A record
	// for which it returns ok=false becomes a dead letter that names its
	// file and line (the runtime cannot name them when the strategy's
	// Timestamp rejects a record). Use it with a watermark.Strategy whose
	// Timestamp is nil, so that the strategy takes the source timestamp.
	// If nil, records carry runtime.NoTimestamp and the strategy must
	// assign timestamps.
	Timestamp func(v T) (ts int64, ok bool)
}

// Source returns a source reading the JSON Lines files at paths with the
// default Options. Use it with weir.FromSource and a watermark.Strategy
// whose Timestamp function gives each record's event time. See the package
// documentation for how files map to splits and subtasks.
func Source[T any](paths ...string) runtime.Source[T] {
	return SourceWith(Options[T]{}, paths...)
}

// Validate reports what is wrong with the options (nil if nothing is).
// SourceWith's readers fail with its error when the job starts.
func (o Options[T]) Validate() error {
	if o.MaxLineSize < 0 {
		return fmt.Errorf("jsonl: Options.MaxLineSize %d: want 0 (meaning %d) or a positive number of bytes", o.MaxLineSize, DefaultMaxLineSize)
	}
	return nil
}

// SourceWith is Source with options. Options are checked (Validate) when
// the job starts, before any file is opened.
func SourceWith[T any](opts Options[T], paths ...string) runtime.Source[T] {
	optsErr := opts.Validate()
	if opts.MaxLineSize <= 0 {
		opts.MaxLineSize = DefaultMaxLineSize
	}
	paths = append([]string(nil), paths...)
	return runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		if optsErr != nil {
			return nil, optsErr
		}
		par := max(ctx.Parallelism, 1)
		r := &reader[T]{opts: opts}
		if ctx.Restored != nil {
			// J7: the files come from the snapshot, each where it was.
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				var f file
				if err := json.Unmarshal(it, &f); err != nil {
					return nil, fmt.Errorf("jsonl: restoring a file position %q: %w", it, err)
				}
				if f.Index < 0 || f.Index >= len(paths) {
					return nil, fmt.Errorf("jsonl: the snapshot has file %d (%s), but the source has %d files; restore with the same paths", f.Index, f.Path, len(paths))
				}
				f.Path = paths[f.Index]
				r.files = append(r.files, f)
			}
			sort.Slice(r.files, func(i, j int) bool { return r.files[i].Index < r.files[j].Index })
			return r, nil
		}
		for i := ctx.Subtask; i < len(paths); i += par {
			r.files = append(r.files, file{Index: i, Path: paths[i]})
		}
		return r, nil
	})
}

// file is one split of a reader, and its position (J7): the JSON form is
// its item in a snapshot.
type file struct {
	Index int    `json:"file"`
	Path  string `json:"path"`
	// Lines is how many lines of the file have been read; Done is set
	// once it has been read to its end.
	Lines int64 `json:"lines"`
	Done  bool  `json:"done,omitempty"`
}

// reader reads the files of one subtask, one after the other.
type reader[T any] struct {
	opts      Options[T]
	files     []file
	next      int // index in files of the file to open after cur
	announced bool

	cur  *os.File
	path string
	idx  int   // split id of cur
	line int64 // number of the last line read from cur
	skip int64 // lines of cur read before the restored checkpoint
	br   *bufio.Reader
	long []byte // assembles lines longer than br's buffer

	rd bytes.Reader // for DisallowUnknownFields
}

func (r *reader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.announced {
		r.announced = true
		if !r.opts.Ordered {
			for _, f := range r.files {
				if !f.Done {
					out.AddSplit(f.Index)
				}
			}
		}
	}
	for range linesPerPoll {
		if r.cur == nil {
			for r.next < len(r.files) && r.files[r.next].Done {
				r.next++
			}
			if r.next >= len(r.files) {
				return runtime.Done, nil
			}
			if err := r.open(r.files[r.next]); err != nil {
				return 0, err
			}
			r.next++
			if r.opts.Ordered {
				out.AddSplit(r.idx)
			}
		}
		text, size, err := r.readLine()
		if err == io.EOF {
			err = r.cur.Close()
			r.cur = nil
			if err != nil {
				return 0, fmt.Errorf("jsonl: %s: %w", r.path, err)
			}
			r.files[r.next-1].Done = true
			out.FinishSplit(r.idx)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("jsonl: %s: line %d: %w", r.path, r.line+1, err)
		}
		r.line++
		r.files[r.next-1].Lines = r.line
		if r.line <= r.skip {
			continue // read before the restored checkpoint (J7)
		}
		if r.line == 1 && bytes.HasPrefix(text, []byte("\uFEFF")) {
			// A UTF-8 byte order mark: not part of the line, nor of its size.
			text = text[3:]
			size -= 3
		}
		if size > r.opts.MaxLineSize {
			out.DeadLetter(runtime.DeadLetter{Split: r.idx, Position: r.line, Raw: bytes.Clone(text[:min(len(text), RawPrefix)]),
				Reason: fmt.Sprintf("jsonl: %s:%d: line of %d bytes is longer than the maximum of %d", r.path, r.line, size, r.opts.MaxLineSize)})
			continue
		}
		if isBlank(text) {
			continue
		}
		var v T
		if err := r.decode(text, &v); err != nil {
			out.DeadLetter(runtime.DeadLetter{Split: r.idx, Position: r.line, Raw: bytes.Clone(text),
				Reason: fmt.Sprintf("jsonl: %s:%d: %v", r.path, r.line, err)})
			continue
		}
		ts := runtime.NoTimestamp
		if r.opts.Timestamp != nil {
			t, ok := r.opts.Timestamp(v)
			if !ok {
				out.DeadLetter(runtime.DeadLetter{Split: r.idx, Position: r.line, Raw: bytes.Clone(text), Value: v,
					Reason: fmt.Sprintf("jsonl: %s:%d: record has no usable timestamp", r.path, r.line)})
				continue
			}
			ts = t
		}
		out.Collect(r.idx, v, ts)
	}
	if r.cur == nil && r.next >= len(r.files) {
		return runtime.Done, nil
	}
	return runtime.More, nil
}

// SnapshotSplits returns the position of each of the reader's files (J7).
func (r *reader[T]) SnapshotSplits(int64) ([][]byte, error) {
	items := make([][]byte, 0, len(r.files))
	for _, f := range r.files {
		b, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		items = append(items, b)
	}
	return items, nil
}

func (r *reader[T]) open(f file) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("jsonl: %w", err) // the *PathError names the file
	}
	// The lines read before a restored checkpoint are read again, and
	// skipped (they were counted, and dead-lettered, before it).
	r.cur, r.path, r.idx, r.line, r.skip = fh, f.Path, f.Index, 0, f.Lines
	if r.br == nil {
		r.br = bufio.NewReaderSize(fh, readBufferSize)
	} else {
		r.br.Reset(fh)
	}
	return nil
}

// readLine returns the next line without its line ending ("\n" or "\r\n")
// and its length. The text is valid until the next call. Of a line longer
// than MaxLineSize, text may hold only a prefix (at least RawPrefix bytes);
// size is the full length. At the end of the file it returns io.EOF.
func (r *reader[T]) readLine() (text []byte, size int, err error) {
	chunk, err := r.br.ReadSlice('\n')
	if err == nil {
		return trimEOL(chunk), len(trimEOL(chunk)), nil
	}
	if err == io.EOF {
		if len(chunk) == 0 {
			return nil, 0, io.EOF
		}
		// The last line has no line ending.
		return trimEOL(chunk), len(trimEOL(chunk)), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, 0, err
	}
	// A line longer than the read buffer: assemble its first
	// MaxLineSize+2 bytes (enough to hold the longest allowed line with
	// "\r\n"), or RawPrefix if more, and read the rest to its end, counting.
	limit := max(r.opts.MaxLineSize+2, RawPrefix)
	r.long = append(r.long[:0], chunk[:min(len(chunk), limit)]...)
	n := len(chunk)
	var prev, last byte // the last two bytes of the line so far
	for {
		prev, last = lastTwo(chunk, prev, last)
		chunk, err = r.br.ReadSlice('\n')
		n += len(chunk)
		if len(r.long) < limit {
			r.long = append(r.long, chunk[:min(len(chunk), limit-len(r.long))]...)
		}
		if err == nil || err == io.EOF {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, 0, err
		}
	}
	prev, last = lastTwo(chunk, prev, last)
	size = n
	if last == '\n' {
		size--
		if prev == '\r' {
			size--
		}
	} else if last == '\r' {
		size-- // trimEOL drops a lone "\r" at the end of the file too
	}
	text = r.long[:min(len(r.long), size)]
	if cap(r.long) > 4*readBufferSize {
		r.long = nil // do not keep a huge buffer around; text still holds it
	}
	return text, size, nil
}

// lastTwo returns the last two bytes of a stream after chunk, given those
// before it.
func lastTwo(chunk []byte, prev, last byte) (byte, byte) {
	switch len(chunk) {
	case 0:
		return prev, last
	case 1:
		return last, chunk[0]
	}
	return chunk[len(chunk)-2], chunk[len(chunk)-1]
}

func (r *reader[T]) decode(text []byte, v *T) error {
	if !r.opts.DisallowUnknownFields {
		return json.Unmarshal(text, v)
	}
	r.rd.Reset(text)
	dec := json.NewDecoder(&r.rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid data after the top-level value")
	}
	return nil
}

func (r *reader[T]) Ready() <-chan struct{} { return nil }

func (r *reader[T]) Close() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}
