package state

// The five state kinds on the Pebble backend (see pebble.go for the key
// layout). Each exported method of a state begins with a branch to its p*
// counterpart here when the backend is a Pebble backend; semantics are those
// of the memory backend (the table-driven tests and the property test in
// pebble_test.go run both). Values are decoded on every read: Get of a list
// returns a fresh slice, which satisfies guarantee 7 trivially.

import (
	"encoding/binary"
	"fmt"
)

func encPanic(name, what string, err error) {
	panic(fmt.Sprintf("state: Pebble backend: state %q: encoding %s: %v", name, what, err))
}

func decPanic(name, what string, err error) {
	panic(fmt.Sprintf("state: Pebble backend: state %q: decoding %s: %v", name, what, err))
}

// enc encodes v with c after dst, panicking on a codec error.
func enc[T any](dst []byte, c Codec[T], v T, name, what string) []byte {
	out, err := c.Append(dst, v)
	if err != nil {
		encPanic(name, what, err)
	}
	return out
}

// encField is enc with a length prefix.
func encField[T any](dst []byte, c Codec[T], v T, name, what string) []byte {
	out, err := appendField(dst, c, v)
	if err != nil {
		encPanic(name, what, err)
	}
	return out
}

// getValue reads and decodes the value stored at k, if any.
func getValue[T any](p *pebbleStore, k []byte, c Codec[T], name string) (T, bool) {
	v, ok := p.get(k)
	if !ok {
		var zero T
		return zero, false
	}
	return dec(c, v, name, "value"), true
}

// putValue encodes v (into the store's value buffer) and stores it at k.
func putValue[T any](p *pebbleStore, k []byte, c Codec[T], v T, name string) {
	p.vbuf = enc(p.vbuf[:0], c, v, name, "value")
	p.set(k, p.vbuf)
}

func dec[T any](c Codec[T], b []byte, name, what string) T {
	v, err := c.Decode(b)
	if err != nil {
		decPanic(name, what, err)
	}
	return v
}

func decField[T any](r *reader, c Codec[T], name, what string) T {
	v, err := decodeField(r, c, what)
	if err != nil {
		decPanic(name, what, err)
	}
	return v
}

// decList decodes a list value ("n item*n").
func decList[V any](c Codec[V], v []byte, name string) []V {
	vs, err := decodeItems(newReader(v), c)
	if err != nil {
		decPanic(name, "list", err)
	}
	return vs
}

// appendToList returns the list value old (nil: none) with vs appended.
func appendToList[V any](dst, old []byte, c Codec[V], vs []V, name string) []byte {
	n, m := uint64(0), 0
	if len(old) > 0 {
		n, m = binary.Uvarint(old)
		if m <= 0 {
			decPanic(name, "list length", fmt.Errorf("%w: bad varint", ErrCorruptSnapshot))
		}
	}
	dst = binary.AppendUvarint(dst, n+uint64(len(vs)))
	dst = append(dst, old[m:]...)
	for _, v := range vs {
		dst = encField(dst, c, v, name, "list item")
	}
	return dst
}

// eachEntry calls f for every entry of the state with prefix pk in key
// group kg, with a reader over the key suffix and the value.
func (b *Backend[K]) eachEntry(kg int, pk []byte, f func(r *reader, v []byte)) {
	b.checkKeyGroup(kg)
	b.pb.scan(groupPrefix(kg, pk), func(rest, v []byte) bool {
		f(newReader(rest), v)
		return true
	})
}

// checkKeyOnly checks that suffix is exactly one key field the key codec
// reads.
func checkFields(suffix []byte, decs ...func([]byte) error) error {
	r := newReader(suffix)
	for _, d := range decs {
		b, err := r.Field("key")
		if err != nil {
			return err
		}
		if err := d(b); err != nil {
			return err
		}
	}
	if !r.Done() {
		return r.Corrupt("%d bytes after the key", r.Remaining())
	}
	return nil
}

func decErr[T any](c Codec[T]) func([]byte) error {
	return func(b []byte) error { _, err := c.Decode(b); return err }
}

func listErr[V any](c Codec[V]) func([]byte) error {
	return func(b []byte) error {
		r := newReader(b)
		_, err := decodeItems(r, c)
		if err == nil && !r.Done() {
			err = r.Corrupt("%d bytes after the list", r.Remaining())
		}
		return err
	}
}

// ---- value state

func (s *ValueState[K, V]) pValue() (V, bool) {
	return getValue(s.b.pb, s.b.pkey(s.pk), s.vc, s.name)
}

func (s *ValueState[K, V]) pUpdate(v V) { putValue(s.b.pb, s.b.pkey(s.pk), s.vc, v, s.name) }

func (s *ValueState[K, V]) pClear() { s.b.pb.del(s.b.pkey(s.pk)) }

func (s *ValueState[K, V]) pForEach(kg int, f func(K, V)) {
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		f(decField(r, s.b.kc, s.name, "key"), dec(s.vc, v, s.name, "value"))
	})
}

func (s *ValueState[K, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(s.b.kc)); err != nil {
		return err
	}
	return decErr(s.vc)(v)
}

// ---- list state

func (s *ListState[K, V]) pGet() []V {
	v, ok := s.b.pb.get(s.b.pkey(s.pk))
	if !ok {
		return nil
	}
	return decList(s.vc, v, s.name)
}

// pAddAll appends vs as a merge operand (pebble_merge.go).
func (s *ListState[K, V]) pAddAll(vs []V) {
	s.b.pb.merge(s.b.pkey(s.pk), appendToList(nil, nil, s.vc, vs, s.name))
}

func (s *ListState[K, V]) pUpdate(vs []V) {
	p := s.b.pb
	p.set(s.b.pkey(s.pk), appendToList(nil, nil, s.vc, vs, s.name))
}

func (s *ListState[K, V]) pClear() { s.b.pb.del(s.b.pkey(s.pk)) }

func (s *ListState[K, V]) pForEach(kg int, f func(K, []V)) {
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		f(decField(r, s.b.kc, s.name, "key"), decList(s.vc, v, s.name))
	})
}

func (s *ListState[K, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(s.b.kc)); err != nil {
		return err
	}
	return listErr(s.vc)(v)
}

// ---- map state

// ukey returns the key of user key uk of the current key.
func (s *MapState[K, UK, UV]) ukey(uk UK) []byte {
	k := encField(s.b.pkey(s.pk), s.ukc, uk, s.name, "user key")
	s.b.pb.kbuf = k
	return k
}

func (s *MapState[K, UK, UV]) pGet(uk UK) (UV, bool) {
	return getValue(s.b.pb, s.ukey(uk), s.uvc, s.name)
}

func (s *MapState[K, UK, UV]) pPut(uk UK, uv UV) { putValue(s.b.pb, s.ukey(uk), s.uvc, uv, s.name) }

func (s *MapState[K, UK, UV]) pRemove(uk UK) { s.b.pb.del(s.ukey(uk)) }

func (s *MapState[K, UK, UV]) pLen() int {
	return s.b.pb.countKeys(s.b.pkey(s.pk), false)
}

func (s *MapState[K, UK, UV]) pRange(f func(UK, UV) bool) {
	s.b.pb.scan(s.b.pkey(s.pk), func(rest, v []byte) bool {
		r := newReader(rest)
		return f(decField(r, s.ukc, s.name, "user key"), dec(s.uvc, v, s.name, "value"))
	})
}

func (s *MapState[K, UK, UV]) pClear() { s.b.pb.delPrefix(s.b.pkey(s.pk)) }

func (s *MapState[K, UK, UV]) pForEach(kg int, f func(K, UK, UV)) {
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		k := decField(r, s.b.kc, s.name, "key")
		f(k, decField(r, s.ukc, s.name, "user key"), dec(s.uvc, v, s.name, "value"))
	})
}

// pForEachMap calls f with every key of kg and its whole map.
func (s *MapState[K, UK, UV]) pForEachMap(kg int, f func(K, map[UK]UV)) {
	var cur map[UK]UV
	var curKey K
	var prev []byte
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		kf := firstField(r.Buf)
		if cur == nil || string(kf) != string(prev) {
			if cur != nil {
				f(curKey, cur)
			}
			prev = append(prev[:0], kf...)
			curKey, cur = decField(r, s.b.kc, s.name, "key"), map[UK]UV{}
		} else {
			r.Off = len(kf)
		}
		cur[decField(r, s.ukc, s.name, "user key")] = dec(s.uvc, v, s.name, "value")
	})
	if cur != nil {
		f(curKey, cur)
	}
}

func (s *MapState[K, UK, UV]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(s.b.kc), decErr(s.ukc)); err != nil {
		return err
	}
	return decErr(s.uvc)(v)
}

// ---- namespaced value state

// nskey returns the key of namespace ns of the current key.
func nskey[K comparable, N comparable](b *Backend[K], pk []byte, nc Codec[N], ns N, name string) []byte {
	k := encField(b.pkey(pk), nc, ns, name, "namespace")
	b.pb.kbuf = k
	return k
}

func (s *NamespacedValueState[K, N, V]) pValue(ns N) (V, bool) {
	return getValue(s.b.pb, nskey(s.b, s.pk, s.nc, ns, s.name), s.vc, s.name)
}

func (s *NamespacedValueState[K, N, V]) pUpdate(ns N, v V) {
	putValue(s.b.pb, nskey(s.b, s.pk, s.nc, ns, s.name), s.vc, v, s.name)
}

func (s *NamespacedValueState[K, N, V]) pClear(ns N) {
	s.b.pb.del(nskey(s.b, s.pk, s.nc, ns, s.name))
}

func (s *NamespacedValueState[K, N, V]) pMerge(target N, sources []N, merge func(acc, next V) V) {
	acc, have := s.pValue(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		v, ok := s.pValue(src)
		if !ok {
			continue
		}
		s.pClear(src)
		if have {
			acc = merge(acc, v)
		} else {
			acc, have = v, true
		}
	}
	if have {
		s.pUpdate(target, acc)
	}
}

func (s *NamespacedValueState[K, N, V]) pForEach(kg int, f func(K, N, V)) {
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		k := decField(r, s.b.kc, s.name, "key")
		f(k, decField(r, s.nc, s.name, "namespace"), dec(s.vc, v, s.name, "value"))
	})
}

func (s *NamespacedValueState[K, N, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(s.b.kc), decErr(s.nc)); err != nil {
		return err
	}
	return decErr(s.vc)(v)
}

// ---- namespaced list state

func (s *NamespacedListState[K, N, V]) pGet(ns N) []V {
	v, ok := s.b.pb.get(nskey(s.b, s.pk, s.nc, ns, s.name))
	if !ok {
		return nil
	}
	return decList(s.vc, v, s.name)
}

// pAddAll appends vs as a merge operand (pebble_merge.go).
func (s *NamespacedListState[K, N, V]) pAddAll(ns N, vs []V) {
	s.b.pb.merge(nskey(s.b, s.pk, s.nc, ns, s.name), appendToList(nil, nil, s.vc, vs, s.name))
}

func (s *NamespacedListState[K, N, V]) pUpdate(ns N, vs []V) {
	s.b.pb.set(nskey(s.b, s.pk, s.nc, ns, s.name), appendToList(nil, nil, s.vc, vs, s.name))
}

func (s *NamespacedListState[K, N, V]) pClear(ns N) {
	s.b.pb.del(nskey(s.b, s.pk, s.nc, ns, s.name))
}

func (s *NamespacedListState[K, N, V]) pMerge(target N, sources []N) {
	acc := s.pGet(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		if v := s.pGet(src); len(v) > 0 {
			s.pClear(src)
			acc = append(acc, v...)
		}
	}
	if len(acc) > 0 {
		s.pUpdate(target, acc)
	}
}

func (s *NamespacedListState[K, N, V]) pForEach(kg int, f func(K, N, []V)) {
	s.b.eachEntry(kg, s.pk, func(r *reader, v []byte) {
		k := decField(r, s.b.kc, s.name, "key")
		f(k, decField(r, s.nc, s.name, "namespace"), decList(s.vc, v, s.name))
	})
}

func (s *NamespacedListState[K, N, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(s.b.kc), decErr(s.nc)); err != nil {
		return err
	}
	return listErr(s.vc)(v)
}

// ---- counting and clearing, shared

// pNumKeysInKeyGroup counts the entries of the state with prefix pk in kg
// (distinct keys for map state).
func (b *Backend[K]) pNumKeysInKeyGroup(kg int, pk []byte, kind Kind) int {
	b.checkKeyGroup(kg)
	return b.pb.countKeys(groupPrefix(kg, pk), kind == KindMap)
}

// pNumKeys is pNumKeysInKeyGroup over the backend's range.
func (b *Backend[K]) pNumKeys(pk []byte, kind Kind) int {
	n := 0
	for kg := b.rng.Start; kg <= b.rng.End; kg++ {
		n += b.pNumKeysInKeyGroup(kg, pk, kind)
	}
	return n
}

// pClearKeyGroup drops the state's entries in kg with a range deletion.
func (b *Backend[K]) pClearKeyGroup(kg int, pk []byte) {
	b.checkKeyGroup(kg)
	b.pb.delPrefix(groupPrefix(kg, pk))
}
