package ordering

import (
	"encoding/binary"
	"errors"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
)

// heldItem is a record with one string, like the events of the ordering
// experiment (ordering/experiment's Event: an item, its time and offset).
type heldItem struct {
	Item    string
	TS, Off int64
}

type heldItemCodec struct{}

func (heldItemCodec) Append(b []byte, v heldItem) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(v.Item)))
	b = append(b, v.Item...)
	b = binary.AppendVarint(b, v.TS)
	return binary.AppendVarint(b, v.Off), nil
}

func (heldItemCodec) Decode(b []byte) (heldItem, error) {
	n, m := binary.Uvarint(b)
	if m <= 0 || uint64(len(b)-m) < n {
		return heldItem{}, errors.New("short item")
	}
	v := heldItem{Item: string(b[m : m+int(n)])}
	b = b[m+int(n):]
	ts, m := binary.Varint(b)
	off, m2 := binary.Varint(b[max(m, 0):])
	if m <= 0 || m2 <= 0 {
		return heldItem{}, errors.New("short numbers")
	}
	v.TS, v.Off = ts, off
	return v, nil
}

var sink []byte

// BenchmarkHeldGC: a catch-up's worth of records with a string held (1M
// records from 39 ordered partitions), while the rest of a job allocates
// short-lived garbage (64 bytes per record pushed and per record released),
// then released: values against encoded
// (HeldCodec), in the same run. gc-cpu-ms is the garbage collector's CPU
// time (runtime/metrics) during the whole cycle.
func BenchmarkHeldGC(b *testing.B) {
	const n = 1_000_000
	items := make([]string, 2000)
	for i := range items {
		items[i] = "item-" + strconv.Itoa(i)
	}
	// Records are made as they are pushed (a new string each, as a
	// decoder makes), so that only the queue holds them.
	itemBytes := make([][]byte, len(items))
	for i := range items {
		itemBytes[i] = []byte(items[i])
	}
	rec := func(i int) heldRec[heldItem] {
		p := int64(i % 39)
		return heldRec[heldItem]{ts: int64(i/39)*7 + p, t1: p, t2: int64(i), seq: uint64(i),
			v: heldItem{Item: string(itemBytes[i%len(items)]), TS: int64(i), Off: int64(i)}}
	}
	gcCPU := func() float64 {
		s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
		metrics.Read(s)
		return s[0].Value.Float64()
	}
	churn := func() { sink = make([]byte, 64) }
	run := func(b *testing.B, push func(heldRec[heldItem]), release func()) {
		runtime.GC()
		var gc float64
		for b.Loop() {
			g0 := gcCPU()
			for i := range n {
				push(rec(i))
				churn()
			}
			release()
			gc += gcCPU() - g0
		}
		b.ReportMetric(gc*1e3/float64(b.N), "gc-cpu-ms")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
	}
	b.Run("values", func(b *testing.B) {
		var q heldQueue[heldItem]
		run(b, q.push, func() { q.release(1<<62, func(*heldRec[heldItem]) { churn() }) })
	})
	b.Run("encoded", func(b *testing.B) {
		q := newEncodedQueue[heldItem](heldItemCodec{})
		run(b, func(h heldRec[heldItem]) {
			if err := q.push(h); err != nil {
				b.Fatal(err)
			}
		}, func() {
			if _, err := q.release(1<<62, func(*heldRec[heldItem]) { churn() }); err != nil {
				b.Fatal(err)
			}
		})
	})
}
