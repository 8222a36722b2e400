package state

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/keygroup"
)

// SnapshotVersion is the version of the key-group snapshot format that
// SnapshotKeyGroup writes and the only one RestoreKeyGroup reads (see
// "Snapshot format" in the package documentation and docs/state-format.md).
const SnapshotVersion = 1

// ErrCorruptSnapshot is wrapped by the errors RestoreKeyGroup returns for a
// blob that is not well formed (truncated, overlong, counts or lengths that
// do not add up, unsorted state names, unknown kinds, trailing bytes).
// Packages timer and window wrap it too. It is codec.ErrCorruptSnapshot.
var ErrCorruptSnapshot = codec.ErrCorruptSnapshot

// ErrSnapshotVersion is wrapped by the error RestoreKeyGroup returns for a
// blob written in a format version this build does not read. Package timer
// wraps it too. It is codec.ErrSnapshotVersion.
var ErrSnapshotVersion = codec.ErrSnapshotVersion

// table is what a Backend needs of each registered state: what the exported
// Table view shows plus the snapshot hooks. All five state kinds implement
// it.
type table interface {
	Name() string
	Kind() Kind
	Type() string
	// numKeys is the number of entries over all key groups (Table.NumKeys).
	numKeys() int
	// numKeysInKeyGroup is numKeys restricted to key group kg.
	numKeysInKeyGroup(kg int) int
	// clearKeyGroup drops every entry of key group kg.
	clearKeyGroup(kg int)
	// forEachAny is Table.ForEachAny.
	forEachAny(kg int, f func(key, namespace, value any))
	// appendEntries appends the entry count and the entries of key group kg
	// (the body of a state section; kg is in range).
	appendEntries(dst []byte, kg int) ([]byte, error)
	// decodeEntries decodes n entries from r into a new group (the state's
	// own group type, boxed: a map, or a *nsGroup for namespaced state)
	// without touching the state.
	decodeEntries(r *reader, n int) (any, error)
	// install adds the entries of a map made by decodeEntries to key group
	// kg, replacing entries with the same key (and namespace).
	install(kg int, staged any)
	// handle returns the state handle (*ValueState, ...) the table
	// belongs to.
	handle() any
	// freeze pins the state's key groups with ps (one pin per key-group
	// slot) and returns a copy of the state that reads them as they are
	// now (see cow.go).
	freeze(ps []*pin) table
}

// pendingState is the raw content of a state found in restored snapshots
// before any state of that name was registered. Its entries stay encoded
// until the state registers (they need its codecs to be decoded) and are
// written back unchanged by snapshots taken before that.
type pendingState struct {
	kind   Kind
	groups map[int]*pendingGroup // by key group
}

// pendingGroup is the entries of one key group of a pending state: n entries
// laid out back to back as in a state section, after its count.
type pendingGroup struct {
	n       int
	entries []byte // owned copy
}

// SetKeyCodec sets the codec of the backend's keys, used by snapshots and
// restores of every state. nil restores the default, DefaultCodec[K](). Set
// it before the first RestoreKeyGroup or SnapshotKeyGroup: restored entries
// of states not registered yet are decoded with the key codec in place when
// they register.
func (b *Backend[K]) SetKeyCodec(c Codec[K]) {
	if c == nil {
		c = DefaultCodec[K]()
	}
	b.kc = c
}

// SnapshotKeyGroup returns the snapshot of key group kg: the entries of
// every registered state in kg, plus those restored for states that have not
// registered yet, in the versioned format described under "Snapshot format"
// in the package documentation. A key group without entries gives nil. The
// backend is not modified; the returned slice is the caller's.
//
// It returns an error if kg is outside the backend's range or a codec fails;
// the error names the state.
func (b *Backend[K]) SnapshotKeyGroup(kg int) ([]byte, error) { return b.store.snapshot(kg) }

// AppendSnapshotKeyGroup is SnapshotKeyGroup appending to dst, for callers
// that reuse a buffer. It appends nothing for a key group without entries,
// and on error returns dst with its original length.
func (b *Backend[K]) AppendSnapshotKeyGroup(dst []byte, kg int) ([]byte, error) {
	return b.store.appendSnapshot(dst, kg)
}

// appendKeyGroup appends the snapshot of key group kg of the given states
// and pending restored entries (a backend's, or a Frozen view's).
func appendKeyGroup(dst []byte, kg int, rng keygroup.Range, tables map[string]table, pending map[string]*pendingState) ([]byte, error) {
	if !rng.Contains(kg) {
		return dst, fmt.Errorf("state: cannot snapshot key group %d: outside this backend's key-group range %v", kg, rng)
	}
	var names []string
	for name, t := range tables {
		if t.numKeysInKeyGroup(kg) > 0 {
			names = append(names, name)
		}
	}
	for name, p := range pending {
		if _, ok := p.groups[kg]; ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return dst, nil
	}
	slices.Sort(names)

	orig := len(dst)
	dst = binary.AppendUvarint(dst, SnapshotVersion)
	dst = binary.AppendUvarint(dst, uint64(kg))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		dst = appendString(dst, name)
		if t, ok := tables[name]; ok {
			dst = binary.AppendUvarint(dst, uint64(t.Kind()))
			dst = append(dst, 0) // section length, see closeField
			start := len(dst)
			var err error
			if dst, err = t.appendEntries(dst, kg); err != nil {
				return dst[:orig], fmt.Errorf("state: snapshot of key group %d: state %q: %w", kg, name, err)
			}
			dst = closeField(dst, start)
			continue
		}
		p := pending[name]
		g := p.groups[kg]
		dst = binary.AppendUvarint(dst, uint64(p.kind))
		dst = append(dst, 0)
		start := len(dst)
		dst = binary.AppendUvarint(dst, uint64(g.n))
		dst = append(dst, g.entries...)
		dst = closeField(dst, start)
	}
	return dst, nil
}

// RestoreKeyGroup adds the entries of a blob written by SnapshotKeyGroup (by
// this or any backend, at any parallelism) for key group kg, which must be in
// this backend's range. A nil or empty blob is an empty key group.
//
// Entries of states already registered are decoded and inserted at once; a
// registered state whose kind differs from the blob's is an error naming the
// state. Entries of states not registered yet are checked for well-formedness
// and kept encoded; they are decoded with the state's codecs when it
// registers (Value, List, ...; a registration with another kind then fails),
// and written back unchanged by snapshots taken before that. So restore may
// run before or after the operator registers its state.
//
// The blob is not retained. Restored entries replace entries with the same
// key (and namespace) already in kg; the runtime restores into an empty
// backend. On error nothing is changed. Errors for malformed blobs wrap
// ErrCorruptSnapshot and for unknown format versions ErrSnapshotVersion;
// RestoreKeyGroup never panics on bad input.
func (b *Backend[K]) RestoreKeyGroup(kg int, blob []byte) error { return b.store.restore(kg, blob) }

// restoreMem is RestoreKeyGroup on the memory backend.
func (b *Backend[K]) restoreMem(kg int, blob []byte) error {
	if !b.rng.Contains(kg) {
		return fmt.Errorf("state: cannot restore key group %d: outside this backend's key-group range %v", kg, b.rng)
	}
	if len(blob) == 0 {
		return nil
	}
	wrap := func(err error) error { return fmt.Errorf("state: restoring key group %d: %w", kg, err) }
	r := newReader(blob)
	ver, err := r.Uvarint("format version")
	if err != nil {
		return wrap(err)
	}
	if ver != SnapshotVersion {
		return wrap(fmt.Errorf("%w %d (this build reads version %d)", ErrSnapshotVersion, ver, SnapshotVersion))
	}
	gotKG, err := r.Uvarint("key group")
	if err != nil {
		return wrap(err)
	}
	if gotKG != uint64(kg) {
		return wrap(fmt.Errorf("the blob is a snapshot of key group %d", gotKG))
	}
	// count bounds the number of states by the bytes left (a state takes
	// at least three: name length, kind, section length).
	nStates, err := r.Count("state count")
	if err != nil {
		return wrap(err)
	}
	type decoded struct {
		t      table
		staged any
	}
	type raw struct {
		name string
		kind Kind
		g    pendingGroup
	}
	var decs []decoded
	var raws []raw
	prev := ""
	for i := range nStates {
		nameBytes, err := r.Field("state name")
		if err != nil {
			return wrap(err)
		}
		name := string(nameBytes)
		if i > 0 && name <= prev {
			return wrap(r.Corrupt("state %q does not follow %q (names must be sorted and unique)", name, prev))
		}
		prev = name
		k, err := r.Uvarint("state kind")
		if err != nil {
			return wrap(err)
		}
		kind := Kind(k)
		if k < uint64(KindValue) || k > uint64(KindNamespacedList) {
			return wrap(r.Corrupt("state %q has unknown kind %d", name, k))
		}
		section, err := r.Field("state section")
		if err != nil {
			return wrap(err)
		}
		sr := newReader(section)
		n, err := sr.Count("entry count")
		if err != nil {
			return wrap(fmt.Errorf("state %q: %w", name, err))
		}
		if t, ok := b.tables[name]; ok {
			if t.Kind() != kind {
				return wrap(fmt.Errorf("state %q is registered as %s state %s but the snapshot holds %s state",
					name, t.Kind(), t.Type(), kind))
			}
			staged, err := t.decodeEntries(sr, n)
			if err == nil && !sr.Done() {
				err = sr.Corrupt("%d bytes after the last entry", sr.Remaining())
			}
			if err != nil {
				return wrap(fmt.Errorf("state %q: %w", name, err))
			}
			decs = append(decs, decoded{t, staged})
			continue
		}
		if p, ok := b.pending[name]; ok && p.kind != kind {
			return wrap(fmt.Errorf("state %q is %s state in this snapshot but %s state in a key group restored before",
				name, kind, p.kind))
		}
		start := sr.Off
		if err := skipEntries(sr, kind, n); err != nil {
			return wrap(fmt.Errorf("state %q: %w", name, err))
		}
		raws = append(raws, raw{name, kind, pendingGroup{n: n, entries: section[start:]}})
	}
	if !r.Done() {
		return wrap(r.Corrupt("%d bytes after the last state", r.Remaining()))
	}

	for _, d := range decs {
		d.t.install(kg, d.staged)
	}
	for _, rw := range raws {
		if b.pending == nil {
			b.pending = make(map[string]*pendingState)
		}
		p := b.pending[rw.name]
		if p == nil {
			p = &pendingState{kind: rw.kind, groups: make(map[int]*pendingGroup)}
			b.pending[rw.name] = p
		}
		g := p.groups[kg]
		if g == nil {
			g = &pendingGroup{}
			p.groups[kg] = g
		}
		g.n += rw.g.n
		g.entries = append(g.entries, rw.g.entries...) // copies: the blob is not retained
	}
	return nil
}

// loadPending decodes the restored entries waiting for the state being
// registered as name into s, which is new and not yet registered, and drops
// them. On error s is to be discarded and the entries stay pending.
func loadPending[K comparable](b *Backend[K], name string, kind Kind, typ string, s table) error {
	p, ok := b.pending[name]
	if !ok {
		return nil
	}
	if p.kind != kind {
		return fmt.Errorf("state: %q was restored from a snapshot as %s state; cannot register it as %s state %s",
			name, p.kind, kind, typ)
	}
	for kg, g := range p.groups {
		r := newReader(g.entries)
		staged, err := s.decodeEntries(r, g.n)
		if err == nil && !r.Done() {
			err = r.Corrupt("%d bytes after the last entry", r.Remaining())
		}
		if err != nil {
			return fmt.Errorf("state: registering %q: decoding its restored entries of key group %d: %w", name, kg, err)
		}
		s.install(kg, staged)
	}
	delete(b.pending, name)
	return nil
}

// skipEntries checks the framing of n entries of a state of the given kind
// without decoding them.
func skipEntries(r *reader, kind Kind, n int) error {
	// keyFields is the number of fields before the value part of an entry:
	// the key, and the namespace for namespaced kinds.
	keyFields := 1
	if kind == KindNamespacedValue || kind == KindNamespacedList {
		keyFields = 2
	}
	for range n {
		if err := r.SkipFields(keyFields, "key"); err != nil {
			return err
		}
		switch kind {
		case KindValue, KindNamespacedValue:
			if err := r.SkipFields(1, "value"); err != nil {
				return err
			}
		case KindList, KindNamespacedList:
			m, err := itemCount(r, "list length", 1)
			if err != nil {
				return err
			}
			if err := r.SkipFields(m, "list item"); err != nil {
				return err
			}
		case KindMap:
			m, err := itemCount(r, "map size", 2)
			if err != nil {
				return err
			}
			if err := r.SkipFields(2*m, "map entry"); err != nil {
				return err
			}
		}
	}
	return nil
}

// itemCount reads the item count of a list or map entry: at least one (the
// states hold no empty lists or maps) and at most what the remaining bytes
// can hold, at fieldsPerItem fields of one byte or more per item.
func itemCount(r *reader, what string, fieldsPerItem int) (int, error) {
	x, err := r.Uvarint(what)
	if err != nil {
		return 0, err
	}
	if x == 0 {
		return 0, r.Corrupt("%s is zero", what)
	}
	if x > uint64(r.Remaining()/fieldsPerItem) {
		return 0, r.Corrupt("%s %d exceeds what the %d remaining bytes can hold", what, x, r.Remaining())
	}
	return int(x), nil
}

// entryHint bounds a section's entry count n by its bytes: every entry has
// at least minFields fields of one byte or more. It protects the map
// preallocation in decodeEntries from absurd counts.
func entryHint(r *reader, n, minFields int) int {
	return min(n, r.Remaining()/minFields)
}
