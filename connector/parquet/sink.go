package parquet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Txn is one transaction of the sink: the part files one subtask wrote in
// one checkpoint interval. It is stored in checkpoints as JSON.
type Txn struct {
	Subtask int    `json:"subtask"`
	Run     string `json:"run"`
	Seq     int64  `json:"seq"`
	Parts   []Part `json:"parts,omitempty"`
}

// Part is one part file of a transaction.
type Part struct {
	// Final is the key of the committed file under the root; the
	// in-progress key is derived from it (inProgressKey).
	Final   string `json:"final"`
	Records int64  `json:"records"`
	// Bytes is the file's size once finished (0 while it is written).
	Bytes int64 `json:"bytes,omitempty"`
}

const inProgressDir = ".inprogress"

// partName is the base name of part n of transaction t.
func (t *Txn) partName(n int) string {
	return fmt.Sprintf("part-%04d-%s-%06d-%04d.parquet", t.Subtask, t.Run, t.Seq, n)
}

func inProgressKey(final string) string {
	return inProgressDir + "/" + final[strings.LastIndexByte(final, '/')+1:] + ".inprogress"
}

// parseInProgress reads subtask, run and transaction from an in-progress
// object's name; ok is false for a name the sink did not write.
func parseInProgress(name string) (subtask int, run string, seq int64, ok bool) {
	base, found := strings.CutSuffix(name, ".parquet.inprogress")
	if !found {
		return 0, "", 0, false
	}
	f := strings.Split(base, "-")
	if len(f) != 5 || f[0] != "part" || len(f[2]) != runLen {
		return 0, "", 0, false
	}
	var n int
	if _, err := fmt.Sscanf(f[1]+" "+f[3]+" "+f[4], "%d %d %d", &subtask, &seq, &n); err != nil {
		return 0, "", 0, false
	}
	return subtask, f[2], seq, true
}

// runLen is the length of a run id: 16 hex digits of its start time in
// nanoseconds (so runs compare by start time), then 8 random ones.
const runLen = 24

func newRun() string {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%016x%s", time.Now().UnixNano(), hex.EncodeToString(b[:]))
}

// batchSize is how many records a part buffers before handing them to
// the Parquet writer in one call.
const batchSize = 256

// encoder makes the Parquet writer of one part file.
type encoder[T any] interface {
	newWriter(w io.Writer, opts []pq.WriterOption) rowWriter[T]
}

// rowWriter is a Parquet writer of one part file.
type rowWriter[T any] interface {
	write(rows []T) error
	// flush ends the current row group.
	flush() error
	// size is the estimated file size so far (written and buffered).
	size() int64
	// close writes the footer.
	close() error
}

// ExactlyOnce returns the sink of weir.TwoPhaseCommit that writes records
// of the struct type T as rows of Parquet files (the schema is T's, as
// parquet-go derives it: field names, parquet struct tags). o must be
// valid (Options.Validate); use Sink to have it checked when the job is
// built.
func ExactlyOnce[T any](o Options) func(*runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
	return newSinkFunc[T](o, structEncoder[T]{})
}

// Sink ends s in an exactly-once Parquet sink of the struct type T (see
// ExactlyOnce), with o validated when the job is built.
func Sink[T any](s weir.Stream[T], name string, o Options) weir.Stream[struct{}] {
	validate := func() error {
		if err := o.Validate(); err != nil {
			return err
		}
		return checkStruct[T]()
	}
	return weir.TwoPhaseCommitChecked(s, name, validate, ExactlyOnce[T](o))
}

func newSinkFunc[T any](o Options, enc encoder[T]) func(*runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
	return func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
		if err := o.Validate(); err != nil {
			return nil, err
		}
		pt, _ := parsePartition(o.Partition)
		st, err := openStore(o.Path)
		if err != nil {
			return nil, err
		}
		var check func(T) error
		if c, ok := enc.(interface{ check(T) error }); ok {
			check = c.check
		}
		return &sink[T]{
			o: o, st: st, pt: pt, enc: enc, check: check, wopts: writerOptions(o),
			subtask: ctx.Subtask, run: newRun(), restored: ctx.Restored() != nil,
			parts: map[string]*openPart[T]{},
		}, nil
	}
}

// sink is one subtask's committer. It holds the open parts of the open
// transaction only (Write is always called with the open one): a
// pre-committed transaction is a list of finished, durable objects.
type sink[T any] struct {
	o        Options
	st       store
	pt       *partitioner
	enc      encoder[T]
	check    func(T) error // nil: every record fits (struct records)
	wopts    []pq.WriterOption
	subtask  int
	run      string
	restored bool
	seq      int64

	// parts are the open part files of the open transaction by
	// partition directory; last caches the latest one used.
	parts   map[string]*openPart[T]
	lastDir string
	last    *openPart[T]
}

type openPart[T any] struct {
	idx int // in Txn.Parts
	obj objectWriter
	cw  countingWriter
	w   rowWriter[T]
	buf []T
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *sink[T]) Begin() (*Txn, error) {
	s.seq++
	return &Txn{Subtask: s.subtask, Run: s.run, Seq: s.seq}, nil
}

func (s *sink[T]) Write(txn *Txn, r weir.Record[T]) error {
	if s.check != nil {
		if err := s.check(r.Value); err != nil {
			return err
		}
	}
	dir := s.pt.dir(r.Timestamp)
	p := s.last
	if p == nil || dir != s.lastDir {
		p = s.parts[dir]
		if p == nil {
			var err error
			if p, err = s.openPart(txn, dir); err != nil {
				return err
			}
		}
		s.last, s.lastDir = p, dir
	}
	p.buf = append(p.buf, r.Value)
	txn.Parts[p.idx].Records++
	if len(p.buf) < batchSize {
		return nil
	}
	return s.drain(txn, dir, p)
}

func (s *sink[T]) openPart(txn *Txn, dir string) (*openPart[T], error) {
	final := txn.partName(len(txn.Parts))
	if dir != "" {
		final = dir + "/" + final
	}
	obj, err := s.st.create(inProgressKey(final))
	if err != nil {
		return nil, err
	}
	p := &openPart[T]{idx: len(txn.Parts), obj: obj, buf: make([]T, 0, batchSize)}
	p.cw.w = obj
	p.w = s.enc.newWriter(&p.cw, s.wopts)
	txn.Parts = append(txn.Parts, Part{Final: final})
	s.parts[dir] = p
	return p, nil
}

// drain hands the buffered records of p to its Parquet writer, then ends
// the row group or rolls the file when they are big enough (P5).
func (s *sink[T]) drain(txn *Txn, dir string, p *openPart[T]) error {
	if err := p.w.write(p.buf); err != nil {
		return fmt.Errorf("parquet: write %s: %w", txn.Parts[p.idx].Final, err)
	}
	clear(p.buf)
	p.buf = p.buf[:0]
	size := p.w.size()
	switch {
	case size >= s.o.rollSize():
		return s.finish(txn, dir, p)
	case size-p.cw.n >= s.o.rowGroupSize():
		if err := p.w.flush(); err != nil {
			return fmt.Errorf("parquet: write %s: %w", txn.Parts[p.idx].Final, err)
		}
	}
	return nil
}

// finish writes p's footer and closes its object (durable from then on).
func (s *sink[T]) finish(txn *Txn, dir string, p *openPart[T]) error {
	delete(s.parts, dir)
	if s.last == p {
		s.last = nil
	}
	if len(p.buf) > 0 {
		if err := p.w.write(p.buf); err != nil {
			p.obj.Abort()
			return fmt.Errorf("parquet: write %s: %w", txn.Parts[p.idx].Final, err)
		}
	}
	if err := p.w.close(); err != nil {
		p.obj.Abort()
		return fmt.Errorf("parquet: write %s: %w", txn.Parts[p.idx].Final, err)
	}
	if err := p.obj.Close(); err != nil {
		return err
	}
	txn.Parts[p.idx].Bytes = p.cw.n
	return nil
}

// PreCommit finishes every open part: after it, each part of txn is a
// complete, durable in-progress object.
func (s *sink[T]) PreCommit(txn *Txn) error {
	for dir, p := range s.parts {
		if err := s.finish(txn, dir, p); err != nil {
			return err
		}
	}
	return nil
}

// Commit publishes every part of txn (idempotent: P3).
func (s *sink[T]) Commit(txn *Txn) error {
	if txn == nil {
		return nil
	}
	for _, p := range txn.Parts {
		if err := s.st.publish(inProgressKey(p.Final), p.Final); err != nil {
			return err
		}
	}
	return nil
}

// Recover deletes the in-progress objects that no restorable state needs.
// It runs after this subtask committed its share of the restored
// checkpoint's pre-committed transactions, but other subtasks may not yet
// have committed theirs (the lists are redistributed on a rescale), and
// may already be writing: so it deletes only what none of them can need.
//
//   - Restored with open transaction T (subtask s, run r, seq k): the
//     objects of subtask s whose run is not r, or is r with a transaction
//     >= k, and whose run started before this one. The checkpoint's
//     pre-committed transactions of subtask s are all of run r (one run per
//     subtask wrote it) and older than k; runs started by this restore
//     (any subtask's) start after this one's or are this one, and this one
//     has written nothing yet.
//   - Fresh start: the objects of this subtask's index from earlier runs
//     (a previous job's leftovers; nothing is restored).
//   - Restored without an open transaction for this subtask (a rescale
//     gave it none): nothing, since it cannot tell whose they are.
func (s *sink[T]) Recover(open *Txn, ok bool) error {
	var match func(sub int, run string, seq int64) bool
	switch {
	case ok && open != nil:
		match = func(sub int, run string, seq int64) bool {
			return sub == open.Subtask && (run != open.Run || seq >= open.Seq)
		}
	case !s.restored:
		match = func(sub int, run string, seq int64) bool { return sub == s.subtask }
	default:
		return nil
	}
	names, err := s.st.list(inProgressDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		sub, run, seq, valid := parseInProgress(n)
		if !valid || run[:16] >= s.run[:16] || !match(sub, run, seq) {
			continue
		}
		if err := s.st.remove(inProgressDir + "/" + n); err != nil {
			return err
		}
	}
	return nil
}

// Close discards the open parts (their transaction was not pre-committed)
// and closes the store.
func (s *sink[T]) Close() error {
	for dir, p := range s.parts {
		p.obj.Abort()
		delete(s.parts, dir)
	}
	return s.st.close()
}

// structEncoder writes a struct type through parquet-go's generic writer.
type structEncoder[T any] struct{}

func (structEncoder[T]) newWriter(w io.Writer, opts []pq.WriterOption) rowWriter[T] {
	return genericWriter[T]{pq.NewGenericWriter[T](w, opts...)}
}

type genericWriter[T any] struct{ w *pq.GenericWriter[T] }

func (g genericWriter[T]) write(rows []T) error {
	_, err := g.w.Write(rows)
	return err
}
func (g genericWriter[T]) flush() error { return g.w.Flush() }
func (g genericWriter[T]) size() int64  { return g.w.Size() }
func (g genericWriter[T]) close() error { return g.w.Close() }

// checkStruct reports a T that parquet-go cannot derive a schema from.
func checkStruct[T any]() (err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			err = fmt.Errorf("parquet: no Parquet schema for %T: %v; want a struct type with exported fields", zero, r)
		}
	}()
	var zero T
	pq.SchemaOf(zero)
	return nil
}
