package state

import "slices"

// NamespacedValueState is a single value per (key, namespace), for example
// per key and window.
type NamespacedValueState[K comparable, N comparable, V any] struct {
	desc[K]
	t  nsTable[K, N, V]
	nc Codec[N]
	vc Codec[V]

	// ext is nil on the memory backend (see ValueState.ext).
	ext nsValueExt[K, N, V]
}

// nsValueExt is a NamespacedValueState's storage on a backend that is not
// the memory backend (see valueExt).
type nsValueExt[K comparable, N comparable, V any] interface {
	value(ns N) (V, bool)
	update(ns N, v V)
	clear(ns N)
	merge(target N, sources []N, merge func(acc, next V) V)
	forEach(kg int, f func(K, N, V))
}

// NamespacedValue registers (or looks up) the namespaced value state called
// name. Registering the same name with the same kind and types returns the
// same state; with another kind or type it returns an error. Namespaces and
// values are snapshotted with DefaultCodec[N]() and DefaultCodec[V]().
func NamespacedValue[K comparable, N comparable, V any](b *Backend[K], name string) (*NamespacedValueState[K, N, V], error) {
	return NamespacedValueWithCodecs[K, N, V](b, name, nil, nil)
}

// NamespacedValueWithCodecs is NamespacedValue with the codecs of the
// namespaces and the values for snapshots (nil means the DefaultCodec of the
// type). The codecs are fixed by the first registration of name;
// registering it again returns that state and ignores nc and vc.
func NamespacedValueWithCodecs[K comparable, N comparable, V any](b *Backend[K], name string, nc Codec[N], vc Codec[V]) (*NamespacedValueState[K, N, V], error) {
	typ := "(" + typeName[N]() + ") " + typeName[V]()
	return register(b, name, KindNamespacedValue, typ, func(d desc[K]) *NamespacedValueState[K, N, V] {
		return &NamespacedValueState[K, N, V]{desc: d, t: newNsTable[K, N, V](b, identity[V]), nc: codecOr(nc), vc: codecOr(vc)}
	})
}

// MustNamespacedValue is NamespacedValue that panics on error.
func MustNamespacedValue[K comparable, N comparable, V any](b *Backend[K], name string) *NamespacedValueState[K, N, V] {
	return must(NamespacedValue[K, N, V](b, name))
}

// MustNamespacedValueWithCodecs is NamespacedValueWithCodecs that panics on
// error.
func MustNamespacedValueWithCodecs[K comparable, N comparable, V any](b *Backend[K], name string, nc Codec[N], vc Codec[V]) *NamespacedValueState[K, N, V] {
	return must(NamespacedValueWithCodecs(b, name, nc, vc))
}

// OrderNamespaces tells the state that namespaces are ordered by before (a
// strict total order) and that a key usually gets them in ascending order,
// as it gets time windows: a key's next window is then known to be new
// without a look at its older ones. It changes no result, only the cost of
// reaching a namespace, so it may be set at any time. The in-memory backend
// uses it; Pebble has no need.
func (s *NamespacedValueState[K, N, V]) OrderNamespaces(before func(a, b N) bool) {
	s.t.before = before
}

// Value returns the value of the current key in namespace ns.
func (s *NamespacedValueState[K, N, V]) Value(ns N) (V, bool) {
	if s.ext != nil {
		return s.ext.value(ns)
	}
	if sl := s.t.get(ns); sl != nil {
		return sl.v, true
	}
	var zero V
	return zero, false
}

// Update sets the value of the current key in namespace ns.
func (s *NamespacedValueState[K, N, V]) Update(ns N, v V) {
	if s.ext != nil {
		s.ext.update(ns, v)
		return
	}
	s.t.put(ns, v)
}

// Modify sets the value of the current key in namespace ns to f(old, ok),
// where old is the value there and ok whether there was one, and reports
// ok. It is Value followed by Update with one lookup instead of two (on the
// in-memory backend the value is changed where it is stored): the
// read-modify-write of a reducing or aggregating window per record. f must
// not use this state.
func (s *NamespacedValueState[K, N, V]) Modify(ns N, f func(old V, ok bool) V) bool {
	if s.ext != nil {
		old, ok := s.ext.value(ns)
		s.ext.update(ns, f(old, ok))
		return ok
	}
	sl, ok := s.t.slot(ns)
	sl.v = f(sl.v, ok)
	return ok
}

// Clear removes the value of the current key in namespace ns.
func (s *NamespacedValueState[K, N, V]) Clear(ns N) {
	if s.ext != nil {
		s.ext.clear(ns)
		return
	}
	s.t.take(ns)
}

// MergeNamespaces folds the current key's values in target and then in each
// of sources (in order), skipping absent ones, with acc = merge(acc, next),
// stores the result in target and clears the sources (merging session
// windows). If none is present, nothing changes. A source equal to target is
// skipped.
func (s *NamespacedValueState[K, N, V]) MergeNamespaces(target N, sources []N, merge func(acc, next V) V) {
	if s.ext != nil {
		s.ext.merge(target, sources, merge)
		return
	}
	if s.t.entries() == nil {
		return
	}
	acc, have := s.Value(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		v, ok := s.t.take(src)
		if !ok {
			continue
		}
		if have {
			acc = merge(acc, v)
		} else {
			acc, have = v, true
		}
	}
	if have {
		s.t.put(target, acc)
	}
}

// numKeys reports the number of (key, namespace) pairs with a value.
func (s *NamespacedValueState[K, N, V]) numKeys() int {
	return s.t.numKeys()
}

// numKeysInKeyGroup reports the number of (key, namespace) pairs of key group
// kg with a value.
func (s *NamespacedValueState[K, N, V]) numKeysInKeyGroup(kg int) int {
	return s.t.group(kg).n
}

// forEach calls f for every (key, namespace, value) of key group kg, in
// unspecified order. f must not modify this state.
func (s *NamespacedValueState[K, N, V]) forEach(kg int, f func(K, N, V)) {
	if s.ext != nil {
		s.ext.forEach(kg, f)
		return
	}
	s.t.forEach(kg, f)
}

// clearKeyGroup drops every value of key group kg.
func (s *NamespacedValueState[K, N, V]) clearKeyGroup(kg int) {
	s.t.clearKeyGroup(kg)
}

// forEachAny implements table.
func (s *NamespacedValueState[K, N, V]) forEachAny(kg int, f func(key, namespace, value any)) {
	s.forEach(kg, func(k K, ns N, v V) { f(k, ns, v) })
}

// NamespacedListState is a list of values per (key, namespace), for example
// the records of one key's window.
type NamespacedListState[K comparable, N comparable, V any] struct {
	desc[K]
	t  nsTable[K, N, []V]
	nc Codec[N]
	vc Codec[V]

	// ext is nil on the memory backend (see ValueState.ext).
	ext nsListExt[K, N, V]
}

// nsListExt is a NamespacedListState's storage on a backend that is not the
// memory backend (see valueExt).
type nsListExt[K comparable, N comparable, V any] interface {
	get(ns N) []V
	addAll(ns N, vs []V)
	update(ns N, vs []V)
	clear(ns N)
	merge(target N, sources []N)
	forEach(kg int, f func(K, N, []V))
}

// NamespacedList registers (or looks up) the namespaced list state called
// name. Registering the same name with the same kind and types returns the
// same state; with another kind or type it returns an error. Namespaces and
// items are snapshotted with DefaultCodec[N]() and DefaultCodec[V]().
func NamespacedList[K comparable, N comparable, V any](b *Backend[K], name string) (*NamespacedListState[K, N, V], error) {
	return NamespacedListWithCodecs[K, N, V](b, name, nil, nil)
}

// NamespacedListWithCodecs is NamespacedList with the codecs of the
// namespaces and the list items for snapshots (nil means the DefaultCodec of
// the type). The codecs are fixed by the first registration of name;
// registering it again returns that state and ignores nc and vc.
func NamespacedListWithCodecs[K comparable, N comparable, V any](b *Backend[K], name string, nc Codec[N], vc Codec[V]) (*NamespacedListState[K, N, V], error) {
	typ := "(" + typeName[N]() + ") []" + typeName[V]()
	return register(b, name, KindNamespacedList, typ, func(d desc[K]) *NamespacedListState[K, N, V] {
		return &NamespacedListState[K, N, V]{desc: d, t: newNsTable[K, N, []V](b, slices.Clone[[]V]), nc: codecOr(nc), vc: codecOr(vc)}
	})
}

// MustNamespacedList is NamespacedList that panics on error.
func MustNamespacedList[K comparable, N comparable, V any](b *Backend[K], name string) *NamespacedListState[K, N, V] {
	return must(NamespacedList[K, N, V](b, name))
}

// MustNamespacedListWithCodecs is NamespacedListWithCodecs that panics on
// error.
func MustNamespacedListWithCodecs[K comparable, N comparable, V any](b *Backend[K], name string, nc Codec[N], vc Codec[V]) *NamespacedListState[K, N, V] {
	return must(NamespacedListWithCodecs(b, name, nc, vc))
}

// Get returns the current key's list in namespace ns, nil if empty. The slice
// is owned by the state: it is valid until the next modification of this
// (key, namespace)'s list and must not be modified or retained.
func (s *NamespacedListState[K, N, V]) Get(ns N) []V {
	if s.ext != nil {
		return s.ext.get(ns)
	}
	if sl := s.t.get(ns); sl != nil {
		return sl.v
	}
	return nil
}

// OrderNamespaces is NamespacedValueState.OrderNamespaces for lists.
func (s *NamespacedListState[K, N, V]) OrderNamespaces(before func(a, b N) bool) { s.t.before = before }

// Add appends v to the current key's list in namespace ns.
func (s *NamespacedListState[K, N, V]) Add(ns N, v V) {
	if s.ext != nil {
		s.ext.addAll(ns, []V{v})
		return
	}
	sl, _ := s.t.slot(ns)
	sl.v = append(sl.v, v)
}

// Update replaces the current key's list in namespace ns with a copy of vs;
// an empty vs clears it.
func (s *NamespacedListState[K, N, V]) Update(ns N, vs []V) {
	if len(vs) == 0 {
		s.Clear(ns)
		return
	}
	if s.ext != nil {
		s.ext.update(ns, vs)
		return
	}
	sl, _ := s.t.slot(ns)
	sl.v = replace(sl.v, vs)
}

// Clear removes the current key's list in namespace ns.
func (s *NamespacedListState[K, N, V]) Clear(ns N) {
	if s.ext != nil {
		s.ext.clear(ns)
		return
	}
	s.t.take(ns)
}

// MergeNamespaces appends the current key's lists in sources (in order) to
// its list in target and clears the sources (merging session windows). A
// source equal to target is skipped.
func (s *NamespacedListState[K, N, V]) MergeNamespaces(target N, sources []N) {
	if s.ext != nil {
		s.ext.merge(target, sources)
		return
	}
	if s.t.entries() == nil {
		return
	}
	acc := s.Get(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		if v, ok := s.t.take(src); ok {
			acc = append(acc, v...)
		}
	}
	if len(acc) > 0 {
		s.t.put(target, acc)
	}
}

// numKeys reports the number of (key, namespace) pairs with a non-empty list.
func (s *NamespacedListState[K, N, V]) numKeys() int {
	return s.t.numKeys()
}

// numKeysInKeyGroup reports the number of (key, namespace) pairs of key group
// kg with a list.
func (s *NamespacedListState[K, N, V]) numKeysInKeyGroup(kg int) int {
	return s.t.group(kg).n
}

// forEach calls f for every (key, namespace, list) of key group kg, in
// unspecified order. The lists are the state's own (see Get). f must not
// modify this state.
func (s *NamespacedListState[K, N, V]) forEach(kg int, f func(K, N, []V)) {
	if s.ext != nil {
		s.ext.forEach(kg, f)
		return
	}
	s.t.forEach(kg, f)
}

// clearKeyGroup drops every list of key group kg.
func (s *NamespacedListState[K, N, V]) clearKeyGroup(kg int) {
	s.t.clearKeyGroup(kg)
}

// forEachAny implements table.
func (s *NamespacedListState[K, N, V]) forEachAny(kg int, f func(key, namespace, value any)) {
	s.forEach(kg, func(k K, ns N, v []V) { f(k, ns, v) })
}
