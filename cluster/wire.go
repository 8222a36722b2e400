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
)

// controlHeader marks a control record; data records have no header.
const controlHeader = "weir-control"

var controlHeaders = []kgo.RecordHeader{{Key: controlHeader}}

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
}

// inRec is a record of the exchange topic as a keyed task's source decodes
// it.
type inRec[T any] struct {
	producer int32
	kind     byte
	wm       int64
	pos      int64 // kindIdle: the position it was sent at, or -1 (W7)
	v        T
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
	}
	v, err := codec.Decode(r.Value)
	if err != nil {
		return inRec[T]{}, fmt.Errorf("cluster: decode exchange record: %w", err)
	}
	in.v = v
	return in, nil
}
