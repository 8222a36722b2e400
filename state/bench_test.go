package state

import (
	"fmt"
	"testing"

	"github.com/weirproject/weir/keygroup"
)

const benchKeys = 10_000

func benchKeySet() ([]string, []int) {
	keys := make([]string, benchKeys)
	kgs := make([]int, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
		kgs[i] = kgOf(keys[i])
	}
	return keys, kgs
}

// BenchmarkValueGetUpdate is one record's worth of keyed-state work: set the
// current key, read its counter, write it back incremented, over 10k existing
// string keys. It must not allocate.
func BenchmarkValueGetUpdate(b *testing.B) {
	keys, kgs := benchKeySet()
	be := full()
	st := MustValue[string, int](be, "count")
	for i, k := range keys {
		be.SetCurrentKey(k, kgs[i])
		st.Update(0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		v, _ := st.Value()
		st.Update(v + 1)
	}
}

// BenchmarkValueInsert is the first record of a key: the key is absent
// (cleared), read, and written. It allocates the new entry.
func BenchmarkValueInsert(b *testing.B) {
	keys, kgs := benchKeySet()
	be := full()
	st := MustValue[string, int](be, "count")
	for i, k := range keys {
		be.SetCurrentKey(k, kgs[i])
		st.Update(0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		st.Clear()
		v, _ := st.Value()
		st.Update(v + 1)
	}
}

// BenchmarkBaselineMapIncrement is the floor BenchmarkValueGetUpdate is
// measured against: a plain map[string]int increment over the same keys.
func BenchmarkBaselineMapIncrement(b *testing.B) {
	keys, _ := benchKeySet()
	m := make(map[string]int, benchKeys)
	for _, k := range keys {
		m[k] = 0
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m[keys[i%benchKeys]]++
	}
}

// BenchmarkBaselineMapGetSet is the same with a separate read and write, as
// a Value followed by an Update does.
func BenchmarkBaselineMapGetSet(b *testing.B) {
	keys, _ := benchKeySet()
	m := make(map[string]int, benchKeys)
	for _, k := range keys {
		m[k] = 0
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := keys[i%benchKeys]
		v := m[k]
		m[k] = v + 1
	}
}

// BenchmarkMapGetPut reads and overwrites an existing user key of map state.
func BenchmarkMapGetPut(b *testing.B) {
	keys, kgs := benchKeySet()
	be := full()
	st := MustMap[string, string, int](be, "m")
	for i, k := range keys {
		be.SetCurrentKey(k, kgs[i])
		st.Put("clicks", 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		v, _ := st.Get("clicks")
		st.Put("clicks", v+1)
	}
}

// BenchmarkNamespacedValueGetUpdate is the per-record work of an aggregating
// window: read and write the (key, window) accumulator.
func BenchmarkNamespacedValueGetUpdate(b *testing.B) {
	type window struct{ start, end int64 }
	keys, kgs := benchKeySet()
	be := full()
	st := MustNamespacedValue[string, window, int64](be, "acc")
	w := window{0, 60_000}
	for i, k := range keys {
		be.SetCurrentKey(k, kgs[i])
		st.Update(w, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		v, _ := st.Value(w)
		st.Update(w, v+1)
	}
}

// BenchmarkListGet reads an existing key's list.
func BenchmarkListGet(b *testing.B) {
	keys, kgs := benchKeySet()
	be := full()
	st := MustList[string, int](be, "l")
	for i, k := range keys {
		be.SetCurrentKey(k, kgs[i])
		st.Add(1)
		st.Add(2)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		n += len(st.Get())
	}
	_ = n
}

// benchWin is a window namespace like window.Window.
type benchWin struct{ start, end int64 }

// benchWindowed is the state work of a window operator summing per key and
// window over 10k int64 keys, event time rising 1 ms every 100 records, with
// windows of sizeMs every slideMs (tumbling when equal): per record, Value
// then Update of each of the record's windows; every wmEvery records the
// watermark moves to the current time and each window it passed is read and
// cleared (fired), as the operator's timers do. Windows are opened and
// closed all the time, as in a real job.
func benchWindowed(b *testing.B, sizeMs, slideMs, wmEvery int64) {
	benchWindowedKeys(b, sizeMs, slideMs, wmEvery, false)
}

// benchWindowedKeys is benchWindowed with the keys in a random order
// (rather than round robin, which favours layouts that allocate in arrival
// order) if random.
func benchWindowedKeys(b *testing.B, sizeMs, slideMs, wmEvery int64, random bool) {
	const keys = 10_000
	const perMs = 100
	be := NewBackend[int64](keygroup.Range{Start: 0, End: maxP - 1})
	st := MustNamespacedValue[int64, benchWin, int64](be, "acc")
	kgs := make([]int, keys)
	for k := range kgs {
		kgs[k] = keygroup.Assign(keygroup.HashInt64(int64(k)), maxP)
	}
	type pending struct {
		key int64
		w   benchWin
	}
	var queue []pending // windows to fire, in end order
	head := 0
	var sum int64
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		k, ts := i%keys, i/perMs
		if random {
			k = int64(keygroup.Murmur(int32(i)*0x3b9aca07)&0x7fffffff) % keys
		}
		be.SetCurrentKey(k, kgs[k])
		last := ts - ts%slideMs
		for s := last; s > ts-sizeMs; s -= slideMs {
			w := benchWin{s, s + sizeMs}
			v, ok := st.Value(w)
			if !ok {
				queue = append(queue, pending{k, w})
			}
			st.Update(w, v+1)
		}
		if i%wmEvery == wmEvery-1 { // the watermark moves to ts
			for head < len(queue) && queue[head].w.end <= ts {
				p := queue[head]
				head++
				be.SetCurrentKey(p.key, kgs[p.key])
				v, _ := st.Value(p.w)
				sum += v
				st.Clear(p.w)
			}
			if head > 1<<16 && head > len(queue)/2 {
				queue = append(queue[:0], queue[head:]...)
				head = 0
			}
		}
	}
	_ = sum
}

// BenchmarkNamespacedWindows is benchWindowed with 1 s tumbling windows
// (10 records per key and window) and 1 s windows sliding by 250 ms (four
// windows per record), with a watermark every ms of event time and one
// every 200k records (2 s of event time, as a 200 ms periodic watermark at
// 1M records/s gives: keys have a few windows open).
func BenchmarkNamespacedWindows(b *testing.B) {
	b.Run("tumbling", func(b *testing.B) { benchWindowed(b, 1000, 1000, 100) })
	b.Run("tumbling-lag", func(b *testing.B) { benchWindowed(b, 1000, 1000, 200_000) })
	b.Run("tumbling-lag-random", func(b *testing.B) { benchWindowedKeys(b, 1000, 1000, 200_000, true) })
	b.Run("sliding4", func(b *testing.B) { benchWindowed(b, 1000, 250, 100) })
	b.Run("sliding4-lag", func(b *testing.B) { benchWindowed(b, 1000, 250, 200_000) })
}
