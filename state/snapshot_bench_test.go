package state

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/weirproject/weir/keygroup"
)

// snapEntries is the number of (string key, int64 value) entries the
// snapshot benchmarks write: small entries, about 15 bytes each encoded.
const snapEntries = 1_000_000

var snapData = sync.OnceValues(func() (*Backend[string], map[string]int64) {
	b := full()
	st := MustValue[string, int64](b, "count")
	m := make(map[string]int64, snapEntries)
	for i := range snapEntries {
		k := fmt.Sprintf("user-%d", i)
		b.SetCurrentKey(k, kgOf(k))
		st.Update(int64(i))
		m[k] = int64(i)
	}
	return b, m
})

// BenchmarkSnapshotKeyGroup snapshots all 128 key groups of a backend holding
// 1M small value-state entries; MB/s counts the bytes written. "new" is
// SnapshotKeyGroup (a fresh slice per key group, as the runtime calls it),
// "append" is AppendSnapshotKeyGroup into a reused buffer, the same work as
// BenchmarkSnapshotBaseline.
func BenchmarkSnapshotKeyGroup(b *testing.B) {
	be, _ := snapData()
	size := 0
	for kg := range maxP {
		blob, _ := be.SnapshotKeyGroup(kg)
		size += len(blob)
	}
	b.Run("new", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for kg := range maxP {
				if _, err := be.SnapshotKeyGroup(kg); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			for kg := range maxP {
				var err error
				if buf, err = be.AppendSnapshotKeyGroup(buf[:0], kg); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkSnapshotBaseline is the floor for BenchmarkSnapshotKeyGroup: the
// same entries encoded by a plain loop, key as a uvarint-length-prefixed
// string and value as a length-prefixed zig-zag varint (the bytes of a value
// entry), into a reused buffer, with no codec interfaces, framing or error
// handling. "same-maps" walks the state's own per-key-group maps,
// "one-map" one plain map[string]int64 holding all entries.
func BenchmarkSnapshotBaseline(b *testing.B) {
	be, m := snapData()
	groups := MustValue[string, int64](be, "count").groups
	encode := func(buf []byte, m map[string]int64) []byte {
		for k, v := range m {
			buf = binary.AppendUvarint(buf, uint64(len(k)))
			buf = append(buf, k...)
			n := len(buf)
			buf = binary.AppendVarint(append(buf, 0), v)
			buf[n] = byte(len(buf) - n - 1)
		}
		return buf
	}
	encodeGroup := func(buf []byte, g map[string]*int64) []byte {
		for k, p := range g {
			buf = binary.AppendUvarint(buf, uint64(len(k)))
			buf = append(buf, k...)
			n := len(buf)
			buf = binary.AppendVarint(append(buf, 0), *p)
			buf[n] = byte(len(buf) - n - 1)
		}
		return buf
	}
	b.Run("same-maps", func(b *testing.B) {
		b.SetBytes(int64(len(encode(nil, m))))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			for _, g := range groups {
				buf = encodeGroup(buf[:0], g)
			}
		}
	})
	b.Run("one-map", func(b *testing.B) {
		b.SetBytes(int64(len(encode(nil, m))))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = encode(buf[:0], m)
		}
	})
}

// BenchmarkRestoreKeyGroup restores the blobs of BenchmarkSnapshotKeyGroup
// into a fresh backend with the state registered; MB/s counts bytes read.
func BenchmarkRestoreKeyGroup(b *testing.B) {
	be, _ := snapData()
	blobs := make([][]byte, maxP)
	size := 0
	for kg := range maxP {
		blobs[kg], _ = be.SnapshotKeyGroup(kg)
		size += len(blobs[kg])
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		c := full()
		MustValue[string, int64](c, "count")
		for kg, blob := range blobs {
			if err := c.RestoreKeyGroup(kg, blob); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSnapshotNamespaced snapshots and restores all 128 key groups of
// a namespaced value state of 100k int64 keys with two windows each (the
// window operator's state between two firings).
func BenchmarkSnapshotNamespaced(b *testing.B) {
	var winCodec benchWinCodec
	be := NewBackend[int64](full().Range())
	st := MustNamespacedValueWithCodecs[int64, benchWin, int64](be, "acc", winCodec, nil)
	for k := range int64(100_000) {
		be.SetCurrentKey(k, keygroup.Assign(keygroup.HashInt64(k), maxP))
		st.Update(benchWin{0, 1000}, k)
		st.Update(benchWin{1000, 2000}, k)
	}
	blobs := make([][]byte, maxP)
	size := 0
	for kg := range maxP {
		blobs[kg], _ = be.SnapshotKeyGroup(kg)
		size += len(blobs[kg])
	}
	b.Run("snapshot", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			for kg := range maxP {
				var err error
				if buf, err = be.AppendSnapshotKeyGroup(buf[:0], kg); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			c := NewBackend[int64](full().Range())
			MustNamespacedValueWithCodecs[int64, benchWin, int64](c, "acc", winCodec, nil)
			for kg, blob := range blobs {
				if err := c.RestoreKeyGroup(kg, blob); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// benchWinCodec encodes a benchWin as two varints.
type benchWinCodec struct{}

func (benchWinCodec) Append(dst []byte, w benchWin) ([]byte, error) {
	return binary.AppendVarint(binary.AppendVarint(dst, w.start), w.end), nil
}

func (benchWinCodec) Decode(src []byte) (benchWin, error) {
	s, n := binary.Varint(src)
	if n <= 0 {
		return benchWin{}, fmt.Errorf("bad window")
	}
	e, m := binary.Varint(src[n:])
	if m <= 0 {
		return benchWin{}, fmt.Errorf("bad window")
	}
	return benchWin{s, e}, nil
}
