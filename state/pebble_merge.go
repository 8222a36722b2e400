package state

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// List appends on the Pebble backend are merge operands, not
// read-modify-writes: ListState.Add and NamespacedListState.Add write
// the new items as a list value of their own ("n item*n", the format of
// every list value) with pebble.DB.Merge, and Pebble combines the operands
// of a key when it reads or compacts it. An append therefore costs the size
// of what is appended, not of the whole list (the read-modify-write made
// building a list of n items cost O(n²)).
//
// Invariants:
//   - Only list states write merge operands; every other kind uses Set, and
//     a Set or Delete (or DeleteRange) of a key hides its older operands.
//   - Every operand and every merged value is a well-formed list value, so
//     merging is associative: the count of the result is the sum of the
//     counts, its items those of the operands, oldest first.
//   - The merger's name is stored in the database: a database written by a
//     weir before list merges (merger "pebble.concatenate") does not open
//     with it; restore such state from a savepoint.

// listMergerName names listMerger in Pebble's OPTIONS file.
const listMergerName = "weir.list.v1"

// listMerger is the database's merge operator: list concatenation.
var listMerger = &pebble.Merger{
	Name: listMergerName,
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &listMerge{}
		return m, m.MergeNewer(value)
	},
}

// listMerge collects the operands of one key, oldest first in ops.
type listMerge struct {
	ops   [][]byte // item bytes (without the count) of each operand
	n     uint64   // items over all operands
	older bool     // operands arrive newest first (MergeOlder)
}

// add takes an operand (a copy: Pebble keeps ownership of value).
func (m *listMerge) add(value []byte) error {
	n, k := binary.Uvarint(value)
	if k <= 0 {
		return fmt.Errorf("%w: list merge operand without a count", ErrCorruptSnapshot)
	}
	m.n += n
	m.ops = append(m.ops, append([]byte(nil), value[k:]...))
	return nil
}

// MergeNewer implements pebble.ValueMerger.
func (m *listMerge) MergeNewer(value []byte) error { return m.add(value) }

// MergeOlder implements pebble.ValueMerger.
func (m *listMerge) MergeOlder(value []byte) error {
	m.older = true
	return m.add(value)
}

// Finish implements pebble.ValueMerger: the count, then the items of the
// operands from the oldest to the newest.
func (m *listMerge) Finish(bool) ([]byte, io.Closer, error) {
	size := binary.MaxVarintLen64
	for _, op := range m.ops {
		size += len(op)
	}
	out := binary.AppendUvarint(make([]byte, 0, size), m.n)
	if m.older {
		// The first operand was the newest; later ones are older.
		for i := len(m.ops) - 1; i >= 0; i-- {
			out = append(out, m.ops[i]...)
		}
	} else {
		for _, op := range m.ops {
			out = append(out, op...)
		}
	}
	return out, nil, nil
}
