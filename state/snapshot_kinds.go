package state

import (
	"encoding/binary"
	"fmt"
	"maps"
)

// The entry layouts of the five state kinds (see "Snapshot format" in the
// package documentation). Every field is a uvarint length and that many bytes
// written by the state's codecs; n is a uvarint count.
//
//	value              key value
//	list               key n item*n
//	map                key n (userKey value)*n
//	namespaced value   key namespace value
//	namespaced list    key namespace n item*n
//
// decodeEntries builds a new group map (a *nsGroup for namespaced state) and
// leaves the state alone, so a restore that fails half-way changes nothing;
// install then hands it to the state (or merges it into an existing one).

func keyErr(err error) error   { return fmt.Errorf("encoding key: %w", err) }
func nsErr(err error) error    { return fmt.Errorf("encoding namespace: %w", err) }
func valueErr(err error) error { return fmt.Errorf("encoding value: %w", err) }

// appendItems appends a list: its length and its items.
func appendItems[V any](dst []byte, c Codec[V], vs []V) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	var err error
	for _, v := range vs {
		if dst, err = appendField(dst, c, v); err != nil {
			return dst, valueErr(err)
		}
	}
	return dst, nil
}

// decodeItems reads a list written by appendItems.
func decodeItems[V any](r *reader, c Codec[V]) ([]V, error) {
	m, err := itemCount(r, "list length", 1)
	if err != nil {
		return nil, err
	}
	// m is bounded by the bytes left, not by the size of V: preallocate
	// little so that a corrupt count cannot claim much memory.
	vs := make([]V, 0, min(m, 1024))
	for range m {
		v, err := decodeField(r, c, "list item")
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// installGroup adds staged to the group map of kg, adopting it when the key
// group has none.
func installGroup[M ~map[MK]MV, MK comparable, MV any](g groups[M, MK, MV], slot int, staged M) {
	switch {
	case len(staged) == 0:
	case g[slot] == nil:
		g[slot] = staged
	default:
		maps.Copy(g[slot], staged)
	}
}

func (s *ValueState[K, V]) appendEntries(dst []byte, kg int) ([]byte, error) {
	m := s.groups[kg-s.b.rng.Start]
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	kc, vc := s.b.kc, s.vc
	var err error
	for k, p := range m {
		if dst, err = appendField(dst, kc, k); err != nil {
			return dst, keyErr(err)
		}
		if dst, err = appendField(dst, vc, *p); err != nil {
			return dst, valueErr(err)
		}
	}
	return dst, nil
}

func (s *ValueState[K, V]) decodeEntries(r *reader, n int) (any, error) {
	m := make(map[K]*V, entryHint(r, n, 2))
	for range n {
		k, err := decodeField(r, s.b.kc, "key")
		if err != nil {
			return nil, err
		}
		v, err := decodeField(r, s.vc, "value")
		if err != nil {
			return nil, err
		}
		p := new(V)
		*p = v
		m[k] = p
	}
	return m, nil
}

func (s *ValueState[K, V]) install(kg int, staged any) {
	if s.cow.on {
		s.unshare(kg - s.b.rng.Start)
	}
	installGroup(s.groups, kg-s.b.rng.Start, staged.(map[K]*V))
	s.indexReset()                                               // X2: entries of the key group were replaced
	s.cache, s.cslot, s.cacheEpoch, s.missEpoch = nil, nil, 0, 0 // the current key's entry may have been replaced
}

func (s *ListState[K, V]) appendEntries(dst []byte, kg int) ([]byte, error) {
	m := s.groups[kg-s.b.rng.Start]
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	kc := s.b.kc
	var err error
	for k, vs := range m {
		if dst, err = appendField(dst, kc, k); err != nil {
			return dst, keyErr(err)
		}
		if dst, err = appendItems(dst, s.vc, vs); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func (s *ListState[K, V]) decodeEntries(r *reader, n int) (any, error) {
	m := make(map[K][]V, entryHint(r, n, 3))
	for range n {
		k, err := decodeField(r, s.b.kc, "key")
		if err != nil {
			return nil, err
		}
		if m[k], err = decodeItems(r, s.vc); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (s *ListState[K, V]) install(kg int, staged any) {
	if s.cow.on {
		s.unshare(kg - s.b.rng.Start)
	}
	installGroup(s.groups, kg-s.b.rng.Start, staged.(map[K][]V))
}

func (s *MapState[K, UK, UV]) appendEntries(dst []byte, kg int) ([]byte, error) {
	g := s.groups[kg-s.b.rng.Start]
	dst = binary.AppendUvarint(dst, uint64(len(g)))
	kc := s.b.kc
	var err error
	for k, m := range g {
		if dst, err = appendField(dst, kc, k); err != nil {
			return dst, keyErr(err)
		}
		dst = binary.AppendUvarint(dst, uint64(len(m)))
		for uk, uv := range m {
			if dst, err = appendField(dst, s.ukc, uk); err != nil {
				return dst, fmt.Errorf("encoding user key: %w", err)
			}
			if dst, err = appendField(dst, s.uvc, uv); err != nil {
				return dst, valueErr(err)
			}
		}
	}
	return dst, nil
}

func (s *MapState[K, UK, UV]) decodeEntries(r *reader, n int) (any, error) {
	g := make(map[K]map[UK]UV, entryHint(r, n, 4))
	for range n {
		k, err := decodeField(r, s.b.kc, "key")
		if err != nil {
			return nil, err
		}
		cnt, err := itemCount(r, "map size", 2)
		if err != nil {
			return nil, err
		}
		m := make(map[UK]UV, cnt)
		for range cnt {
			uk, err := decodeField(r, s.ukc, "user key")
			if err != nil {
				return nil, err
			}
			if m[uk], err = decodeField(r, s.uvc, "value"); err != nil {
				return nil, err
			}
		}
		g[k] = m
	}
	return g, nil
}

func (s *MapState[K, UK, UV]) install(kg int, staged any) {
	if s.cow.on {
		s.unshare(kg - s.b.rng.Start)
	}
	installGroup(s.groups, kg-s.b.rng.Start, staged.(map[K]map[UK]UV))
	s.forget() // the current key's map may have been replaced
}

// appendNsKey appends the key and namespace fields of a namespaced entry.
func appendNsKey[K comparable, N comparable](dst []byte, kc Codec[K], nc Codec[N], k K, ns N) ([]byte, error) {
	dst, err := appendField(dst, kc, k)
	if err != nil {
		return dst, keyErr(err)
	}
	if dst, err = appendField(dst, nc, ns); err != nil {
		return dst, nsErr(err)
	}
	return dst, nil
}

// decodeNsKey reads the key and namespace fields of a namespaced entry.
func decodeNsKey[K comparable, N comparable](r *reader, kc Codec[K], nc Codec[N]) (k K, ns N, err error) {
	if k, err = decodeField(r, kc, "key"); err != nil {
		return k, ns, err
	}
	ns, err = decodeField(r, nc, "namespace")
	return k, ns, err
}

func (s *NamespacedValueState[K, N, V]) appendEntries(dst []byte, kg int) ([]byte, error) {
	g := &s.t.groups[kg-s.b.rng.Start]
	dst = binary.AppendUvarint(dst, uint64(g.n))
	kc := s.b.kc
	err := g.each(func(k K, e *nsEntries[N, V], count int) error {
		var err error
		for p := range count {
			sl := e.at(p)
			if dst, err = appendNsKey(dst, kc, s.nc, k, sl.ns); err != nil {
				return err
			}
			if dst, err = appendField(dst, s.vc, sl.v); err != nil {
				return valueErr(err)
			}
		}
		return nil
	})
	return dst, err
}

func (s *NamespacedValueState[K, N, V]) decodeEntries(r *reader, n int) (any, error) {
	g := newNsGroup[K, N, V](entryHint(r, n, 3))
	for range n {
		k, ns, err := decodeNsKey(r, s.b.kc, s.nc)
		if err != nil {
			return nil, err
		}
		v, err := decodeField(r, s.vc, "value")
		if err != nil {
			return nil, err
		}
		g.set(k, ns, v)
	}
	return g, nil
}

func (s *NamespacedValueState[K, N, V]) install(kg int, staged any) {
	s.t.install(kg, staged.(*nsGroup[K, N, V]))
}

func (s *NamespacedListState[K, N, V]) appendEntries(dst []byte, kg int) ([]byte, error) {
	g := &s.t.groups[kg-s.b.rng.Start]
	dst = binary.AppendUvarint(dst, uint64(g.n))
	kc := s.b.kc
	err := g.each(func(k K, e *nsEntries[N, []V], count int) error {
		var err error
		for p := range count {
			sl := e.at(p)
			if dst, err = appendNsKey(dst, kc, s.nc, k, sl.ns); err != nil {
				return err
			}
			if dst, err = appendItems(dst, s.vc, sl.v); err != nil {
				return err
			}
		}
		return nil
	})
	return dst, err
}

func (s *NamespacedListState[K, N, V]) decodeEntries(r *reader, n int) (any, error) {
	g := newNsGroup[K, N, []V](entryHint(r, n, 4))
	for range n {
		k, ns, err := decodeNsKey(r, s.b.kc, s.nc)
		if err != nil {
			return nil, err
		}
		vs, err := decodeItems(r, s.vc)
		if err != nil {
			return nil, err
		}
		g.set(k, ns, vs)
	}
	return g, nil
}

func (s *NamespacedListState[K, N, V]) install(kg int, staged any) {
	s.t.install(kg, staged.(*nsGroup[K, N, []V]))
}
