package state

// The Pebble storage of a Backend (Options.Kind == BackendPebble).
//
// Invariants:
//
//	P1. Layout. Every entry of every state is one Pebble key
//
//     kg:uint16 BE | field(name) | kind:byte | field(key) | suffix
//
//     where field is a uvarint length and the bytes (as in the snapshot
//     format), key is written by the backend's key codec, and suffix is
//     field(namespace) for namespaced state, field(userKey) for map state
//     and empty otherwise. The value is the state codec's bytes for value,
//     map and namespaced value state, and "n:uvarint item:field*n" (n >= 1,
//     the list encoding of the snapshot format) for list state. So a key
//     group is one contiguous key range, a (key group, state) and a (key
//     group, state, key) are prefixes (the length prefixes keep them
//     unambiguous), and a snapshot section is a byte-level rewrite of the
//     range: no codec runs for a savepoint or a restore.
//	P2. The state is identified by its name rather than a numeric id, so the
//	    key space needs no id table that would have to be checkpointed and
//	    merged on rescale; Pebble's prefix compression keeps the cost low.
//	P3. No empty entries: clearing, emptying a list or removing the last user
//	    key of a map deletes Pebble keys, so counts and snapshots see live
//	    entries only (the package's I4).
//	P4. Entries restored for a state not registered yet sit in Pebble
//	    encoded, exactly as the memory backend's pending entries: when a
//	    state of that name registers, a kind mismatch is an error, and
//	    entries restored from canonical blobs are decoded once with the
//	    state's codecs (so a type change fails at registration, not later).
//	P5. The working database is not a source of truth: its write-ahead log
//	    is written without fsync (it exists so that a native checkpoint can
//	    capture the memtable without flushing it, pebble_native.go), and a
//	    restart restores from a checkpoint. Its directory is emptied on Open
//	    and removed on Close.
//	P6. Errors of Pebble or of a codec on the per-record path (a full disk,
//	    a key codec that fails) panic with a message naming the state: the
//	    state API has no error results, and the runtime turns a panic of an
//	    operator into a failed job that restarts from its last checkpoint.
//	P7. States touch the database only through pebbleStore's get, set,
//	    del, merge, delPrefix and scan, which keep the write-back cache
//	    (pebble_cache.go, Options.CacheBytes) coherent (timers use the
//	    database directly, in a key range the cache never holds:
//	    pebble_timers.go); every other
//	    reader of the database (snapshots, Freeze, native checkpoints,
//	    restores) flushes the cache first, so P1-P5 hold of the
//	    database whenever anything but a point read looks at it.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/keygroup"
)

// The kinds of backend, for Options.Kind.
const (
	// BackendMemory keeps state in Go maps (the default).
	BackendMemory = "memory"
	// BackendPebble keeps state in a Pebble database on local disk.
	BackendPebble = "pebble"
)

// Options selects and configures the backend Open makes.
type Options struct {
	// Kind is BackendMemory (also when empty) or BackendPebble.
	Kind string
	// Dir is the working directory of the Pebble database (one per
	// backend). Open empties it first and Close removes it. Empty means a
	// new directory under os.TempDir. Ignored by the memory backend.
	Dir string
	// MemTableSize is Pebble's memtable size in bytes (0: 8 MiB). A native
	// checkpoint does not flush it (it copies the write-ahead log instead),
	// so it bounds the write-ahead log a checkpoint carries as private
	// files and replays on restore, not the synchronous pause.
	MemTableSize uint64
	// FS is the file system of the working database; nil means the
	// operating system's (vfs.Default). Its fsyncs are skipped (invariant
	// 5). It must be the operating system's or a wrapper over it (tests
	// inject faults through one, internal/faultfs): Dir is emptied and
	// removed, and native checkpoints are uploaded and restored, through
	// the operating system.
	FS vfs.FS
	// CacheBytes bounds the write-back cache in front of the database
	// (pebble_cache.go): per-record reads and writes go to a Go map of
	// encoded entries, written to Pebble in one batch when it passes
	// this size and before every scan, snapshot and checkpoint. 0 means
	// DefaultCacheBytes (4 MiB), or half of MemTableSize if that is
	// smaller (a larger batch would skip the memtable and make Pebble
	// flush); NoCache (-1) turns the cache off, so
	// that every access reads or writes Pebble. Other negative values
	// are an error.
	CacheBytes int64
}

// Open returns an empty backend of the kind o selects for the key groups of
// r, with no current key and DefaultCodec[K]() as its key codec. Close it
// when done: a Pebble backend holds files and a directory.
func Open[K comparable](o Options, r keygroup.Range) (*Backend[K], error) {
	switch o.Kind {
	case "", BackendMemory:
		return NewBackend[K](r), nil
	case BackendPebble:
	default:
		return nil, fmt.Errorf("state: unknown state backend %q (use %q or %q)", o.Kind, BackendMemory, BackendPebble)
	}
	if err := checkCacheBytes(o.CacheBytes); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "weir-pebble-")
		if err != nil {
			return nil, fmt.Errorf("state: creating the Pebble working directory: %w", err)
		}
		dir = d
	} else if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("state: emptying the Pebble working directory %s: %w", dir, err)
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	db, err := openPebble(fs, dir, o.MemTableSize, false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := NewBackend[K](r)
	p := &pebbleStore{db: db, dir: dir, memTable: o.MemTableSize, fs: fs}
	switch o.CacheBytes {
	case NoCache:
	case 0:
		// A batch over half the memtable skips it and makes Pebble flush.
		p.cache = newWCache(min(DefaultCacheBytes, int64(cmp.Or(o.MemTableSize, 8<<20)/2)))
	default:
		p.cache = newWCache(o.CacheBytes)
	}
	b.store = &pebbleBackend[K]{b: b, p: p}
	return b, nil
}

// openPebble opens (creating it if needed) the database in dir. The
// write-ahead log is on (P5), so opening a native checkpoint
// replays the writes its memtable held, also read-only (they are then
// served from memory).
func openPebble(fs vfs.FS, dir string, memTable uint64, readOnly bool) (*pebble.DB, error) {
	if memTable == 0 {
		memTable = 8 << 20
	}
	db, err := pebble.Open(dir, &pebble.Options{
		MemTableSize: memTable,
		ReadOnly:     readOnly,
		Merger:       listMerger, // list appends (pebble_merge.go)
		Logger:       quietLogger{},
		FS:           nosyncFS{fs},
	})
	if err != nil {
		return nil, fmt.Errorf("state: opening the Pebble database in %s: %w", dir, err)
	}
	return db, nil
}

// quietLogger drops Pebble's informational messages and keeps errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// pebbleBackend is the keyedStore of a backend opened with Kind
// BackendPebble (Open): every entry is in the Pebble database of p, written
// and read through the states' Pebble wrappers (pebble_states.go), which
// attach makes.
type pebbleBackend[K comparable] struct {
	b      *Backend[K]
	p      *pebbleStore
	closed bool
}

// pebble returns the Pebble store of b, nil for the memory backend: for
// the features only the Pebble backend has (native checkpoints, timers in
// the database).
func (b *Backend[K]) pebble() *pebbleStore {
	if pb, ok := b.store.(*pebbleBackend[K]); ok {
		return pb.p
	}
	return nil
}

func (pb *pebbleBackend[K]) kind() string { return BackendPebble }

func (pb *pebbleBackend[K]) attach(s table) table { return attachPebble(pb.p, s) }

func (pb *pebbleBackend[K]) load(name string, kind Kind, typ string, t table) error {
	return pb.b.checkRegisterPebble(pb.p, name, kind, typ, t)
}

func (pb *pebbleBackend[K]) clearKeyGroup(kg int) { pb.b.clearKeyGroupPebble(pb.p, kg) }

func (pb *pebbleBackend[K]) snapshot(kg int) ([]byte, error) {
	dst, err := pb.b.snapshotPebble(pb.p, nil, kg)
	if len(dst) == 0 {
		dst = nil
	}
	return dst, err
}

func (pb *pebbleBackend[K]) appendSnapshot(dst []byte, kg int) ([]byte, error) {
	return pb.b.snapshotPebble(pb.p, dst, kg)
}

func (pb *pebbleBackend[K]) restore(kg int, blob []byte) error {
	return pb.b.restorePebble(pb.p, kg, blob)
}

func (pb *pebbleBackend[K]) freeze() *Frozen[K] { return pb.b.freezePebble(pb.p) }

// close closes the database and removes the working directory, once.
func (pb *pebbleBackend[K]) close() error {
	if pb.closed {
		return nil
	}
	pb.closed = true
	p := pb.p
	p.dropCache() // the database is removed (PC6)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.views > 0 {
		// A snapshot's asynchronous part still reads a Pebble snapshot:
		// the last view to close closes the database.
		p.closing = true
		return nil
	}
	return p.closeLocked()
}

// closeLocked closes the database and removes its directory; p.mu is held.
func (p *pebbleStore) closeLocked() error {
	err := p.db.Close()
	if rerr := os.RemoveAll(p.dir); err == nil && rerr != nil {
		err = fmt.Errorf("state: removing the Pebble working directory: %w", rerr)
	}
	return err
}

// pebbleStore is the Pebble side of a Backend.
type pebbleStore struct {
	db       *pebble.DB
	dir      string
	memTable uint64
	fs       vfs.FS // Options.FS
	// keyField is field(key codec(current key)), valid while keyEpoch is
	// the backend's epoch.
	keyField []byte
	keyEpoch uint64
	kbuf     []byte // scratch for keys
	vbuf     []byte // scratch for values
	mbuf     []byte // scratch for merged list values
	// cache is the write-back cache (pebble_cache.go), nil when
	// Options.CacheBytes is NoCache.
	cache *wcache
	// unchecked names states with entries restored from canonical blobs
	// that no registered state has decoded yet (P4).
	unchecked map[string]bool
	// instance belongs to native snapshots (pebble_native.go).
	instance string
	// mu guards views and closing, shared with the goroutines of Frozen
	// views: Close while a view is open defers closing the database to
	// the view's Close.
	mu      sync.Mutex
	views   int
	closing bool
}

var noSync = pebble.NoSync

// statePrefix returns field(name) kind, the part of a key after the key
// group that names a state.
func statePrefix(name string, kind Kind) []byte {
	return append(appendString(nil, name), byte(kind))
}

// kgPrefix returns the 2-byte prefix of key group kg.
func kgPrefix(kg int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(kg)) }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // no upper bound
}

// pkey returns the key of the current key's entry of the state with prefix
// pk (from statePrefix), in scratch space valid until the next pkey.
func (b *Backend[K]) pkey(p *pebbleStore, pk []byte) []byte {
	b.slotIndex() // panics without a current key
	if p.keyEpoch != b.epoch {
		kf, err := appendField(p.keyField[:0], b.kc, b.key)
		if err != nil {
			panic(fmt.Sprintf("state: encoding key %v for the Pebble backend: %v", b.key, err))
		}
		p.keyField, p.keyEpoch = kf, b.epoch
	}
	k := binary.BigEndian.AppendUint16(p.kbuf[:0], uint16(b.kg))
	k = append(append(k, pk...), p.keyField...)
	p.kbuf = k
	return k
}

// groupPrefix returns kg | pk, the prefix of a state's entries in kg.
func groupPrefix(kg int, pk []byte) []byte { return append(kgPrefix(kg), pk...) }

func pebblePanic(what string, err error) {
	panic(fmt.Sprintf("state: Pebble backend: %s: %v", what, err))
}

// get, set, merge, del, delPrefix and scan are the only accesses of the
// database by the states: they keep the write-back cache coherent
// (pebble_cache.go).

// get returns a copy of the value of k (valid until the next call of a
// pebbleStore method), and whether it exists.
func (p *pebbleStore) get(k []byte) ([]byte, bool) {
	if p.cache != nil {
		return p.cacheGet(k)
	}
	return p.dbGet(k)
}

// dbGet is get from the database alone.
func (p *pebbleStore) dbGet(k []byte) ([]byte, bool) {
	v, c, err := p.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		pebblePanic("get", err)
	}
	p.vbuf = append(p.vbuf[:0], v...)
	c.Close()
	return p.vbuf, true
}

// set makes v (copied) the value of k.
func (p *pebbleStore) set(k, v []byte) {
	if p.cache != nil {
		p.cacheSet(k, v)
		return
	}
	if err := p.db.Set(k, v, noSync); err != nil {
		pebblePanic("set", err)
	}
}

// merge adds a merge operand to k (a list append: pebble_merge.go).
func (p *pebbleStore) merge(k, v []byte) {
	if p.cache != nil {
		p.cacheMerge(k, v)
		return
	}
	if err := p.db.Merge(k, v, noSync); err != nil {
		pebblePanic("merge", err)
	}
}

// del deletes k.
func (p *pebbleStore) del(k []byte) {
	if p.cache != nil {
		p.cacheDel(k)
		return
	}
	if err := p.db.Delete(k, noSync); err != nil {
		pebblePanic("delete", err)
	}
}

// delPrefix deletes every key with prefix pfx by a range deletion.
func (p *pebbleStore) delPrefix(pfx []byte) {
	p.mustFlush()
	if err := p.dropPrefix(pfx); err != nil {
		pebblePanic("iterate", err)
	}
	if err := p.db.DeleteRange(pfx, prefixEnd(pfx), noSync); err != nil {
		pebblePanic("delete range", err)
	}
}

// scan calls f for every entry with prefix pfx in key order, with the key
// after the prefix and the value (both valid during the call only), until f
// returns false. The iterator sees the database as of the call (after a
// flush of the write-back cache), so f may write.
func (p *pebbleStore) scan(pfx []byte, f func(rest, v []byte) bool) {
	p.mustFlush()
	if err := scanDB(p.db, pfx, f); err != nil {
		pebblePanic("iterate", err)
	}
}

// pebbleView is what scans need of a database or a snapshot of one.
type pebbleView interface {
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
	Close() error
}

var _ pebbleView = (*pebble.Snapshot)(nil)

func scanDB(db pebbleView, pfx []byte, f func(rest, v []byte) bool) error {
	lo := slices.Clone(pfx)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if !f(it.Key()[len(lo):], v) {
			break
		}
	}
	return it.Close()
}

// countKeys counts the distinct first fields (keys) of the entries with
// prefix pfx: the keys of a map state, the entries of the others when
// distinct is false.
func (p *pebbleStore) countKeys(pfx []byte, distinct bool) int {
	n := 0
	var prev []byte
	p.scan(pfx, func(rest, _ []byte) bool {
		if distinct {
			kf := firstField(rest)
			if prev != nil && bytes.Equal(kf, prev) {
				return true
			}
			prev = append(prev[:0], kf...)
			if prev == nil {
				prev = []byte{}
			}
		}
		n++
		return true
	})
	return n
}

// firstField returns the leading field (length prefix included) of b, or b
// if it is malformed.
func firstField(b []byte) []byte {
	x, n := binary.Uvarint(b)
	if n <= 0 || x > uint64(len(b)-n) {
		return b
	}
	return b[:n+int(x)]
}

// fieldBody returns the bytes of the leading field of b and what follows.
func fieldBody(b []byte) (body, rest []byte, ok bool) {
	x, n := binary.Uvarint(b)
	if n <= 0 || x > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(x)], b[n+int(x):], true
}

// clearKeyGroupPebble deletes key group kg with one range deletion.
func (b *Backend[K]) clearKeyGroupPebble(p *pebbleStore, kg int) {
	b.checkKeyGroup(kg)
	p.delPrefix(kgPrefix(kg))
}

// checkRegisterPebble checks the entries stored under name before a state
// of that name and kind registers (P4).
func (b *Backend[K]) checkRegisterPebble(p *pebbleStore, name string, kind Kind, typ string, s table) error {
	np := appendString(nil, name)
	check := p.unchecked[name]
	var err error
	for kg := b.rng.Start; kg <= b.rng.End && err == nil; kg++ {
		p.scan(append(kgPrefix(kg), np...), func(rest, v []byte) bool {
			if Kind(rest[0]) != kind {
				err = fmt.Errorf("state: %q was restored from a snapshot as %s state; cannot register it as %s state %s",
					name, Kind(rest[0]), kind, typ)
				return false
			}
			if check {
				if cerr := s.(pebbleTable).checkEntry(rest[1:], v); cerr != nil {
					err = fmt.Errorf("state: registering %q: decoding its restored entries of key group %d: %w", name, kg, cerr)
					return false
				}
			}
			return true
		})
	}
	if err == nil {
		delete(p.unchecked, name)
	}
	return err
}

// snapshotPebble appends the canonical snapshot of key group kg (see
// AppendSnapshotKeyGroup), rewriting the key group's range byte by byte.
func (b *Backend[K]) snapshotPebble(p *pebbleStore, dst []byte, kg int) ([]byte, error) {
	if !b.rng.Contains(kg) {
		return dst, fmt.Errorf("state: cannot snapshot key group %d: outside this backend's key-group range %v", kg, b.rng)
	}
	if err := p.flush(); err != nil {
		return dst, fmt.Errorf("state: snapshot of key group %d: %w", kg, err)
	}
	secs, err := sectionsOf(p.db, kg)
	if err != nil {
		return dst, fmt.Errorf("state: snapshot of key group %d: %w", kg, err)
	}
	return appendSections(dst, kg, secs), nil
}

// section is one state's part of a key-group snapshot.
type section struct {
	name    string
	kind    Kind
	n       int
	entries []byte
}

// sectionsOf reads the sections of key group kg from db, sorted by name.
func sectionsOf(db pebbleView, kg int) ([]*section, error) {
	var secs []*section
	var cur *section
	var mapKey, mapItems []byte // the map key being gathered and its items
	mapN := 0
	flushMap := func() {
		if cur != nil && cur.kind == KindMap && mapN > 0 {
			cur.entries = append(cur.entries, mapKey...)
			cur.entries = binary.AppendUvarint(cur.entries, uint64(mapN))
			cur.entries = append(cur.entries, mapItems...)
			cur.n++
		}
		mapKey, mapItems, mapN = mapKey[:0], mapItems[:0], 0
	}
	var bad error
	err := scanDB(db, kgPrefix(kg), func(rest, v []byte) bool {
		if isTimerKey(rest) {
			return false // the timers follow the states (pebble_timers.go)
		}
		name, after, ok := fieldBody(rest)
		if !ok || len(after) == 0 {
			bad = fmt.Errorf("%w: malformed Pebble key %x", ErrCorruptSnapshot, rest)
			return false
		}
		kind, suffix := Kind(after[0]), after[1:]
		if cur == nil || cur.name != string(name) || cur.kind != kind {
			flushMap()
			cur = &section{name: string(name), kind: kind}
			secs = append(secs, cur)
		}
		switch kind {
		case KindValue, KindNamespacedValue:
			cur.entries = append(cur.entries, suffix...)
			cur.entries = binary.AppendUvarint(cur.entries, uint64(len(v)))
			cur.entries = append(cur.entries, v...)
			cur.n++
		case KindList, KindNamespacedList:
			cur.entries = append(append(cur.entries, suffix...), v...)
			cur.n++
		case KindMap:
			kf := firstField(suffix)
			if mapN > 0 && !bytes.Equal(kf, mapKey) {
				flushMap()
			}
			if mapN == 0 {
				mapKey = append(mapKey[:0], kf...)
			}
			mapItems = append(mapItems, suffix[len(kf):]...)
			mapItems = binary.AppendUvarint(mapItems, uint64(len(v)))
			mapItems = append(mapItems, v...)
			mapN++
		default:
			bad = fmt.Errorf("%w: unknown kind %d in Pebble key %x", ErrCorruptSnapshot, kind, rest)
			return false
		}
		return true
	})
	flushMap()
	if err == nil {
		err = bad
	}
	slices.SortFunc(secs, func(a, b *section) int { return bytes.Compare([]byte(a.name), []byte(b.name)) })
	return secs, err
}

// appendSections appends the blob of key group kg made of secs (nothing if
// secs is empty).
func appendSections(dst []byte, kg int, secs []*section) []byte {
	if len(secs) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, SnapshotVersion)
	dst = binary.AppendUvarint(dst, uint64(kg))
	dst = binary.AppendUvarint(dst, uint64(len(secs)))
	for _, s := range secs {
		dst = appendString(dst, s.name)
		dst = binary.AppendUvarint(dst, uint64(s.kind))
		var cnt [binary.MaxVarintLen64]byte
		c := binary.PutUvarint(cnt[:], uint64(s.n))
		dst = binary.AppendUvarint(dst, uint64(c+len(s.entries)))
		dst = append(append(dst, cnt[:c]...), s.entries...)
	}
	return dst
}

// restorePebble writes the entries of a canonical blob of key group kg in
// one batch, after checking all of it (nothing changes on error).
func (b *Backend[K]) restorePebble(p *pebbleStore, kg int, blob []byte) error {
	if !b.rng.Contains(kg) {
		return fmt.Errorf("state: cannot restore key group %d: outside this backend's key-group range %v", kg, b.rng)
	}
	if len(blob) == 0 {
		return nil
	}
	wrap := func(err error) error { return fmt.Errorf("state: restoring key group %d: %w", kg, err) }
	// The restored entries replace cached ones: flush the cache before
	// and drop it after (PC3 and PC4).
	if err := p.flush(); err != nil {
		return wrap(err)
	}
	batch := p.db.NewBatch()
	defer batch.Close()
	var restored []string
	var lastMapKey []byte
	err := parseBlob(kg, blob, func(name string, kind Kind) (func(suffix, v []byte) error, error) {
		var t pebbleTable
		if rt, ok := b.tables[name]; ok {
			if rt.Kind() != kind {
				return nil, fmt.Errorf("state %q is registered as %s state %s but the snapshot holds %s state",
					name, rt.Kind(), rt.Type(), kind)
			}
			t = rt.(pebbleTable)
		} else {
			restored = append(restored, name)
		}
		pfx := groupPrefix(kg, statePrefix(name, kind))
		return func(suffix, v []byte) error {
			if t != nil {
				if err := t.checkEntry(suffix, v); err != nil {
					return fmt.Errorf("state %q: %w", name, err)
				}
			}
			k := append(slices.Clip(pfx), suffix...)
			if kf := firstField(suffix); kind == KindMap && !bytes.Equal(kf, lastMapKey) {
				// A restored map replaces the key's map (as the memory
				// backend does), so drop the key's other user keys first.
				lastMapKey = append(lastMapKey[:0], kf...)
				kp := append(slices.Clip(pfx), kf...)
				if err := batch.DeleteRange(kp, prefixEnd(kp), nil); err != nil {
					return err
				}
			}
			return batch.Set(k, v, nil)
		}, nil
	})
	if err != nil {
		return wrap(err)
	}
	if err := p.db.Apply(batch, noSync); err != nil {
		return wrap(err)
	}
	p.dropCache()
	for _, name := range restored {
		if p.unchecked == nil {
			p.unchecked = map[string]bool{}
		}
		p.unchecked[name] = true
	}
	return nil
}

// parseBlob checks a canonical blob of key group kg and calls state for
// each state section and the function it returns for each Pebble entry of
// that section (the key suffix after the state prefix, and the value). For
// a map entry with n user keys the function runs n times.
func parseBlob(kg int, blob []byte, state func(name string, kind Kind) (func(suffix, v []byte) error, error)) error {
	r := newReader(blob)
	ver, err := r.Uvarint("format version")
	if err != nil {
		return err
	}
	if ver != SnapshotVersion {
		return fmt.Errorf("%w %d (this build reads version %d)", ErrSnapshotVersion, ver, SnapshotVersion)
	}
	gotKG, err := r.Uvarint("key group")
	if err != nil {
		return err
	}
	if gotKG != uint64(kg) {
		return fmt.Errorf("the blob is a snapshot of key group %d", gotKG)
	}
	nStates, err := r.Count("state count")
	if err != nil {
		return err
	}
	prev := ""
	for i := range nStates {
		nameBytes, err := r.Field("state name")
		if err != nil {
			return err
		}
		name := string(nameBytes)
		if i > 0 && name <= prev {
			return r.Corrupt("state %q does not follow %q (names must be sorted and unique)", name, prev)
		}
		prev = name
		k, err := r.Uvarint("state kind")
		if err != nil {
			return err
		}
		kind := Kind(k)
		if k < uint64(KindValue) || k > uint64(KindNamespacedList) {
			return r.Corrupt("state %q has unknown kind %d", name, k)
		}
		sec, err := r.Field("state section")
		if err != nil {
			return err
		}
		put, err := state(name, kind)
		if err != nil {
			return err
		}
		if err := parseSection(newReader(sec), kind, put); err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
	}
	if !r.Done() {
		return r.Corrupt("%d bytes after the last state", r.Remaining())
	}
	return nil
}

// parseSection checks the entries of one section and hands them to put as
// Pebble entries.
func parseSection(sr *reader, kind Kind, put func(suffix, v []byte) error) error {
	n, err := sr.Count("entry count")
	if err != nil {
		return err
	}
	var suffix []byte
	for range n {
		start := sr.Off
		if err := sr.SkipFields(1, "key"); err != nil {
			return err
		}
		if kind == KindNamespacedValue || kind == KindNamespacedList {
			if err := sr.SkipFields(1, "namespace"); err != nil {
				return err
			}
		}
		key := sr.Buf[start:sr.Off]
		switch kind {
		case KindValue, KindNamespacedValue:
			v, err := sr.Field("value")
			if err != nil {
				return err
			}
			if err := put(key, v); err != nil {
				return err
			}
		case KindList, KindNamespacedList:
			vstart := sr.Off
			m, err := itemCount(sr, "list length", 1)
			if err != nil {
				return err
			}
			if err := sr.SkipFields(m, "list item"); err != nil {
				return err
			}
			if err := put(key, sr.Buf[vstart:sr.Off]); err != nil {
				return err
			}
		case KindMap:
			m, err := itemCount(sr, "map size", 2)
			if err != nil {
				return err
			}
			for range m {
				ukStart := sr.Off
				if err := sr.SkipFields(1, "user key"); err != nil {
					return err
				}
				v, err := sr.Field("value")
				if err != nil {
					return err
				}
				suffix = append(append(suffix[:0], key...), sr.Buf[ukStart:sr.Off-len(v)-uvarintLen(len(v))]...)
				if err := put(suffix, v); err != nil {
					return err
				}
			}
		}
	}
	if !sr.Done() {
		return sr.Corrupt("%d bytes after the last entry", sr.Remaining())
	}
	return nil
}

func uvarintLen(x int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(x))
}

// freezePebble is Freeze for the Pebble backend: a Pebble snapshot, a
// consistent read view that costs no copy, so the snapshot's asynchronous
// part rewrites key groups while the subtask writes.
func (b *Backend[K]) freezePebble(p *pebbleStore) *Frozen[K] {
	p.mustFlush() // the snapshot sees every write
	p.mu.Lock()
	p.views++
	p.mu.Unlock()
	b.frozenLive.Add(1)
	b.epoch++
	return &Frozen[K]{view: &frozenPebble[K]{b: b, Snapshot: p.db.NewSnapshot(), p: p}}
}

// frozenPebble is a Pebble snapshot that keeps its database open until it
// is closed, even if the backend is closed first.
type frozenPebble[K comparable] struct {
	b *Backend[K]
	*pebble.Snapshot
	p *pebbleStore
}

func (v *frozenPebble[K]) Close() error {
	p := v.p
	p.mu.Lock()
	defer p.mu.Unlock()
	err := v.Snapshot.Close()
	p.views--
	if p.views == 0 && p.closing {
		if cerr := p.closeLocked(); err == nil {
			err = cerr
		}
	}
	return err
}

func (f *frozenPebble[K]) appendSnapshot(dst []byte, kg int) ([]byte, error) {
	b, err := f.snapshot(kg)
	return append(dst, b...), err
}

func (f *frozenPebble[K]) snapshot(kg int) ([]byte, error) {
	if !f.b.rng.Contains(kg) {
		return nil, fmt.Errorf("state: cannot snapshot key group %d: outside this backend's key-group range %v", kg, f.b.rng)
	}
	secs, err := sectionsOf(f, kg)
	if err != nil {
		return nil, fmt.Errorf("state: snapshot of key group %d: %w", kg, err)
	}
	dst := appendSections(nil, kg, secs)
	if len(dst) == 0 {
		dst = nil
	}
	return dst, nil
}

func (f *frozenPebble[K]) close() {
	f.Close()
	f.b.frozenLive.Add(-1)
}
