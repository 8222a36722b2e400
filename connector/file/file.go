// Package file has an exactly-once file sink built on weir's two-phase
// commit: records are written to in-progress files, which are made durable
// at each checkpoint barrier and published (renamed) only when the
// checkpoint completes.
//
// Guarantees:
//
//	F1. A published file (part-SSSS-RUN-SEQ) holds exactly the records of
//	    one transaction, and is published at most once: after any number of
//	    crashes and restores, the published files of a subtask, in name
//	    order, hold each record of the restored run's input exactly once.
//	F2. In-progress files (.inprogress-part-...) of earlier runs that no
//	    checkpoint references are deleted on restore (aborted).
//	F3. Nothing is published before the checkpoint that covers it
//	    completes, except at the end of bounded input.
package file

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/fsync"
	"github.com/weirproject/weir/runtime"
)

// Txn is one transaction of the sink: one file.
type Txn struct {
	Subtask int    `json:"subtask"`
	Run     string `json:"run"`
	Seq     int64  `json:"seq"`
	Records int64  `json:"records"`
}

func (t *Txn) name() string { return fmt.Sprintf("part-%04d-%s-%012d", t.Subtask, t.Run, t.Seq) }

const inProgress = ".inprogress-"

var runSeq atomic.Int64

// ExactlyOnce returns a sink for weir.TwoPhaseCommit that writes
// encode(record) followed by a newline for every record, into files under
// dir. Each sink instance (each subtask of each run of the job, a restart
// in the process included) gets a new run id, so files of different runs
// never collide: a restarted job numbers its transactions from 1 again.
func ExactlyOnce[T any](dir string, encode func(T) ([]byte, error)) func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
	return func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
		run := fmt.Sprintf("%019d%03d", time.Now().UnixNano(), runSeq.Add(1)%1000)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("file: create %s: %w", dir, err)
		}
		return &sink[T]{dir: dir, run: run, subtask: ctx.Subtask, encode: encode, open: map[int64]*openFile{}}, nil
	}
}

type openFile struct {
	f *os.File
	w *bufio.Writer
}

type sink[T any] struct {
	dir     string
	run     string
	subtask int
	seq     int64
	encode  func(T) ([]byte, error)
	open    map[int64]*openFile
}

func (s *sink[T]) Begin() (*Txn, error) {
	s.seq++
	return &Txn{Subtask: s.subtask, Run: s.run, Seq: s.seq}, nil
}

func (s *sink[T]) Write(txn *Txn, r weir.Record[T]) error {
	of := s.open[txn.Seq]
	if of == nil {
		f, err := os.Create(filepath.Join(s.dir, inProgress+txn.name()))
		if err != nil {
			return fmt.Errorf("file: %w", err)
		}
		of = &openFile{f: f, w: bufio.NewWriterSize(f, 64<<10)}
		s.open[txn.Seq] = of
	}
	b, err := s.encode(r.Value)
	if err != nil {
		return fmt.Errorf("file: encode record: %w", err)
	}
	of.w.Write(b)
	if err := of.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("file: write %s: %w", of.f.Name(), err)
	}
	txn.Records++
	return nil
}

func (s *sink[T]) PreCommit(txn *Txn) error {
	of := s.open[txn.Seq]
	if of == nil {
		return nil
	}
	delete(s.open, txn.Seq)
	if err := of.w.Flush(); err != nil {
		of.f.Close()
		return fmt.Errorf("file: flush %s: %w", of.f.Name(), err)
	}
	if err := of.f.Sync(); err != nil {
		of.f.Close()
		return fmt.Errorf("file: sync %s: %w", of.f.Name(), err)
	}
	return of.f.Close()
}

func (s *sink[T]) Commit(txn *Txn) error {
	if txn == nil || txn.Records == 0 {
		return nil
	}
	final := filepath.Join(s.dir, txn.name())
	err := os.Rename(filepath.Join(s.dir, inProgress+txn.name()), final)
	if err == nil {
		return fsync.Dir(s.dir)
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(final); serr == nil {
			return nil // committed before (Commit is idempotent)
		}
		return fmt.Errorf("file: transaction %s has neither its in-progress nor its final file: its data is lost", txn.name())
	}
	return fmt.Errorf("file: publish %s: %w", final, err)
}

// Recover deletes the in-progress files of this subtask from earlier runs:
// whatever a restored checkpoint still needed has been committed (renamed)
// before Recover is called.
func (s *sink[T]) Recover(*Txn, bool) error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("file: %w", err)
	}
	prefix := fmt.Sprintf("%spart-%04d-", inProgress, s.subtask)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, prefix) && !strings.HasPrefix(n, prefix+s.run+"-") {
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("file: abort %s: %w", n, err)
			}
		}
	}
	return nil
}

func (s *sink[T]) Close() error {
	for _, of := range s.open {
		of.f.Close()
	}
	return nil
}

// Committed returns the content of the published files of dir, per
// subtask, each subtask's files concatenated in name order (which is run,
// then transaction order).
func Committed(dir string) (map[int][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "part-") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	out := map[int][]byte{}
	for _, n := range names {
		var sub int
		if _, err := fmt.Sscanf(n, "part-%04d-", &sub); err != nil {
			return nil, fmt.Errorf("file: unexpected file %s", n)
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out[sub] = append(out[sub], data...)
	}
	return out, nil
}
