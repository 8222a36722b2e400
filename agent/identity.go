package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// RunID identifies one run of an action: the key, the sequence number of
// the key's input, the triggering event (its position in the input's
// execution tree, its type, and a digest of its content) and the action.
// Two runs have the same RunID exactly when they are the same action on the
// same event of the same input of the same key, in this process or any
// other, before or after a restore: nothing in it comes from pointers,
// process-local hash codes or map order.
type RunID struct {
	// Key is the key encoded with the key codec (the state's default codec
	// for K: raw bytes for strings, varints for integers, JSON otherwise).
	Key []byte
	// Seq is the sequence number of the input (0 for a key's first).
	Seq int64
	// EventID is the event's position in the input's tree (Event.ID).
	EventID int64
	// EventType is the event's type.
	EventType string
	// EventDigest is the SHA-256 of the event's type and canonical JSON
	// value and attributes (objects with sorted keys, numbers as written).
	EventDigest [32]byte
	// Action is the action's name.
	Action string
}

const runIDMagic = "weir.agent.run/1"

// Encode returns the unambiguous encoding of r: a version tag, then every
// field, variable-length ones prefixed with their length (uvarint),
// integers as 8 bytes big-endian.
func (r RunID) Encode() []byte {
	return r.appendEncode(make([]byte, 0, 2*binary.MaxVarintLen64+len(runIDMagic)+len(r.Key)+16+len(r.EventType)+32+len(r.Action)+8))
}

// appendEncode appends Encode() to b.
// AppendEncode appends Encode's bytes to b.
func (r RunID) AppendEncode(b []byte) []byte { return r.appendEncode(b) }

func (r RunID) appendEncode(b []byte) []byte {
	b = appendLP(b, []byte(runIDMagic))
	b = appendLP(b, r.Key)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(r.EventID))
	b = appendLP(b, []byte(r.EventType))
	b = append(b, r.EventDigest[:]...)
	b = appendLP(b, []byte(r.Action))
	return b
}

// Hash returns the SHA-256 of Encode().
func (r RunID) Hash() [32]byte { return sha256.Sum256(r.Encode()) }

// String returns the first 16 bytes of Hash in hex: a compact, stable name
// for logs, idempotency keys and store records.
func (r RunID) String() string {
	h := r.Hash()
	return hex.EncodeToString(h[:16])
}

// Equal reports whether r and o are the same run.
func (r RunID) Equal(o RunID) bool {
	return bytes.Equal(r.Key, o.Key) && r.Seq == o.Seq && r.EventID == o.EventID &&
		r.EventType == o.EventType && r.EventDigest == o.EventDigest && r.Action == o.Action
}

func appendLP(b, field []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(field)))
	return append(b, field...)
}

// EventDigest returns the SHA-256 of the event's type, value and attributes
// in canonical JSON: they are encoded, decoded into generic JSON values
// (keeping numbers as written) and encoded again, so that a struct value
// and the map it decodes into after a restore digest the same.
// Lineage (ID, Parent, Action) is not part of the digest.
func EventDigest(ev Event) ([32]byte, error) {
	var prefix [64]byte
	d, err := canonicalSum(appendLP(prefix[:0], []byte(ev.Type)), struct {
		Value any            `json:"value"`
		Attrs map[string]any `json:"attrs"`
	}{ev.Value, ev.Attrs})
	if err != nil {
		return [32]byte{}, fmt.Errorf("agent: event %q: value or attributes are not JSON-serialisable: %w", ev.Type, err)
	}
	return d, nil
}
