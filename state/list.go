package state

// ListState is a list of values per key.
type ListState[K comparable, V any] struct {
	desc[K]
	groups groups[map[K][]V, K, []V]
	vc     Codec[V]
	cow    cowPins

	// ext is nil on the memory backend (see ValueState.ext).
	ext listExt[K, V]
}

// listExt is a ListState's storage on a backend that is not the memory
// backend (see valueExt).
type listExt[K comparable, V any] interface {
	get() []V
	addAll(vs []V)
	update(vs []V)
	clear()
	forEach(kg int, f func(K, []V))
}

// List registers (or looks up) the list state called name. Registering the
// same name with the same kind and types returns the same state; with another
// kind or type it returns an error. Items are snapshotted with
// DefaultCodec[V]().
func List[K comparable, V any](b *Backend[K], name string) (*ListState[K, V], error) {
	return ListWithCodec[K, V](b, name, nil)
}

// ListWithCodec is List with the codec of the list items for snapshots (nil
// means DefaultCodec[V]()). The codec is fixed by the first registration of
// name; registering it again returns that state and ignores vc.
func ListWithCodec[K comparable, V any](b *Backend[K], name string, vc Codec[V]) (*ListState[K, V], error) {
	return register(b, name, KindList, "[]"+typeName[V](), func(d desc[K]) *ListState[K, V] {
		return &ListState[K, V]{desc: d, groups: make(groups[map[K][]V, K, []V], b.rng.Len()), vc: codecOr(vc)}
	})
}

// MustList is List that panics on error.
func MustList[K comparable, V any](b *Backend[K], name string) *ListState[K, V] {
	return must(List[K, V](b, name))
}

// MustListWithCodec is ListWithCodec that panics on error.
func MustListWithCodec[K comparable, V any](b *Backend[K], name string, vc Codec[V]) *ListState[K, V] {
	return must(ListWithCodec(b, name, vc))
}

// Get returns the current key's list, nil if empty. The slice is owned by the
// state: it is valid until the next modification of this key's list (Add,
// AddAll, Update, Clear) and must not be modified or retained by the caller
// (copy it with slices.Clone to keep it).
func (s *ListState[K, V]) Get() []V {
	if s.ext != nil {
		return s.ext.get()
	}
	return s.groups[s.b.slotIndex()][s.b.key]
}

// Add appends v to the current key's list.
func (s *ListState[K, V]) Add(v V) {
	if s.ext != nil {
		s.ext.addAll([]V{v})
		return
	}
	m := s.group()
	m[s.b.key] = append(m[s.b.key], v)
}

// AddAll appends vs to the current key's list.
func (s *ListState[K, V]) AddAll(vs []V) {
	if len(vs) == 0 {
		return
	}
	if s.ext != nil {
		s.ext.addAll(vs)
		return
	}
	m := s.group()
	m[s.b.key] = append(m[s.b.key], vs...)
}

// Update replaces the current key's list with a copy of vs; an empty vs
// clears it. The previous list's storage is reused.
func (s *ListState[K, V]) Update(vs []V) {
	if len(vs) == 0 {
		s.Clear()
		return
	}
	if s.ext != nil {
		s.ext.update(vs)
		return
	}
	m := s.group()
	m[s.b.key] = replace(m[s.b.key], vs)
}

// Clear removes the current key's list.
func (s *ListState[K, V]) Clear() {
	if s.ext != nil {
		s.ext.clear()
		return
	}
	i := s.ownSlot()
	delete(s.groups[i], s.b.key)
}

// group returns the current key's key-group map for writing, made if needed.
func (s *ListState[K, V]) group() map[K][]V {
	i := s.ownSlot()
	m := s.groups[i]
	if m == nil {
		m = make(map[K][]V)
		s.groups[i] = m
	}
	return m
}

// replace copies vs into cur's storage (vs may alias cur) and zeroes the
// elements it no longer uses, so they do not keep garbage alive.
func replace[V any](cur, vs []V) []V {
	n := len(cur)
	out := append(cur[:0], vs...)
	if len(out) < n { // out shares cur's storage
		clear(cur[len(out):n])
	}
	return out
}

// numKeys reports the number of keys with a non-empty list.
func (s *ListState[K, V]) numKeys() int { return s.groups.numKeys() }

// numKeysInKeyGroup reports the number of keys of key group kg with a list.
func (s *ListState[K, V]) numKeysInKeyGroup(kg int) int {
	return numKeysInGroup(&s.desc, s.groups, kg)
}

// forEach calls f for every (key, list) of key group kg, in unspecified
// order. The lists are the state's own (see Get). f must not modify this
// state.
func (s *ListState[K, V]) forEach(kg int, f func(K, []V)) {
	if s.ext != nil {
		s.ext.forEach(kg, f)
		return
	}
	for k, v := range s.groups[s.b.checkKeyGroup(kg)] {
		f(k, v)
	}
}

// clearKeyGroup drops every list of key group kg.
func (s *ListState[K, V]) clearKeyGroup(kg int) {
	clearGroup(&s.desc, s.groups, &s.cow, kg)
}

// forEachAny implements table.
func (s *ListState[K, V]) forEachAny(kg int, f func(key, namespace, value any)) {
	s.forEach(kg, func(k K, v []V) { f(k, nil, v) })
}
