package format

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MagicByte is the first byte of every record in the Confluent wire format.
const MagicByte = 0

// HeaderSize is the size of the header before the payload (Avro, JSON
// Schema) or before the message-index list (Protobuf): the magic byte and
// the 4-byte big-endian schema id.
const HeaderSize = 5

// MaxIndexDepth bounds the message-index list of a Protobuf record (W3): a
// message nested deeper than this in its .proto file is refused.
const MaxIndexDepth = 64

// Sentinel errors of the wire format, wrapped in a *DecodeError.
var (
	// ErrShort: fewer than HeaderSize bytes.
	ErrShort = errors.New("shorter than the 5-byte header (magic byte and schema id)")
	// ErrMagic: the first byte is not MagicByte (the record was not
	// written by a schema-registry serializer, or not in this format).
	ErrMagic = errors.New("first byte is not the magic byte 0 (not the Confluent wire format)")
	// ErrIndex: the Protobuf message-index list is cut short or too long.
	ErrIndex = errors.New("corrupt Protobuf message-index list")
	// ErrUnknownSchema: the registry has no schema of that id (HTTP 404).
	ErrUnknownSchema = errors.New("schema id unknown to the registry")
	// ErrPayload: the payload does not decode with the writer's schema.
	ErrPayload = errors.New("payload does not decode with the writer's schema")
	// ErrValidation: the value does not validate against the JSON schema.
	ErrValidation = errors.New("value does not validate against its JSON schema")
)

// DecodeError is why a record does not decode: one of the sentinels above
// (Unwrap), the schema id it named (-1 when the header was unreadable) and
// detail. Its text, the reason a dead letter carries, names the schema id
// (W4).
type DecodeError struct {
	ID     int
	Err    error
	Detail string
}

func (e *DecodeError) Error() string {
	s := "format: "
	if e.ID >= 0 {
		s += fmt.Sprintf("schema id %d: ", e.ID)
	}
	s += e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Errorf makes a *DecodeError for schema id (-1 for none).
func Errorf(id int, sentinel error, format string, args ...any) error {
	return &DecodeError{ID: id, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// AppendHeader appends the magic byte and the schema id to b.
func AppendHeader(b []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(b, MagicByte), uint32(id))
}

// ParseHeader reads the header of b: the schema id and what follows it
// (a sub-slice of b; nothing is copied). It never panics (W1).
func ParseHeader(b []byte) (id int, rest []byte, err error) {
	if len(b) > 0 && b[0] != MagicByte {
		return -1, nil, &DecodeError{ID: -1, Err: ErrMagic, Detail: fmt.Sprintf("got 0x%02x", b[0])}
	}
	if len(b) < HeaderSize {
		return -1, nil, &DecodeError{ID: -1, Err: ErrShort, Detail: fmt.Sprintf("%d bytes", len(b))}
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// AppendIndex appends the Protobuf message-index list: the path of the
// message among the file's messages and their nested messages. The first
// message ([0]) is written as the single byte 0 (W2); otherwise the count
// and each index as zig-zag varints.
func AppendIndex(b []byte, index []int) []byte {
	if len(index) == 0 || (len(index) == 1 && index[0] == 0) {
		return append(b, 0)
	}
	b = binary.AppendVarint(b, int64(len(index)))
	for _, i := range index {
		b = binary.AppendVarint(b, int64(i))
	}
	return b
}

// ParseIndex reads the message-index list at the start of b (after the
// header): the index ([0] for the single byte 0) and the payload after it.
// id is for the error. It never panics (W1).
func ParseIndex(id int, b []byte) (index []int, rest []byte, err error) {
	n, m := binary.Varint(b)
	if m <= 0 {
		return nil, nil, &DecodeError{ID: id, Err: ErrIndex, Detail: "no count"}
	}
	b = b[m:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > MaxIndexDepth {
		return nil, nil, &DecodeError{ID: id, Err: ErrIndex, Detail: fmt.Sprintf("count %d; want 0 to %d", n, MaxIndexDepth)}
	}
	index = make([]int, n)
	for i := range index {
		v, m := binary.Varint(b)
		if m <= 0 || v < 0 || v > 1<<20 {
			return nil, nil, &DecodeError{ID: id, Err: ErrIndex, Detail: fmt.Sprintf("entry %d unreadable", i)}
		}
		index[i] = int(v)
		b = b[m:]
	}
	return index, b, nil
}
