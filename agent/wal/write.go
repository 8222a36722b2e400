package wal

import (
	"fmt"

	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/internal/mutant"
)

// write queues a record whose payload payload appends (applying it to
// memory with apply, under the lock) and waits until it is durable.
func (s *Store) write(typ byte, payload func(e *encoder, dst []byte) ([]byte, error), apply func(size int64)) error {
	b, err := s.queue(typ, payload, apply)
	if err != nil {
		return err
	}
	return b.Wait()
}

// queue queues a record as write does and returns its batch without
// waiting. The record is encoded before taking the lock, so that
// concurrent writers encode in parallel; under the lock it is only copied
// into the batch. Batches are written one after the other, so a record is
// durable only once every record queued before it is.
func (s *Store) queue(typ byte, payload func(e *encoder, dst []byte) ([]byte, error), apply func(size int64)) (*groupcommit.Batch[batch], error) {
	e := getEncoder()
	defer putEncoder(e)
	if err := e.record(typ, func(b []byte) ([]byte, error) { return payload(e, b) }); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s.mu.Lock()
	if err := s.w.ErrLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	b := s.w.QueueLocked()
	if b.Data.buf == nil && len(s.spares) > 0 {
		b.Data.buf = s.spares[len(s.spares)-1]
		s.spares = s.spares[:len(s.spares)-1]
	}
	b.Data.buf = append(b.Data.buf, e.buf...)
	s.writes++
	apply(int64(len(e.buf)))
	s.mu.Unlock()
	s.w.Wake()
	return b, nil
}

// jsonPayload is a payload encoded by encoding/json.
func jsonPayload(v any) func(e *encoder, dst []byte) ([]byte, error) {
	return func(e *encoder, dst []byte) ([]byte, error) { return e.appendJSON(dst, v) }
}

// flusher writes the store's batches for its group-commit writer (a type
// of its own, so that Flush is not in Store's API).
type flusher Store

// Flush writes and fsyncs one batch (W1, W2): called by the
// writer's goroutine, one batch at a time, without mu; records queued
// meanwhile form the next batch.
func (f *flusher) Flush(b *batch) error {
	s := (*Store)(f)
	if s.beforeSync != nil {
		s.beforeSync()
	}
	_, err := s.f.Write(b.buf)
	if err == nil && !s.opts.NoSync && !mutant.On(mutant.WALAckWithoutSync) {
		err = s.f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("wal: writing %s: %w (the action-state store cannot record; check the disk)", s.path, err)
	}
	return err
}

// FlushedLocked accounts for a batch written (or failed: W6) and
// compacts the log once it has grown past its bound (W5).
func (f *flusher) FlushedLocked(b *batch, err error) error {
	s := (*Store)(f)
	s.size += int64(len(b.buf))
	s.syncs++
	s.keepSpare(b.buf[:0])
	if err == nil && s.size > s.opts.MaxLogBytes && s.size > 2*s.live {
		err = s.rewrite()
	}
	return err
}

// keepSpare keeps buf for a later batch: the two largest buffers are
// kept, up to 4 MiB each (callers hold mu).
func (s *Store) keepSpare(buf []byte) {
	switch {
	case cap(buf) > 4<<20:
	case len(s.spares) < 2:
		s.spares = append(s.spares, buf)
	default:
		small := 0
		if cap(s.spares[1]) < cap(s.spares[0]) {
			small = 1
		}
		if cap(buf) > cap(s.spares[small]) {
			s.spares[small] = buf
		}
	}
}
