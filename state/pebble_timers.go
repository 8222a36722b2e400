package state

// The timers of a Pebble backend's operator (timer.NewServiceInStore), in
// the same database as the keyed state, as Flink's RocksDB backend keeps
// them.
//
// Invariants:
//
//	PT1. Layout. A timer entry of key group kg is the Pebble key
//
//     kg:uint16 BE | timerMarker | k
//
//     where k and the value are the timer package's (timer/store.go).
//     timerMarker is nine 0xff bytes and a 0x02: no uvarint decodes from it
//     (the tenth byte of a 64-bit uvarint is at most 1), so no state's
//     field(name) starts with it, and it sorts after every state entry of
//     the key group. So the timers are part of the key group's contiguous
//     key range and travel with it: a native checkpoint carries them, a
//     native restore copies and drops them with their key groups
//     (pebble_native.go), and ClearKeyGroup drops them too.
//	PT2. A canonical snapshot of the state (sectionsOf) stops at the marker:
//	    the timers' canonical form is the timer package's snapshot format,
//	    written by the timer service.
//	PT3. Timer entries are read and written on the database directly, not
//	    through the state's get/set/del/scan, so no state cache holds them
//	    and every write is in the database when a native checkpoint copies
//	    it.

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// timerMarker follows the key group in the key of a timer entry
// (PT1).
const timerMarker = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"

// isTimerKey reports whether rest, a Pebble key after its key group, is a
// timer entry's.
func isTimerKey(rest []byte) bool {
	return len(rest) >= len(timerMarker) && string(rest[:len(timerMarker)]) == timerMarker
}

// TimerStore is the Pebble storage of a timer service's timers: it
// implements timer.Store over the backend's database (PT1 above).
// Get the one of a backend with Backend.TimerStore.
type TimerStore struct {
	db   func() *pebble.DB
	kbuf []byte
	hbuf []byte
	vbuf []byte
}

// TimerStore returns the timer storage of a Pebble backend, for
// timer.NewServiceInStore, or nil for the memory backend. It stays valid
// across RestoreNative (which replaces the database and its timers: call
// the service's Reload then) and must not be used after Close.
func (b *Backend[K]) TimerStore() *TimerStore {
	p := b.pebble()
	if p == nil {
		return nil
	}
	return &TimerStore{db: func() *pebble.DB { return p.db }}
}

// timerKey returns kg | timerMarker | k in buf.
func timerKey(buf []byte, kg int, k []byte) []byte {
	buf = append(buf[:0], byte(kg>>8), byte(kg))
	return append(append(buf, timerMarker...), k...)
}

// Get implements timer.Store.
func (s *TimerStore) Get(kg int, k []byte) ([]byte, bool) {
	s.kbuf = timerKey(s.kbuf, kg, k)
	v, c, err := s.db().Get(s.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		pebblePanic("reading a timer", err)
	}
	s.vbuf = append(s.vbuf[:0], v...)
	c.Close()
	return s.vbuf, true
}

// Set implements timer.Store.
func (s *TimerStore) Set(kg int, k, v []byte) {
	s.kbuf = timerKey(s.kbuf, kg, k)
	if err := s.db().Set(s.kbuf, v, noSync); err != nil {
		pebblePanic("writing a timer", err)
	}
}

// Delete implements timer.Store.
func (s *TimerStore) Delete(kg int, k []byte) {
	s.kbuf = timerKey(s.kbuf, kg, k)
	if err := s.db().Delete(s.kbuf, noSync); err != nil {
		pebblePanic("deleting a timer", err)
	}
}

// Scan implements timer.Store.
func (s *TimerStore) Scan(kg int, lo, hi []byte, f func(k, v []byte) bool) {
	if err := s.scan(s.db(), kg, lo, hi, f); err != nil {
		pebblePanic("iterating timers", err)
	}
}

func (s *TimerStore) scan(db pebbleView, kg int, lo, hi []byte, f func(k, v []byte) bool) error {
	lower := timerKey(nil, kg, lo)
	var upper []byte
	if hi != nil {
		upper = timerKey(nil, kg, hi)
	} else {
		upper = prefixEnd(timerKey(nil, kg, nil))
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	skip := len(lower) - len(lo)
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if !f(it.Key()[skip:], v) {
			break
		}
	}
	return it.Close()
}

// ForEachNativeTimers calls f with a read-only timer.Store over each key
// group in [start, end] of the native snapshot materialized in dir, whose
// timers a timer service in memory restores with
// timer.Service.RestoreKeyGroupFromStore: how timers restore from a Pebble
// checkpoint into the memory backend. The store is valid during the call
// only; its Set and Delete panic.
func ForEachNativeTimers(dir string, start, end int, f func(kg int, st *ReadOnlyTimerStore) error) error {
	db, err := openNativeReadOnly(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	st := &ReadOnlyTimerStore{view: db}
	for kg := start; kg <= end; kg++ {
		any := false
		if err := st.s.scan(db, kg, nil, nil, func(k, v []byte) bool { any = true; return false }); err != nil {
			return fmt.Errorf("state: reading the timers of key group %d of %s: %w", kg, dir, err)
		}
		if !any {
			continue
		}
		if err := f(kg, st); err != nil {
			return err
		}
	}
	return nil
}

// ReadOnlyTimerStore is a timer.Store over a native snapshot
// (ForEachNativeTimers) or a frozen view of the backend (Frozen.TimerStore).
type ReadOnlyTimerStore struct {
	view readView
	s    TimerStore // scratch and scans
}

// readView is what a ReadOnlyTimerStore reads: a database or a snapshot.
type readView interface {
	pebbleView
	Get(k []byte) ([]byte, io.Closer, error)
}

// TimerStore returns a read-only timer.Store over the frozen view of a
// Pebble backend (nil for the memory backend), valid until Close: a
// snapshot's asynchronous part writes the canonical blobs of the timers
// from it (timer.AppendStoreSnapshot) while the subtask runs on.
func (f *Frozen[K]) TimerStore() *ReadOnlyTimerStore {
	v, ok := f.view.(*frozenPebble[K])
	if !ok {
		return nil
	}
	return &ReadOnlyTimerStore{view: v}
}

// Get implements timer.Store.
func (r *ReadOnlyTimerStore) Get(kg int, k []byte) ([]byte, bool) {
	r.s.kbuf = timerKey(r.s.kbuf, kg, k)
	v, c, err := r.view.Get(r.s.kbuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		pebblePanic("reading a timer", err)
	}
	r.s.vbuf = append(r.s.vbuf[:0], v...)
	c.Close()
	return r.s.vbuf, true
}

// Set panics: the store is read-only.
func (r *ReadOnlyTimerStore) Set(kg int, k, v []byte) {
	panic("state: the timers of a native snapshot are read-only")
}

// Delete panics: the store is read-only.
func (r *ReadOnlyTimerStore) Delete(kg int, k []byte) {
	panic("state: the timers of a native snapshot are read-only")
}

// Scan implements timer.Store.
func (r *ReadOnlyTimerStore) Scan(kg int, lo, hi []byte, f func(k, v []byte) bool) {
	if err := r.s.scan(r.view, kg, lo, hi, f); err != nil {
		pebblePanic("iterating timers", err)
	}
}
