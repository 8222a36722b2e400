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
	v    T
}

// inRec is a record of the exchange topic as a keyed task's source decodes
// it.
type inRec[T any] struct {
	producer int32
	kind     byte
	wm       int64
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

// decode reads a record of the exchange topic.
func decode[T any](codec Codec[T], r *kgo.Record) (inRec[T], error) {
	if len(r.Key) != 4 {
		return inRec[T]{}, fmt.Errorf("cluster: exchange record without a producer key (key %x); was the topic written by something else?", r.Key)
	}
	in := inRec[T]{producer: int32(binary.BigEndian.Uint32(r.Key))}
	for _, h := range r.Headers {
		if h.Key == controlHeader {
			if len(r.Value) != 9 || r.Value[0] == kindData || r.Value[0] > kindLast {
				return inRec[T]{}, fmt.Errorf("cluster: malformed control record %x", r.Value)
			}
			in.kind = r.Value[0]
			in.wm = int64(binary.BigEndian.Uint64(r.Value[1:]))
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
