package state

import (
	"reflect"
	"strings"
	"testing"
)

// TestHandlesHaveNoKeyGroupMethods checks the split of keygroups.go: the
// exported methods of the state handles work on the current key only. None
// is named like a key-group operation, and none takes an int (the handles
// are instantiated with no int type parameter, so an int parameter can only
// be a key group).
func TestHandlesHaveNoKeyGroupMethods(t *testing.T) {
	handles := []reflect.Type{
		reflect.TypeFor[*ValueState[string, string]](),
		reflect.TypeFor[*ListState[string, string]](),
		reflect.TypeFor[*MapState[string, string, string]](),
		reflect.TypeFor[*NamespacedValueState[string, string, string]](),
		reflect.TypeFor[*NamespacedListState[string, string, string]](),
	}
	for _, h := range handles {
		if h.NumMethod() == 0 {
			t.Fatalf("%v has no exported method: the test would prove nothing", h)
		}
		for i := range h.NumMethod() {
			m := h.Method(i)
			if strings.HasPrefix(m.Name, "ForEach") || strings.HasPrefix(m.Name, "NumKeys") || strings.Contains(m.Name, "KeyGroup") {
				t.Errorf("%v.%s is a key-group operation; it belongs in keygroups.go or Table", h, m.Name)
			}
			for j := 1; j < m.Type.NumIn(); j++ { // 0 is the receiver
				if m.Type.In(j).Kind() == reflect.Int {
					t.Errorf("%v.%s takes an int (a key group?) as parameter %d", h, m.Name, j)
				}
			}
		}
	}
}

// TestForEachFunctions checks that the functions of keygroups.go visit the
// entries of one key group and nothing else (TestOnPebble runs it on
// Pebble).
func TestForEachFunctions(t *testing.T) {
	b := full()
	v := MustValue[string, int](b, "v")
	l := MustList[string, int](b, "l")
	m := MustMap[string, string, int](b, "m")
	nv := MustNamespacedValue[string, int64, int](b, "nv")
	nl := MustNamespacedList[string, int64, int](b, "nl")
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for i, k := range keys {
		set(b, k)
		v.Update(i)
		l.Add(i)
		m.Put("u", i)
		nv.Update(int64(i), i)
		nl.Add(int64(i), i)
	}
	kg := kgOf("a")
	want := map[string]int{}
	for i, k := range keys {
		if kgOf(k) == kg {
			want[k] = i
		}
	}
	check := func(what string, got map[string]int) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
		for k, i := range want {
			if got[k] != i {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
		}
	}
	got := map[string]int{}
	ForEachValue(v, kg, func(k string, i int) { got[k] = i })
	check("ForEachValue", got)
	got = map[string]int{}
	ForEachList(l, kg, func(k string, is []int) { got[k] = is[0] })
	check("ForEachList", got)
	got = map[string]int{}
	ForEachMapEntry(m, kg, func(k, _ string, i int) { got[k] = i })
	check("ForEachMapEntry", got)
	got = map[string]int{}
	ForEachNamespacedValue(nv, kg, func(k string, ns int64, i int) { got[k] = int(ns) })
	check("ForEachNamespacedValue", got)
	got = map[string]int{}
	ForEachNamespacedList(nl, kg, func(k string, _ int64, is []int) { got[k] = is[0] })
	check("ForEachNamespacedList", got)
	tb, ok := b.Table("nl")
	if !ok || tb.NumKeysInKeyGroup(kg) != len(want) || tb.NumKeys() != len(keys) {
		t.Fatalf("Table(nl) %v: %d in kg, %d total; want %d, %d", ok, tb.NumKeysInKeyGroup(kg), tb.NumKeys(), len(want), len(keys))
	}
}

// tab returns the backend's table of the state: the handle itself in
// memory, its wrapper on Pebble (pebble_states.go). Tests count and clear
// key groups through it, as Backend.Table does.
func (d *desc[K]) tab() table { return d.b.tables[d.name] }
