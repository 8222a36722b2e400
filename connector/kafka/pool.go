package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record slabs are pooled. franz-go parses each record batch of a fetch
// response into a slab ([]kgo.Record, about 300 bytes per record); without
// a pool every record costs a fresh slab entry, which is most of what a
// source allocates and so most of the garbage collector's work during a
// replay. With it, the reader recycles each record once emit is done with
// it (kgo.Record.Recycle), and franz-go puts the slab back here once every
// kept record of its batch is recycled.
//
// Invariants:
//   - Only the Record structs are reused: a record's Key, Value and header
//     values point into the fetch response's (decompressed) bytes, which
//     are never pooled, so a deserializer or a dead letter may keep them
//     (as the Deserializer contract promises).
//   - A record is recycled exactly once, after its last use by the reader;
//     records the reader drops unread (a stop mid-batch, a reset) are not
//     recycled, and their slab is left to the garbage collector.

// recordSlabs implements kgo.PoolRecords.
type recordSlabs struct{ p sync.Pool }

// slabs is shared by all readers: a slab goes back to the pool from
// whichever reader recycles its last record.
var slabs recordSlabs

// GetRecords returns a pooled slab, or nil (franz-go then allocates one of
// n records; a slab shorter than n is grown the same way).
func (s *recordSlabs) GetRecords(n int) []kgo.Record {
	if v, ok := s.p.Get().(*[]kgo.Record); ok {
		return *v
	}
	return nil
}

// PutRecords takes back a slab that franz-go has zeroed.
func (s *recordSlabs) PutRecords(recs []kgo.Record) {
	s.p.Put(&recs)
}

// recordPools is the Pools option of every fetch.
var recordPools = []kgo.Pool{&slabs}
