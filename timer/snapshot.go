package timer

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/internal/wire"
	"github.com/weirproject/weir/keygroup"
)

// SnapshotVersion is the version of the timer key-group snapshot format that
// SnapshotKeyGroup writes and the only one RestoreKeyGroup reads:
//
//	blob  = version:uvarint  keyGroup:uvarint
//	        nEvent:uvarint timer*nEvent  nProc:uvarint timer*nProc
//	timer = timestamp:varint key:field namespace:field
//	field = length:uvarint bytes
//
// varint is zig-zag (encoding/binary.AppendVarint); key and namespace bytes
// are written by the service's codecs (see NewServiceWithCodecs). Timers
// appear in no particular order. A key group without timers is a nil blob.
// docs/state-format.md describes it in full.
const SnapshotVersion = 1

// NewServiceWithCodecs is NewService with the codecs of keys and namespaces
// used by SnapshotKeyGroup and RestoreKeyGroup; nil means the default,
// codec.Default of the type. The timer and state snapshots are separate
// blobs, but an operator should give its Service and its state.Backend the
// same key codec so that a key has the same bytes in both.
func NewServiceWithCodecs[K comparable, N comparable](r keygroup.Range, kc codec.Codec[K], nc codec.Codec[N]) *Service[K, N] {
	s := NewService[K, N](r)
	s.SetKeyCodec(kc)
	s.SetNamespaceCodec(nc)
	return s
}

// SetKeyCodec sets the codec of timer keys for snapshots; nil restores the
// default, codec.Default[K]().
func (s *Service[K, N]) SetKeyCodec(c codec.Codec[K]) {
	if c == nil {
		c = codec.Default[K]()
	}
	s.kc = c
}

// SetNamespaceCodec sets the codec of timer namespaces for snapshots; nil
// restores the default, codec.Default[N]().
func (s *Service[K, N]) SetNamespaceCodec(c codec.Codec[N]) {
	if c == nil {
		c = codec.Default[N]()
	}
	s.nc = c
}

// SnapshotKeyGroup returns the event-time and processing-time timers of key
// group kg in the format of SnapshotVersion, nil if kg has none. The service
// is not modified; the returned slice is the caller's. It returns an error if
// kg is outside the service's range or a codec fails.
func (s *Service[K, N]) SnapshotKeyGroup(kg int) ([]byte, error) {
	return s.AppendSnapshotKeyGroup(nil, kg)
}

// AppendSnapshotKeyGroup is SnapshotKeyGroup appending to dst. It appends
// nothing for a key group without timers, and on error returns dst with its
// original length.
func (s *Service[K, N]) AppendSnapshotKeyGroup(dst []byte, kg int) ([]byte, error) {
	if !s.Range().Contains(kg) {
		return dst, fmt.Errorf("timer: cannot snapshot key group %d: outside this service's key-group range %v", kg, s.Range())
	}
	ne, np := s.event.LenKeyGroup(kg), s.proc.LenKeyGroup(kg)
	if ne == 0 && np == 0 {
		return dst, nil
	}
	orig := len(dst)
	dst = binary.AppendUvarint(dst, SnapshotVersion)
	dst = binary.AppendUvarint(dst, uint64(kg))
	var err error
	for _, q := range []queue[K, N]{s.event, s.proc} {
		dst = binary.AppendUvarint(dst, uint64(q.LenKeyGroup(kg)))
		q.ForEachInKeyGroup(kg, func(t Timer[K, N]) {
			if err != nil {
				return
			}
			dst = binary.AppendVarint(dst, t.Timestamp)
			if dst, err = wire.AppendField(dst, s.kc, t.Key); err != nil {
				err = fmt.Errorf("encoding key: %w", err)
				return
			}
			if dst, err = wire.AppendField(dst, s.nc, t.Namespace); err != nil {
				err = fmt.Errorf("encoding namespace: %w", err)
			}
		})
		if err != nil {
			return dst[:orig], fmt.Errorf("timer: snapshot of key group %d: %w", kg, err)
		}
	}
	return dst, nil
}

// RestoreKeyGroup adds the timers of a blob written by SnapshotKeyGroup for
// key group kg, which must be in the service's range; a nil or empty blob
// has no timers. Restored processing-time timers go through
// RestoreProcessingTimeTimer (so the head-change callback sees an earlier
// head); overdue ones fire on the next AdvanceProcessingTime. The blob is not
// retained.
//
// The whole blob is decoded before any timer is added, so on error nothing
// changes. Malformed blobs give errors wrapping codec.ErrCorruptSnapshot,
// unknown versions codec.ErrSnapshotVersion; it never panics on bad input.
func (s *Service[K, N]) RestoreKeyGroup(kg int, blob []byte) error {
	if !s.Range().Contains(kg) {
		return fmt.Errorf("timer: cannot restore key group %d: outside this service's key-group range %v", kg, s.Range())
	}
	if len(blob) == 0 {
		return nil
	}
	wrap := func(err error) error { return fmt.Errorf("timer: restoring key group %d: %w", kg, err) }
	r := wire.NewReader(blob, codec.ErrCorruptSnapshot)
	ver, err := r.Uvarint("format version")
	if err != nil {
		return wrap(err)
	}
	if ver != SnapshotVersion {
		return wrap(fmt.Errorf("%w %d (this build reads timer snapshot version %d)", codec.ErrSnapshotVersion, ver, SnapshotVersion))
	}
	gotKG, err := r.Uvarint("key group")
	if err != nil {
		return wrap(err)
	}
	if gotKG != uint64(kg) {
		return wrap(fmt.Errorf("the blob is a snapshot of key group %d", gotKG))
	}
	var lists [2][]Timer[K, N]
	for i, what := range []string{"event-time", "processing-time"} {
		// A timer takes at least 3 bytes: timestamp, key length, namespace
		// length.
		n, err := r.Uvarint(what + " timer count")
		if err != nil {
			return wrap(err)
		}
		if n > uint64(r.Remaining()/3) {
			return wrap(r.Corrupt("%s timer count %d exceeds what the %d remaining bytes can hold", what, n, r.Remaining()))
		}
		ts := make([]Timer[K, N], 0, min(n, 4096)) // a corrupt count claims little memory
		for range n {
			t := Timer[K, N]{KeyGroup: kg}
			if t.Timestamp, err = r.Varint("timestamp"); err != nil {
				return wrap(err)
			}
			if t.Key, err = wire.DecodeField(r, s.kc, "key"); err != nil {
				return wrap(fmt.Errorf("%s timer: %w", what, err))
			}
			if t.Namespace, err = wire.DecodeField(r, s.nc, "namespace"); err != nil {
				return wrap(fmt.Errorf("%s timer: %w", what, err))
			}
			ts = append(ts, t)
		}
		lists[i] = ts
	}
	if !r.Done() {
		return wrap(r.Corrupt("%d bytes after the last timer", r.Remaining()))
	}
	if mutant.On(mutant.TimerRestoreDropsLast) && len(lists[0]) > 1 {
		lists[0] = lists[0][:len(lists[0])-1]
	}
	for _, t := range lists[0] {
		s.RestoreEventTimeTimer(t)
	}
	for _, t := range lists[1] {
		s.RestoreProcessingTimeTimer(t)
	}
	return nil
}
