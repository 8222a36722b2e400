package kafkastore

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
)

// entry is one live state. A restore fills key, pos and kg from the
// record's key and headers and keeps the value in raw; Get decodes it on
// first use, so a rebuild does not decode states nobody asks for.
type entry struct {
	id   string         // the record key (the run's identity)
	key  string         // the encoded key
	pos  agent.Position // the run's position
	kg   int
	st   *agent.ActionState // nil until decoded from raw
	raw  []byte
	part int32
	off  int64 // -1 until acknowledged
	// batch is the groupcommit.Batch.Seq of the batch holding the record
	// of a Put, and idx the record's place in it; 0 (no batch's) for
	// states read by a restore.
	batch int64
	idx   int
}

// state returns e's state, decoding it if needed (callers hold mu).
func (e *entry) state() (*agent.ActionState, error) {
	if e.st == nil {
		st, err := decodeState(e.raw)
		if err != nil {
			return nil, fmt.Errorf("kafkastore: the state recorded at offset %d of partition %d: %w", e.off, e.part, err)
		}
		e.st, e.raw = st, nil
	}
	return e.st, nil
}

// add puts e into memory, replacing the state of the same run (callers
// hold mu).
func (s *Store) add(e *entry) {
	s.idx.Put(bytesOf(e.key), e.id, actionindex.Position(e.pos), e)
}

// remove deletes run id of key from memory (callers hold mu). A record
// key that does not parse (keyIn "") may be a state's whose key came from
// its value: it is looked for among every key's runs.
func (s *Store) remove(key, id string) {
	if _, ok := s.idx.Remove(bytesOf(key), id); ok || key != "" {
		return
	}
	for k, r := range s.idx.All() {
		if r.ID == id {
			s.idx.Remove(bytesOf(k), id)
			return
		}
	}
}

// bytesOf returns the bytes of s without copying them: for the index's
// lookups, which neither keep nor modify them (Put copies the key).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Get implements agent.ActionStateStore.
func (s *Store) Get(id agent.RunID) (*agent.ActionState, error) {
	var buf [128]byte
	k := id.AppendEncode(buf[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	// The record key as a string over k: the index only compares it.
	if e, ok := s.idx.Get(id.Key, unsafe.String(unsafe.SliceData(k), len(k))); ok {
		return e.state()
	}
	return nil, nil
}

// keyIn returns the encoded key inside a record key (agent.RunID.Encode:
// a length-prefixed tag, then the length-prefixed key) as a substring of
// it, or "" when id is not one.
func keyIn(id string) string {
	rest := id
	var field string
	for range 2 { // the tag, then the key
		n, w := uvarintString(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return ""
		}
		field, rest = rest[w:w+int(n)], rest[w+int(n):]
	}
	return field
}

// uvarintString is binary.Uvarint of a string's bytes.
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// Latest implements agent.ActionStateStore.
func (s *Store) Latest(key []byte) (agent.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.idx.Latest(key)
	return agent.Position(p), ok
}
