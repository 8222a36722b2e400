package state

// ValueState is a single value per key.
type ValueState[K comparable, V any] struct {
	desc[K]
	groups groups[map[K]V, K, V]
}

// Value registers (or looks up) the value state called name. Registering the
// same name with the same kind and types returns the same state; with another
// kind or type it returns an error.
func Value[K comparable, V any](b *Backend[K], name string) (*ValueState[K, V], error) {
	return register(b, name, KindValue, typeName[V](), func(d desc[K]) *ValueState[K, V] {
		return &ValueState[K, V]{desc: d, groups: make(groups[map[K]V, K, V], b.rng.Len())}
	})
}

// MustValue is Value that panics on error.
func MustValue[K comparable, V any](b *Backend[K], name string) *ValueState[K, V] {
	return must(Value[K, V](b, name))
}

// Value returns the current key's value and whether it is set.
func (s *ValueState[K, V]) Value() (V, bool) {
	v, ok := s.groups[s.b.slotIndex()][s.b.key]
	return v, ok
}

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) {
	i := s.b.slotIndex()
	m := s.groups[i]
	if m == nil {
		m = make(map[K]V)
		s.groups[i] = m
	}
	m[s.b.key] = v
}

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() {
	delete(s.groups[s.b.slotIndex()], s.b.key)
}

// NumKeys reports the number of keys with a value, over all key groups.
func (s *ValueState[K, V]) NumKeys() int { return s.groups.numKeys() }

// NumKeysInKeyGroup reports the number of keys with a value in key group kg.
func (s *ValueState[K, V]) NumKeysInKeyGroup(kg int) int {
	return len(s.groups[s.b.checkKeyGroup(kg)])
}

// ForEachKey calls f for every key of key group kg that has a value, in
// unspecified order. f must not modify this state.
func (s *ValueState[K, V]) ForEachKey(kg int, f func(K)) {
	for k := range s.groups[s.b.checkKeyGroup(kg)] {
		f(k)
	}
}

// ForEach calls f for every (key, value) of key group kg, in unspecified
// order. f must not modify this state.
func (s *ValueState[K, V]) ForEach(kg int, f func(K, V)) {
	for k, v := range s.groups[s.b.checkKeyGroup(kg)] {
		f(k, v)
	}
}

// ClearKeyGroup drops every value of key group kg.
func (s *ValueState[K, V]) ClearKeyGroup(kg int) { s.groups[s.b.checkKeyGroup(kg)] = nil }

// ForEachAny implements Table.
func (s *ValueState[K, V]) ForEachAny(kg int, f func(key, namespace, value any)) {
	s.ForEach(kg, func(k K, v V) { f(k, nil, v) })
}
