package state

// MapState is a map from user keys UK to values UV per key.
type MapState[K comparable, UK comparable, UV any] struct {
	desc[K]
	groups groups[map[K]map[UK]UV, K, map[UK]UV]
	// cur is the current key's map, valid while curEpoch == b.epoch (0:
	// none), so that a Get followed by a Put looks the key up once. It is
	// never a map a Frozen view still reads (C1): it is set only outside
	// pinned key groups, and Freeze changes the epoch (C2).
	cur      map[UK]UV
	curEpoch uint64
	ukc      Codec[UK]
	uvc      Codec[UV]
	cow      cowPins

	// ext is nil on the memory backend (see ValueState.ext).
	ext mapExt[K, UK, UV]
}

// mapExt is a MapState's storage on a backend that is not the memory
// backend (see valueExt).
type mapExt[K comparable, UK comparable, UV any] interface {
	get(uk UK) (UV, bool)
	put(uk UK, uv UV)
	remove(uk UK)
	len() int
	rangeMap(f func(UK, UV) bool)
	clear()
	forEach(kg int, f func(K, UK, UV))
}

// Map registers (or looks up) the map state called name. Registering the same
// name with the same kind and types returns the same state; with another kind
// or type it returns an error. User keys and values are snapshotted with
// DefaultCodec[UK]() and DefaultCodec[UV]().
func Map[K comparable, UK comparable, UV any](b *Backend[K], name string) (*MapState[K, UK, UV], error) {
	return MapWithCodecs[K, UK, UV](b, name, nil, nil)
}

// MapWithCodecs is Map with the codecs of the user keys and the values for
// snapshots (nil means the DefaultCodec of the type). The codecs are fixed by
// the first registration of name; registering it again returns that state
// and ignores ukc and uvc.
func MapWithCodecs[K comparable, UK comparable, UV any](b *Backend[K], name string, ukc Codec[UK], uvc Codec[UV]) (*MapState[K, UK, UV], error) {
	return register(b, name, KindMap, typeName[map[UK]UV](), func(d desc[K]) *MapState[K, UK, UV] {
		return &MapState[K, UK, UV]{desc: d, groups: make(groups[map[K]map[UK]UV, K, map[UK]UV], b.rng.Len()),
			ukc: codecOr(ukc), uvc: codecOr(uvc)}
	})
}

// MustMap is Map that panics on error.
func MustMap[K comparable, UK comparable, UV any](b *Backend[K], name string) *MapState[K, UK, UV] {
	return must(Map[K, UK, UV](b, name))
}

// MustMapWithCodecs is MapWithCodecs that panics on error.
func MustMapWithCodecs[K comparable, UK comparable, UV any](b *Backend[K], name string, ukc Codec[UK], uvc Codec[UV]) *MapState[K, UK, UV] {
	return must(MapWithCodecs(b, name, ukc, uvc))
}

// curMap returns the current key's map (nil if it has none), remembering
// it for the rest of the record when it may be written through later.
func (s *MapState[K, UK, UV]) curMap() map[UK]UV {
	if s.curEpoch == s.b.epoch {
		return s.cur
	}
	i := s.b.slotIndex()
	m := s.groups[i][s.b.key]
	if m != nil && !(s.cow.on && s.cow.shared(i)) {
		s.cur, s.curEpoch = m, s.b.epoch
	}
	return m
}

// forget drops the remembered map of the current key (the key's map was
// removed or replaced).
func (s *MapState[K, UK, UV]) forget() { s.cur, s.curEpoch = nil, 0 }

// Get returns the value of uk in the current key's map.
func (s *MapState[K, UK, UV]) Get(uk UK) (UV, bool) {
	if s.ext != nil {
		return s.ext.get(uk)
	}
	v, ok := s.curMap()[uk]
	return v, ok
}

// Contains reports whether the current key's map holds uk.
func (s *MapState[K, UK, UV]) Contains(uk UK) bool {
	if s.ext != nil {
		_, ok := s.ext.get(uk)
		return ok
	}
	_, ok := s.curMap()[uk]
	return ok
}

// Put sets uk to uv in the current key's map.
func (s *MapState[K, UK, UV]) Put(uk UK, uv UV) {
	if s.ext != nil {
		s.ext.put(uk, uv)
		return
	}
	if s.curEpoch == s.b.epoch {
		s.cur[uk] = uv
		return
	}
	i := s.ownSlot()
	g := s.groups[i]
	if g == nil {
		g = make(map[K]map[UK]UV)
		s.groups[i] = g
	}
	m := g[s.b.key]
	if m == nil {
		m = make(map[UK]UV)
		g[s.b.key] = m
	}
	m[uk] = uv
	s.cur, s.curEpoch = m, s.b.epoch
}

// Remove deletes uk from the current key's map; removing the last entry
// removes the key.
func (s *MapState[K, UK, UV]) Remove(uk UK) {
	if s.ext != nil {
		s.ext.remove(uk)
		return
	}
	i := s.ownSlot()
	g := s.groups[i]
	m := g[s.b.key]
	if m == nil {
		return
	}
	delete(m, uk)
	if len(m) == 0 {
		delete(g, s.b.key)
		s.forget()
	}
}

// Len reports the number of entries in the current key's map.
func (s *MapState[K, UK, UV]) Len() int {
	if s.ext != nil {
		return s.ext.len()
	}
	return len(s.curMap())
}

// Range calls f for every entry of the current key's map, in unspecified
// order, until f returns false. f may Remove the entry it is given; other
// modifications during Range follow Go's rules for maps modified during
// iteration.
func (s *MapState[K, UK, UV]) Range(f func(UK, UV) bool) {
	if s.ext != nil {
		s.ext.rangeMap(f)
		return
	}
	for k, v := range s.curMap() {
		if !f(k, v) {
			return
		}
	}
}

// Clear removes the current key's map.
func (s *MapState[K, UK, UV]) Clear() {
	if s.ext != nil {
		s.ext.clear()
		return
	}
	i := s.ownSlot()
	delete(s.groups[i], s.b.key)
	s.forget()
}

// numKeys reports the number of keys with a non-empty map.
func (s *MapState[K, UK, UV]) numKeys() int { return s.groups.numKeys() }

// numKeysInKeyGroup reports the number of keys of key group kg with a map.
func (s *MapState[K, UK, UV]) numKeysInKeyGroup(kg int) int {
	return numKeysInGroup(&s.desc, s.groups, kg)
}

// forEach calls f for every (key, user key, value) of key group kg, in
// unspecified order. f must not modify this state.
func (s *MapState[K, UK, UV]) forEach(kg int, f func(K, UK, UV)) {
	if s.ext != nil {
		s.ext.forEach(kg, f)
		return
	}
	for k, m := range s.groups[s.b.checkKeyGroup(kg)] {
		for uk, uv := range m {
			f(k, uk, uv)
		}
	}
}

// clearKeyGroup drops every map of key group kg.
func (s *MapState[K, UK, UV]) clearKeyGroup(kg int) {
	clearGroup(&s.desc, s.groups, &s.cow, kg)
	s.forget()
}

// forEachAny implements table; value is the key's map[UK]UV.
func (s *MapState[K, UK, UV]) forEachAny(kg int, f func(key, namespace, value any)) {
	for k, m := range s.groups[s.b.checkKeyGroup(kg)] {
		f(k, nil, m)
	}
}
