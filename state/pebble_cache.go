package state

// The write-back cache of the Pebble backend (Options.CacheBytes): a Go map
// from encoded Pebble key to the key's encoded value (or its absence, or
// list appends not yet merged) in front of the database, so that the
// per-record get and set of a key cost a map lookup, not a Pebble read and
// a Pebble commit (issue 15: ~3 µs per ValueState get+update).
//
// Invariants:
//
//	PC1. Read-your-writes. pebbleStore.get, set, del and merge are the only
//	    per-key accesses of the database, and with the cache on each goes
//	    to the cache first: a cached entry is the key's current value (kind
//	    cSet), its absence (cAbsent), or list operands appended since the
//	    last flush to a value the cache does not know (cMerge). A get of a
//	    key not cached reads Pebble and caches what it found (clean); a
//	    get of a cMerge entry reads Pebble, appends the operands and turns
//	    the entry into a dirty cSet.
//	PC2. Every entry whose content may not be in Pebble is dirty, and only
//	    those: flush writes them (Set, Delete or Merge) in one pebble.Batch
//	    and makes them clean (cMerge entries are dropped: their value is known
//	    only to Pebble). So after a flush the database holds every write.
//	PC3. Flush before every other read of the database: scan (and so counts,
//	    ForEach and registration checks),
//	    delPrefix (ClearKeyGroup, MapState.Clear), snapshots, Freeze (its
//	    Pebble snapshot sees every write: the package's I8),
//	    CheckpointNative and Backend.Flush (a restart restores every write
//	    made before the barrier: P5), and the
//	    canonical restore (whose writes must come after the cached ones).
//	PC4. Writes that bypass the cache (delPrefix's range deletion, restores)
//	    drop the cached entries they may change, after the flush, so a
//	    clean entry is always equal to the database.
//	PC5. No empty entries (P3): a cached delete is
//	    flushed as a Pebble Delete, and merge operands are list values with
//	    at least one item.
//	PC6. Bounded: an entry costs cacheEntryBytes plus its key and the capacity
//	    of its value; when the total passes the bound (Options.CacheBytes,
//	    by default DefaultCacheBytes or half the memtable if smaller), the
//	    cache flushes and drops every entry; when the keys and values of
//	    the dirty entries pass a quarter of the bound, it flushes them and
//	    keeps the entries (batches of 1 MiB by default: 4 MiB ones cost
//	    Pebble more CPU per record, BENCHMARKS.md, and one over half the
//	    memtable would skip it and make Pebble flush). Dropping keeps value
//	    buffers of at most a quarter of the bound for reuse (so the heap
//	    holds at most about 1.25x the bound). Close and RestoreNative drop the cache
//	    without flushing: the working database is then removed or replaced
//	    (P5), and nothing reads it after.
//	PC7. The entry found last is remembered (a read then a write of one key
//	    is one map lookup) and forgotten whenever an entry is dropped.
//	PC8. The cache is the subtask goroutine's alone; Frozen views read a
//	    Pebble snapshot taken after a flush and never touch it.
//	PC9. Timers (pebble_timers.go) read and write the database directly, in
//	    their own key range: the cache never holds a timer key, so timers
//	    need no flush and a flush never touches them.

import (
	"encoding/binary"
	"fmt"
)

// DefaultCacheBytes is the size of the Pebble backend's write-back cache
// when Options.CacheBytes is 0.
const DefaultCacheBytes = 4 << 20

// NoCache, as Options.CacheBytes, turns the write-back cache off: every
// state access reads or writes Pebble.
const NoCache = -1

// cacheEntryBytes is what an entry costs besides its key and value bytes:
// the map slot, the entry and the slice and string headers.
const cacheEntryBytes = 96

// The kinds of cached entries.
const (
	cSet    = iota // v is the key's value
	cAbsent        // the key has no value
	cMerge         // v is a list value to append to the key's value in Pebble
)

type centry struct {
	key   string
	v     []byte
	kind  uint8
	dirty bool
}

// wcache is the write-back cache of a pebbleStore.
type wcache struct {
	m     map[string]*centry
	dirty []*centry // the dirty entries, each once
	free  []*centry // dropped entries, for reuse with their value buffers
	bytes int64     // the live entries' cost (PC6)
	limit int64
	// dirtyBytes is the keys and values of the dirty entries: what the
	// next flush writes. It flushes at a quarter of limit (PC6).
	dirtyBytes int64
	// freeBytes is the cost of the entries in free (freeCost), at most a
	// quarter of limit.
	freeBytes int64
	kbuf      []byte // scratch for keys while flushing
	// last is the entry found or made last, so that a read followed by a
	// write of the same key (Value, then Update) costs one map lookup.
	last *centry
}

func newWCache(limit int64) *wcache {
	return &wcache{m: make(map[string]*centry), limit: limit}
}

// checkCacheBytes validates Options.CacheBytes.
func checkCacheBytes(n int64) error {
	if n < NoCache {
		return fmt.Errorf("state: Options.CacheBytes %d: want 0 (the default, %d bytes), a positive size in bytes, or NoCache (-1) to turn the cache off", n, DefaultCacheBytes)
	}
	return nil
}

// entry returns the entry of k and whether it was cached; an entry made
// for a key not cached is a clean cAbsent, which says nothing of Pebble
// until the caller sets it.
func (c *wcache) entry(k []byte) (*centry, bool) {
	if e := c.lookup(k); e != nil {
		return e, true
	}
	var e *centry
	if n := len(c.free); n > 0 {
		e = c.free[n-1]
		c.free = c.free[:n-1]
		c.freeBytes -= freeCost(e)
		e.v = e.v[:0]
	} else {
		e = &centry{}
	}
	e.key, e.kind, e.dirty = string(k), cAbsent, false
	c.m[e.key] = e
	c.last = e
	c.bytes += int64(cacheEntryBytes + len(e.key) + cap(e.v))
	return e, false
}

// lookup returns the entry of k, nil if k is not cached.
func (c *wcache) lookup(k []byte) *centry {
	if e := c.last; e != nil && e.key == string(k) {
		return e
	}
	e := c.m[string(k)]
	if e != nil {
		c.last = e
	}
	return e
}

// setV makes v the entry's bytes, accounting for a change of capacity.
func (c *wcache) setV(e *centry, v []byte) {
	old, oldLen := cap(e.v), len(e.v)
	e.v = append(e.v[:0], v...)
	c.grew(e, old, oldLen)
}

// grew accounts for a change of e.v from capacity old and length oldLen.
func (c *wcache) grew(e *centry, old, oldLen int) {
	c.bytes += int64(cap(e.v) - old)
	if e.dirty {
		c.dirtyBytes += int64(len(e.v) - oldLen)
	}
}

func (c *wcache) markDirty(e *centry) {
	if !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, e)
		c.dirtyBytes += int64(len(e.key) + len(e.v))
	}
}

// cacheGet is pebbleStore.get with the cache on.
func (p *pebbleStore) cacheGet(k []byte) ([]byte, bool) {
	c := p.cache
	e := c.lookup(k)
	if e != nil && e.kind != cMerge {
		if e.kind == cAbsent {
			return nil, false
		}
		p.vbuf = append(p.vbuf[:0], e.v...)
		return p.vbuf, true
	}
	v, ok := p.dbGet(k)
	if e == nil {
		e, _ = c.entry(k)
		if ok {
			c.setV(e, v)
			e.kind = cSet
		}
	} else { // cMerge: the operands go after what Pebble holds (dirty still)
		if ok {
			p.mbuf = appendLists(append(p.mbuf[:0], v...), e.v)
			c.setV(e, p.mbuf)
		}
		e.kind = cSet
	}
	found := e.kind == cSet
	if found {
		p.vbuf = append(p.vbuf[:0], e.v...)
	}
	p.maybeEvict()
	if !found {
		return nil, false
	}
	return p.vbuf, true
}

func (p *pebbleStore) cacheSet(k, v []byte) {
	c := p.cache
	e, _ := c.entry(k)
	c.setV(e, v)
	e.kind = cSet
	c.markDirty(e)
	p.maybeEvict()
}

func (p *pebbleStore) cacheDel(k []byte) {
	c := p.cache
	e, cached := c.entry(k)
	if cached && e.kind == cAbsent && !e.dirty {
		return // absent in Pebble too
	}
	if e.dirty {
		c.dirtyBytes -= int64(len(e.v))
	}
	e.v = e.v[:0]
	e.kind = cAbsent
	c.markDirty(e)
	p.maybeEvict()
}

// cacheMerge appends the list value op to k's list: in place if the cache
// knows the list (cost: the size of op, as a Pebble merge), as an operand
// to flush as a Pebble merge otherwise.
func (p *pebbleStore) cacheMerge(k, op []byte) {
	c := p.cache
	e, cached := c.entry(k)
	if !cached {
		e.kind = cMerge
	}
	old, oldLen := cap(e.v), len(e.v)
	if e.kind == cAbsent {
		e.kind = cSet
	}
	e.v = appendLists(e.v, op)
	c.grew(e, old, oldLen)
	c.markDirty(e)
	p.maybeEvict()
}

// appendLists appends the items of list value b to list value a (both "n
// item*n", a possibly empty) and returns the result, reusing a's storage:
// the count is rewritten in place unless its length changes, so appending
// costs the size of b.
func appendLists(a, b []byte) []byte {
	nb, mb := binary.Uvarint(b)
	if mb <= 0 {
		pebblePanic("merging list values", fmt.Errorf("%w: list value without a count", ErrCorruptSnapshot))
	}
	if len(a) == 0 {
		return append(a, b...)
	}
	na, ma := binary.Uvarint(a)
	if ma <= 0 {
		pebblePanic("merging list values", fmt.Errorf("%w: list value without a count", ErrCorruptSnapshot))
	}
	n := na + nb
	if uvarintLen(int(n)) == ma {
		binary.PutUvarint(a[:ma], n)
		return append(a, b[mb:]...)
	}
	out := binary.AppendUvarint(make([]byte, 0, len(a)+len(b)+1), n)
	out = append(out, a[ma:]...)
	return append(out, b[mb:]...)
}

// maybeEvict flushes and drops every entry once the cache passes its
// bound, and flushes once the dirty entries pass a quarter of it
// (PC6).
func (p *pebbleStore) maybeEvict() {
	c := p.cache
	if c.bytes > c.limit {
		p.mustFlush()
		p.dropCache()
	} else if c.dirtyBytes > c.limit/4 {
		p.mustFlush()
	}
}

// flush writes the dirty entries into Pebble in one batch (PC2).
// It does nothing without a cache or dirty entries.
func (p *pebbleStore) flush() error {
	c := p.cache
	if c == nil || len(c.dirty) == 0 {
		return nil
	}
	b := p.db.NewBatch()
	defer b.Close()
	var err error
	for _, e := range c.dirty {
		c.kbuf = append(c.kbuf[:0], e.key...)
		switch e.kind {
		case cSet:
			err = b.Set(c.kbuf, e.v, nil)
		case cAbsent:
			err = b.Delete(c.kbuf, nil)
		case cMerge:
			err = b.Merge(c.kbuf, e.v, nil)
		}
		if err != nil {
			return fmt.Errorf("state: Pebble backend: flushing the write-back cache: %w", err)
		}
	}
	if err := p.db.Apply(b, noSync); err != nil {
		return fmt.Errorf("state: Pebble backend: flushing the write-back cache: %w", err)
	}
	for i, e := range c.dirty {
		e.dirty = false
		if e.kind == cMerge {
			c.drop(e)
		}
		c.dirty[i] = nil
	}
	c.dirty = c.dirty[:0]
	c.dirtyBytes = 0
	return nil
}

// mustFlush is flush for callers without an error result (P6).
func (p *pebbleStore) mustFlush() {
	if err := p.flush(); err != nil {
		panic(err.Error())
	}
}

// drop removes a clean entry from the cache.
func (c *wcache) drop(e *centry) {
	if c.last == e {
		c.last = nil
	}
	delete(c.m, e.key)
	c.bytes -= int64(cacheEntryBytes + len(e.key) + cap(e.v))
	c.recycle(e)
}

// recycle keeps a dropped entry and its value buffer for reuse while the
// free buffers stay under a quarter of the bound.
func (c *wcache) recycle(e *centry) {
	e.key, e.dirty = "", false
	if c.freeBytes+freeCost(e) <= c.limit/4 {
		c.freeBytes += freeCost(e)
		c.free = append(c.free, e)
	}
}

// freeCost is what a free entry costs: its value buffer and the entry.
func freeCost(e *centry) int64 { return int64(cap(e.v)) + 64 }

// dropCache drops every entry, dirty ones included (callers flush first
// unless the database is going away).
func (p *pebbleStore) dropCache() {
	c := p.cache
	if c == nil {
		return
	}
	for _, e := range c.m {
		c.recycle(e)
	}
	clear(c.m)
	c.last = nil
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.bytes, c.dirtyBytes = 0, 0
}

// dropPrefix drops the cached entries of the keys in Pebble with prefix
// pfx, which a range deletion is about to delete (PC4); the cache
// must be flushed. Keys with prefix pfx not in Pebble can only be cached
// as clean cAbsent entries, which stay true. A key-group prefix drops the
// whole cache instead of reading the key group.
func (p *pebbleStore) dropPrefix(pfx []byte) error {
	c := p.cache
	if c == nil || len(c.m) == 0 {
		return nil
	}
	if len(pfx) <= 2 {
		p.dropCache()
		return nil
	}
	return scanDB(p.db, pfx, func(rest, _ []byte) bool {
		c.kbuf = append(append(c.kbuf[:0], pfx...), rest...)
		if e := c.lookup(c.kbuf); e != nil {
			c.drop(e)
		}
		return true
	})
}
