package state

import (
	"fmt"
	"testing"
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
