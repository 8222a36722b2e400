package cluster

import (
	"encoding/binary"
	"fmt"

	json "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Codec turns the records that cross the exchange topic into bytes and
// back. Encode is called on a source task's goroutine, Decode on a keyed
// task's; the bytes Encode returns become the Kafka client's, and Decode may
// keep the slice it is given.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// JSON is the default Codec: encoding/json's rules (through
// github.com/goccy/go-json, as kafka.JSON), so exported fields cross.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }
func (jsonCodec[T]) Decode(b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// The kinds of the records in the exchange topic. A data record carries a
// value; the others are control records (W2 in the package documentation).
const (
	kindData byte = iota
	kindWatermark
	kindIdle
	kindActive
	kindEnd
	// kindCaughtUp: the producer's partition has caught up with its
	// history (kafka K5) in the producer's current run (W6).
	kindCaughtUp
	// kindBehind: a run of the producer has started and has not caught
	// up; it is active. The first control record of every run (W6).
	kindBehind
	kindLast = kindBehind
	// kindBatch is a data record that holds a batch of values (see
	// batchHeader); internal to this package's decoding, never on the
	// wire as a kind.
	kindBatch byte = 0xff
)

// controlHeader marks a control record; data records have no header.
const controlHeader = "weir-control"

var controlHeaders = []kgo.RecordHeader{{Key: controlHeader}}

// batchHeader marks a data record that carries a batch of values, all of
// one producer for one exchange partition, in the order the producer sent
// them. Its value is its version (batchVersion or batchVersionBinary),
// then per value: its timestamp as a zigzag varint, the difference from
// the previous value's (from 0 for the first), the length of its encoding
// as an unsigned varint, and the encoding: Codec.Encode's in version 1,
// the binary codec's (binCodec) in version 2. The record's own timestamp is the first
// value's. A source task writes batches of up to batchBytes, so that the
// exchange's cost in the Kafka clients and the broker (a record's header,
// key, framing, produce and fetch bookkeeping) is paid once per batch
// rather than once per value; a data record without the header holds one
// value (written before batches), and keyed tasks read both.
const batchHeader = "weir-batch"

var batchHeaders = []kgo.RecordHeader{{Key: batchHeader}}

// batchVersion is the first byte of a batch record's value whose values
// are Job.Codec's encodings (JSON if it is nil and the binary codec cannot
// encode the type): written by every build since batches, and read by
// every one.
const batchVersion byte = 1

// batchVersionBinary is the first byte of a batch record's value whose
// values are the binary codec's encodings: written when Job.Codec is nil
// and the type compiles (newBinCodec); a build before it fails the keyed
// task on it, naming the version.
const batchVersionBinary byte = 2

// batchBytes is the size at which a source task sends a batch before a
// control record or a checkpoint barrier asks for it: large enough to
// amortise a Kafka record's cost over hundreds of small values, well
// below Kafka's default record size limit (1 MiB).
const batchBytes = 32 << 10

// appendBatchValue appends one value, encoded as enc, at timestamp ts to
// a batch, the previous value's timestamp being prev.
func appendBatchValue(b []byte, ts, prev int64, enc []byte) []byte {
	b = binary.AppendVarint(b, ts-prev)
	b = binary.AppendUvarint(b, uint64(len(enc)))
	return append(b, enc...)
}

// nextBatchValue reads the value at the front of b (a batch's value
// after its version byte), prev being the previous value's timestamp: it
// returns the value's timestamp and encoding, and the rest of b.
func nextBatchValue(b []byte, prev int64) (ts int64, enc, rest []byte, err error) {
	d, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, nil, fmt.Errorf("cluster: malformed batch record (timestamp)")
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return 0, nil, nil, fmt.Errorf("cluster: malformed batch record (length)")
	}
	b = b[n:]
	return prev + d, b[:l:l], b[l:], nil
}

// producerKey is the record key of everything producer p writes: its
// source partition, 4 bytes big-endian.
func producerKey(p int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(p)) }

// outRec is what a source task's exchange operator hands to its
// transactional sink: a data value or a control record, and the exchange
// partition it goes to.
type outRec[T any] struct {
	part int32
	kind byte
	wm   int64
	pos  int64 // kindIdle: the source partition's position, or -1
	v    T
	// batch, for a data record, is a batch record's value (batchHeader):
	// then wm is its first value's timestamp, and v is unused.
	batch []byte
}

// inRec is a record of the exchange topic as a keyed task's source decodes
// it.
type inRec[T any] struct {
	producer int32
	kind     byte
	wm       int64
	pos      int64 // kindIdle: the position it was sent at, or -1 (W7)
	v        T
	// batch (kindBatch): the values of a batch record, after its version
	// byte (ver), decoded as they are emitted.
	batch []byte
	ver   byte
}

// encodeControl is the value of a control record: its kind, then the
// watermark (8 bytes big-endian).
func encodeControl(kind byte, wm int64) []byte {
	b := make([]byte, 9)
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(wm))
	return b
}

// encodeIdle is the value of an idle record that names the producer's
// position in its source partition (W7): encodeControl's 9 bytes, then
// the position (8 bytes big-endian). An idle record of 9 bytes (written
// before W7, or with the position unknown) names none.
func encodeIdle(wm, pos int64) []byte {
	if pos < 0 {
		return encodeControl(kindIdle, wm)
	}
	return binary.BigEndian.AppendUint64(encodeControl(kindIdle, wm), uint64(pos))
}

// decode reads a record of the exchange topic.
func decode[T any](codec Codec[T], r *kgo.Record) (inRec[T], error) {
	if len(r.Key) != 4 {
		return inRec[T]{}, fmt.Errorf("cluster: exchange record without a producer key (key %x); was the topic written by something else?", r.Key)
	}
	in := inRec[T]{producer: int32(binary.BigEndian.Uint32(r.Key))}
	for _, h := range r.Headers {
		if h.Key == controlHeader {
			ok := len(r.Value) == 9 || len(r.Value) == 17 && r.Value[0] == kindIdle
			if !ok || r.Value[0] == kindData || r.Value[0] > kindLast {
				return inRec[T]{}, fmt.Errorf("cluster: malformed control record %x", r.Value)
			}
			in.kind = r.Value[0]
			in.wm = int64(binary.BigEndian.Uint64(r.Value[1:9]))
			in.pos = -1
			if len(r.Value) == 17 {
				if in.pos = int64(binary.BigEndian.Uint64(r.Value[9:])); in.pos < 0 {
					return inRec[T]{}, fmt.Errorf("cluster: malformed control record %x (negative position)", r.Value)
				}
			}
			return in, nil
		}
		if h.Key == batchHeader {
			if len(r.Value) == 0 || r.Value[0] != batchVersion && r.Value[0] != batchVersionBinary {
				return inRec[T]{}, fmt.Errorf("cluster: batch record of an unknown version (%x...); was it written by a newer weir?", r.Value[:min(len(r.Value), 1)])
			}
			in.kind, in.batch, in.ver = kindBatch, r.Value[1:], r.Value[0]
			return in, nil
		}
	}
	v, err := codec.Decode(r.Value)
	if err != nil {
		return inRec[T]{}, fmt.Errorf("cluster: decode exchange record: %w", err)
	}
	in.v = v
	return in, nil
}

// ExchangeValues is the number of data values a record of a job's
// exchange topic holds, given its headers and value: 0 for a control
// record, the number of values for a batch (0 if it is malformed), 1 for
// any other record. For tools that measure a running job's progress from
// its exchange topic (the scale-out experiment), which counts values, not
// Kafka records, since the values travel in batches.
func ExchangeValues(headers []kgo.RecordHeader, value []byte) int {
	for _, h := range headers {
		switch h.Key {
		case controlHeader:
			return 0
		case batchHeader:
			if len(value) == 0 || value[0] != batchVersion && value[0] != batchVersionBinary {
				return 0
			}
			n, b, prev := 0, value[1:], int64(0)
			for len(b) > 0 {
				ts, _, rest, err := nextBatchValue(b, prev)
				if err != nil {
					return 0
				}
				n, b, prev = n+1, rest, ts
			}
			return n
		}
	}
	return 1
}
