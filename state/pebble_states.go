package state

// The five state kinds on the Pebble backend (see pebble.go for the key
// layout). Each exported method of a state begins with a branch to its p*
// counterpart here when the backend is a Pebble backend; semantics are those
// of the memory backend (the table-driven tests and the property test in
// pebble_test.go run both). Values are decoded on every read: Get of a list
// returns a fresh slice, which satisfies I7 trivially.

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

// ---- the states' tables and storage on Pebble
//
// register makes the table of a state on the Pebble backend with
// attachPebble: a pebble* wrapper of the handle that overrides the table
// operations that differ from the memory backend's (counting, clearing and
// iterating a key group) and is also the handle's ext, its storage for the
// per-record methods. The wrappers embed the handle for what the two
// backends share (name, kind, type, codecs, prefix).

// pebbleTable is the table of a state on the Pebble backend.
type pebbleTable interface {
	table
	// checkEntry decodes one Pebble entry (key suffix after the state
	// prefix, and value; see pebble.go) with the state's codecs.
	checkEntry(suffix, v []byte) error
}

// attachPebble returns the table of handle s on the Pebble store p and sets
// s's ext to it.
func attachPebble(p *pebbleStore, s table) pebbleTable {
	switch s := s.(type) {
	case interface {
		attachPebble(*pebbleStore) pebbleTable
	}:
		return s.attachPebble(p)
	}
	panic(fmt.Sprintf("state: %T has no Pebble storage", s))
}

// pebbleKeyGroups are the table operations shared by the Pebble wrappers.
type pebbleKeyGroups[K comparable] struct {
	d  *desc[K]
	p  *pebbleStore
	pk []byte // key prefix of the state's entries (statePrefix)
}

// numKeysInKeyGroup counts the entries of the state in kg (distinct keys
// for map state).
func (g pebbleKeyGroups[K]) numKeysInKeyGroup(kg int) int {
	g.d.b.checkKeyGroup(kg)
	return g.p.countKeys(groupPrefix(kg, g.pk), g.d.kind == KindMap)
}

// numKeys is numKeysInKeyGroup over the backend's range.
func (g pebbleKeyGroups[K]) numKeys() int {
	n := 0
	for kg := g.d.b.rng.Start; kg <= g.d.b.rng.End; kg++ {
		n += g.numKeysInKeyGroup(kg)
	}
	return n
}

// clearKeyGroup drops the state's entries in kg with a range deletion.
func (g pebbleKeyGroups[K]) clearKeyGroup(kg int) {
	g.d.b.checkKeyGroup(kg)
	g.p.delPrefix(groupPrefix(kg, g.pk))
}

// eachEntry calls f for every entry of the state in key group kg, with a
// reader over the key suffix and the value.
func (g pebbleKeyGroups[K]) eachEntry(kg int, f func(r *reader, v []byte)) {
	g.d.b.checkKeyGroup(kg)
	g.p.scan(groupPrefix(kg, g.pk), func(rest, v []byte) bool {
		f(newReader(rest), v)
		return true
	})
}

// key returns the key of the current key's entry of the state.
func (g pebbleKeyGroups[K]) key() []byte { return g.d.b.pkey(g.p, g.pk) }

// ---- value state

type pebbleValue[K comparable, V any] struct {
	*ValueState[K, V]
	pebbleKeyGroups[K]
}

func (s *ValueState[K, V]) attachPebble(p *pebbleStore) pebbleTable {
	w := &pebbleValue[K, V]{s, pebbleKeyGroups[K]{&s.desc, p, statePrefix(s.name, s.kind)}}
	s.ext = w
	return w
}

func (w *pebbleValue[K, V]) numKeys() int { return w.pebbleKeyGroups.numKeys() }
func (w *pebbleValue[K, V]) numKeysInKeyGroup(kg int) int {
	return w.pebbleKeyGroups.numKeysInKeyGroup(kg)
}
func (w *pebbleValue[K, V]) clearKeyGroup(kg int) { w.pebbleKeyGroups.clearKeyGroup(kg) }

func (w *pebbleValue[K, V]) value() (V, bool) { return getValue(w.p, w.key(), w.vc, w.name) }

func (w *pebbleValue[K, V]) update(v V) { putValue(w.p, w.key(), w.vc, v, w.name) }

func (w *pebbleValue[K, V]) clear() { w.p.del(w.key()) }

func (w *pebbleValue[K, V]) forEach(kg int, f func(K, V)) {
	w.eachEntry(kg, func(r *reader, v []byte) {
		f(decField(r, w.b.kc, w.name, "key"), dec(w.vc, v, w.name, "value"))
	})
}

func (w *pebbleValue[K, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(w.b.kc)); err != nil {
		return err
	}
	return decErr(w.vc)(v)
}

// ---- list state

type pebbleList[K comparable, V any] struct {
	*ListState[K, V]
	pebbleKeyGroups[K]
}

func (s *ListState[K, V]) attachPebble(p *pebbleStore) pebbleTable {
	w := &pebbleList[K, V]{s, pebbleKeyGroups[K]{&s.desc, p, statePrefix(s.name, s.kind)}}
	s.ext = w
	return w
}

func (w *pebbleList[K, V]) numKeys() int { return w.pebbleKeyGroups.numKeys() }
func (w *pebbleList[K, V]) numKeysInKeyGroup(kg int) int {
	return w.pebbleKeyGroups.numKeysInKeyGroup(kg)
}
func (w *pebbleList[K, V]) clearKeyGroup(kg int) { w.pebbleKeyGroups.clearKeyGroup(kg) }

func (w *pebbleList[K, V]) get() []V {
	v, ok := w.p.get(w.key())
	if !ok {
		return nil
	}
	return decList(w.vc, v, w.name)
}

// addAll appends vs as a merge operand (pebble_merge.go).
func (w *pebbleList[K, V]) addAll(vs []V) {
	w.p.merge(w.key(), appendToList(nil, nil, w.vc, vs, w.name))
}

func (w *pebbleList[K, V]) update(vs []V) {
	w.p.set(w.key(), appendToList(nil, nil, w.vc, vs, w.name))
}

func (w *pebbleList[K, V]) clear() { w.p.del(w.key()) }

func (w *pebbleList[K, V]) forEach(kg int, f func(K, []V)) {
	w.eachEntry(kg, func(r *reader, v []byte) {
		f(decField(r, w.b.kc, w.name, "key"), decList(w.vc, v, w.name))
	})
}

func (w *pebbleList[K, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(w.b.kc)); err != nil {
		return err
	}
	return listErr(w.vc)(v)
}

// ---- map state

type pebbleMap[K comparable, UK comparable, UV any] struct {
	*MapState[K, UK, UV]
	pebbleKeyGroups[K]
}

func (s *MapState[K, UK, UV]) attachPebble(p *pebbleStore) pebbleTable {
	w := &pebbleMap[K, UK, UV]{s, pebbleKeyGroups[K]{&s.desc, p, statePrefix(s.name, s.kind)}}
	s.ext = w
	return w
}

func (w *pebbleMap[K, UK, UV]) numKeys() int { return w.pebbleKeyGroups.numKeys() }
func (w *pebbleMap[K, UK, UV]) numKeysInKeyGroup(kg int) int {
	return w.pebbleKeyGroups.numKeysInKeyGroup(kg)
}
func (w *pebbleMap[K, UK, UV]) clearKeyGroup(kg int) { w.pebbleKeyGroups.clearKeyGroup(kg) }

// ukey returns the key of user key uk of the current key.
func (w *pebbleMap[K, UK, UV]) ukey(uk UK) []byte {
	k := encField(w.key(), w.ukc, uk, w.name, "user key")
	w.p.kbuf = k
	return k
}

func (w *pebbleMap[K, UK, UV]) get(uk UK) (UV, bool) { return getValue(w.p, w.ukey(uk), w.uvc, w.name) }

func (w *pebbleMap[K, UK, UV]) put(uk UK, uv UV) { putValue(w.p, w.ukey(uk), w.uvc, uv, w.name) }

func (w *pebbleMap[K, UK, UV]) remove(uk UK) { w.p.del(w.ukey(uk)) }

func (w *pebbleMap[K, UK, UV]) len() int { return w.p.countKeys(w.key(), false) }

func (w *pebbleMap[K, UK, UV]) rangeMap(f func(UK, UV) bool) {
	w.p.scan(w.key(), func(rest, v []byte) bool {
		r := newReader(rest)
		return f(decField(r, w.ukc, w.name, "user key"), dec(w.uvc, v, w.name, "value"))
	})
}

func (w *pebbleMap[K, UK, UV]) clear() { w.p.delPrefix(w.key()) }

func (w *pebbleMap[K, UK, UV]) forEach(kg int, f func(K, UK, UV)) {
	w.eachEntry(kg, func(r *reader, v []byte) {
		k := decField(r, w.b.kc, w.name, "key")
		f(k, decField(r, w.ukc, w.name, "user key"), dec(w.uvc, v, w.name, "value"))
	})
}

// forEachAny calls f with every key of kg and its whole map.
func (w *pebbleMap[K, UK, UV]) forEachAny(kg int, f func(key, namespace, value any)) {
	var cur map[UK]UV
	var curKey K
	var prev []byte
	w.eachEntry(kg, func(r *reader, v []byte) {
		kf := firstField(r.Buf)
		if cur == nil || string(kf) != string(prev) {
			if cur != nil {
				f(curKey, nil, cur)
			}
			prev = append(prev[:0], kf...)
			curKey, cur = decField(r, w.b.kc, w.name, "key"), map[UK]UV{}
		} else {
			r.Off = len(kf)
		}
		cur[decField(r, w.ukc, w.name, "user key")] = dec(w.uvc, v, w.name, "value")
	})
	if cur != nil {
		f(curKey, nil, cur)
	}
}

func (w *pebbleMap[K, UK, UV]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(w.b.kc), decErr(w.ukc)); err != nil {
		return err
	}
	return decErr(w.uvc)(v)
}

// ---- namespaced value state

// nskey returns the key of namespace ns of the current key.
func nskey[K comparable, N comparable](g pebbleKeyGroups[K], nc Codec[N], ns N) []byte {
	k := encField(g.key(), nc, ns, g.d.name, "namespace")
	g.p.kbuf = k
	return k
}

type pebbleNsValue[K comparable, N comparable, V any] struct {
	*NamespacedValueState[K, N, V]
	pebbleKeyGroups[K]
}

func (s *NamespacedValueState[K, N, V]) attachPebble(p *pebbleStore) pebbleTable {
	w := &pebbleNsValue[K, N, V]{s, pebbleKeyGroups[K]{&s.desc, p, statePrefix(s.name, s.kind)}}
	s.ext = w
	return w
}

func (w *pebbleNsValue[K, N, V]) numKeys() int { return w.pebbleKeyGroups.numKeys() }
func (w *pebbleNsValue[K, N, V]) numKeysInKeyGroup(kg int) int {
	return w.pebbleKeyGroups.numKeysInKeyGroup(kg)
}
func (w *pebbleNsValue[K, N, V]) clearKeyGroup(kg int) { w.pebbleKeyGroups.clearKeyGroup(kg) }

func (w *pebbleNsValue[K, N, V]) value(ns N) (V, bool) {
	return getValue(w.p, nskey(w.pebbleKeyGroups, w.nc, ns), w.vc, w.name)
}

func (w *pebbleNsValue[K, N, V]) update(ns N, v V) {
	putValue(w.p, nskey(w.pebbleKeyGroups, w.nc, ns), w.vc, v, w.name)
}

func (w *pebbleNsValue[K, N, V]) clear(ns N) { w.p.del(nskey(w.pebbleKeyGroups, w.nc, ns)) }

func (w *pebbleNsValue[K, N, V]) merge(target N, sources []N, merge func(acc, next V) V) {
	acc, have := w.value(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		v, ok := w.value(src)
		if !ok {
			continue
		}
		w.clear(src)
		if have {
			acc = merge(acc, v)
		} else {
			acc, have = v, true
		}
	}
	if have {
		w.update(target, acc)
	}
}

func (w *pebbleNsValue[K, N, V]) forEach(kg int, f func(K, N, V)) {
	w.eachEntry(kg, func(r *reader, v []byte) {
		k := decField(r, w.b.kc, w.name, "key")
		f(k, decField(r, w.nc, w.name, "namespace"), dec(w.vc, v, w.name, "value"))
	})
}

func (w *pebbleNsValue[K, N, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(w.b.kc), decErr(w.nc)); err != nil {
		return err
	}
	return decErr(w.vc)(v)
}

// ---- namespaced list state

type pebbleNsList[K comparable, N comparable, V any] struct {
	*NamespacedListState[K, N, V]
	pebbleKeyGroups[K]
}

func (s *NamespacedListState[K, N, V]) attachPebble(p *pebbleStore) pebbleTable {
	w := &pebbleNsList[K, N, V]{s, pebbleKeyGroups[K]{&s.desc, p, statePrefix(s.name, s.kind)}}
	s.ext = w
	return w
}

func (w *pebbleNsList[K, N, V]) numKeys() int { return w.pebbleKeyGroups.numKeys() }
func (w *pebbleNsList[K, N, V]) numKeysInKeyGroup(kg int) int {
	return w.pebbleKeyGroups.numKeysInKeyGroup(kg)
}
func (w *pebbleNsList[K, N, V]) clearKeyGroup(kg int) { w.pebbleKeyGroups.clearKeyGroup(kg) }

func (w *pebbleNsList[K, N, V]) get(ns N) []V {
	v, ok := w.p.get(nskey(w.pebbleKeyGroups, w.nc, ns))
	if !ok {
		return nil
	}
	return decList(w.vc, v, w.name)
}

// addAll appends vs as a merge operand (pebble_merge.go).
func (w *pebbleNsList[K, N, V]) addAll(ns N, vs []V) {
	w.p.merge(nskey(w.pebbleKeyGroups, w.nc, ns), appendToList(nil, nil, w.vc, vs, w.name))
}

func (w *pebbleNsList[K, N, V]) update(ns N, vs []V) {
	w.p.set(nskey(w.pebbleKeyGroups, w.nc, ns), appendToList(nil, nil, w.vc, vs, w.name))
}

func (w *pebbleNsList[K, N, V]) clear(ns N) { w.p.del(nskey(w.pebbleKeyGroups, w.nc, ns)) }

func (w *pebbleNsList[K, N, V]) merge(target N, sources []N) {
	acc := w.get(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		if v := w.get(src); len(v) > 0 {
			w.clear(src)
			acc = append(acc, v...)
		}
	}
	if len(acc) > 0 {
		w.update(target, acc)
	}
}

func (w *pebbleNsList[K, N, V]) forEach(kg int, f func(K, N, []V)) {
	w.eachEntry(kg, func(r *reader, v []byte) {
		k := decField(r, w.b.kc, w.name, "key")
		f(k, decField(r, w.nc, w.name, "namespace"), decList(w.vc, v, w.name))
	})
}

func (w *pebbleNsList[K, N, V]) checkEntry(suffix, v []byte) error {
	if err := checkFields(suffix, decErr(w.b.kc), decErr(w.nc)); err != nil {
		return err
	}
	return listErr(w.vc)(v)
}
