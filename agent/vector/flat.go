package vector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/weirproject/weir/agent/embed"
)

// Flat is the embedded Store: exact search, a scan of every vector.
//
// Vectors are kept scaled to unit length in one contiguous []float32 (item
// i at [i*dim, (i+1)*dim)), so a search is one dot product per item over
// memory read in order, and a bounded heap of the K best; Delete moves the
// last item into the hole. Search costs O(n·dim) time and O(K) memory; at
// 100k vectors of 256 dimensions that is tens of milliseconds (see
// BENCHMARKS.md), so Flat suits per-key collections and corpora up to the
// hundred-thousands. It is safe for concurrent use (a sync.RWMutex:
// searches run in parallel); the zero value is an empty store whose
// dimension the first upsert fixes.
type Flat struct {
	mu struct {
		sync.RWMutex
		dim     int
		vecs    []float32
		ids     []string
		content []string
		meta    []map[string]string
		pos     map[string]int
		// tags[i] are the IDs of item i's metadata pairs in pairs,
		// sorted: a filter is checked against them without touching the
		// maps (which are scattered in memory: a scan checking maps was as
		// slow as the dot products it saved). pairs only grows.
		tags  [][]uint32
		pairs map[string]uint32
	}
}

// NewFlat returns an empty Flat whose vectors have dim dimensions (0: the
// first upsert decides).
func NewFlat(dim int) *Flat {
	f := &Flat{}
	f.mu.dim = dim
	return f
}

// Len returns the number of items.
func (f *Flat) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.mu.ids)
}

// Dim returns the dimension of the vectors (0 while it is not fixed).
func (f *Flat) Dim() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.dim
}

// Upsert implements Store. The vectors are copied.
func (f *Flat) Upsert(_ context.Context, items ...Item) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.upsertLocked(items)
}

func (f *Flat) upsertLocked(items []Item) error {
	dim, err := validateItems(f.mu.dim, items)
	if err != nil {
		return err
	}
	f.mu.dim = dim
	if f.mu.pos == nil {
		f.mu.pos = make(map[string]int)
	}
	for _, it := range items {
		i, ok := f.mu.pos[it.ID]
		if !ok {
			i = len(f.mu.ids)
			f.mu.pos[it.ID] = i
			f.mu.ids = append(f.mu.ids, it.ID)
			f.mu.content = append(f.mu.content, "")
			f.mu.meta = append(f.mu.meta, nil)
			f.mu.tags = append(f.mu.tags, nil)
			f.mu.vecs = append(f.mu.vecs, make([]float32, dim)...)
		}
		v := f.mu.vecs[i*dim : (i+1)*dim]
		copy(v, it.Vector)
		embed.Normalize(v)
		f.mu.content[i] = it.Content
		f.mu.meta[i] = cloneMeta(it.Metadata)
		f.mu.tags[i] = f.tagsLocked(it.Metadata, f.mu.tags[i][:0])
	}
	return nil
}

// Delete implements Store.
func (f *Flat) Delete(_ context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteLocked(ids)
	return nil
}

func (f *Flat) deleteLocked(ids []string) {
	dim := f.mu.dim
	for _, id := range ids {
		i, ok := f.mu.pos[id]
		if !ok {
			continue
		}
		last := len(f.mu.ids) - 1
		if i != last {
			copy(f.mu.vecs[i*dim:(i+1)*dim], f.mu.vecs[last*dim:])
			f.mu.ids[i], f.mu.content[i], f.mu.meta[i] = f.mu.ids[last], f.mu.content[last], f.mu.meta[last]
			f.mu.tags[i], f.mu.tags[last] = f.mu.tags[last], f.mu.tags[i]
			f.mu.pos[f.mu.ids[i]] = i
		}
		delete(f.mu.pos, id)
		f.mu.ids = f.mu.ids[:last]
		f.mu.content = f.mu.content[:last]
		f.mu.meta[last] = nil
		f.mu.meta = f.mu.meta[:last]
		f.mu.tags[last] = nil
		f.mu.tags = f.mu.tags[:last]
		f.mu.vecs = f.mu.vecs[:last*dim]
	}
}

// Get returns the item with id (its vector as stored: unit length).
func (f *Flat) Get(id string) (Item, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	i, ok := f.mu.pos[id]
	if !ok {
		return Item{}, false
	}
	d := f.mu.dim
	return Item{ID: id, Vector: slices.Clone(f.mu.vecs[i*d : (i+1)*d]), Content: f.mu.content[i], Metadata: cloneMeta(f.mu.meta[i])}, true
}

// Search implements Store.
func (f *Flat) Search(_ context.Context, q Query) ([]Hit, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.searchLocked(q)
}

func (f *Flat) searchLocked(q Query) ([]Hit, error) {
	if err := validateQuery(f.mu.dim, q); err != nil {
		return nil, err
	}
	n, dim := len(f.mu.ids), f.mu.dim
	if n == 0 {
		return nil, nil
	}
	var need []uint32
	for k, v := range q.Filter {
		id, ok := f.mu.pairs[pairKey(k, v)]
		if !ok {
			return nil, nil // no item has this pair
		}
		need = append(need, id)
	}
	slices.Sort(need)
	qv := embed.Normalize(slices.Clone(q.Vector))
	top := topK{k: q.K, ids: f.mu.ids}
	for i := range n {
		if len(need) > 0 && !hasAll(f.mu.tags[i], need) {
			continue
		}
		top.offer(dot(qv, f.mu.vecs[i*dim:(i+1)*dim:(i+1)*dim]), i)
	}
	idx := top.sorted()
	hits := make([]Hit, len(idx))
	for j, c := range idx {
		hits[j] = Hit{ID: f.mu.ids[c.i], Content: f.mu.content[c.i], Metadata: cloneMeta(f.mu.meta[c.i]), Score: c.s}
	}
	return hits, nil
}

func pairKey(k, v string) string { return k + "\x00" + v }

// tagsLocked returns the pair IDs of md, sorted, in dst (registering new
// pairs).
func (f *Flat) tagsLocked(md map[string]string, dst []uint32) []uint32 {
	if len(md) == 0 {
		return nil
	}
	if f.mu.pairs == nil {
		f.mu.pairs = make(map[string]uint32)
	}
	for k, v := range md {
		pk := pairKey(k, v)
		id, ok := f.mu.pairs[pk]
		if !ok {
			id = uint32(len(f.mu.pairs))
			f.mu.pairs[pk] = id
		}
		dst = append(dst, id)
	}
	slices.Sort(dst)
	return dst
}

// hasAll reports whether the sorted have contains every element of the
// sorted need.
func hasAll(have, need []uint32) bool {
	j := 0
	for _, x := range need {
		for j < len(have) && have[j] < x {
			j++
		}
		if j == len(have) || have[j] != x {
			return false
		}
		j++
	}
	return true
}

// dot is the dot product of a and b (len(b) >= len(a)), four lanes at a
// time.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// cand is a candidate hit: score and item index.
type cand struct {
	s float32
	i int
}

// topK keeps the k best candidates in a min-heap whose root is the worst
// of them (lower score, or equal score and greater ID), so a candidate
// costs one comparison unless it enters.
type topK struct {
	k   int
	ids []string
	h   []cand
}

// worse reports whether a ranks below b.
func (t *topK) worse(a, b cand) bool {
	if a.s != b.s {
		return a.s < b.s
	}
	return t.ids[a.i] > t.ids[b.i]
}

func (t *topK) offer(s float32, i int) {
	c := cand{s, i}
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		for j := len(t.h) - 1; j > 0; {
			p := (j - 1) / 2
			if !t.worse(t.h[j], t.h[p]) {
				break
			}
			t.h[j], t.h[p] = t.h[p], t.h[j]
			j = p
		}
		return
	}
	if !t.worse(t.h[0], c) {
		return
	}
	t.h[0] = c
	for j := 0; ; {
		l, m := 2*j+1, j
		if l < len(t.h) && t.worse(t.h[l], t.h[m]) {
			m = l
		}
		if r := l + 1; r < len(t.h) && t.worse(t.h[r], t.h[m]) {
			m = r
		}
		if m == j {
			break
		}
		t.h[j], t.h[m] = t.h[m], t.h[j]
		j = m
	}
}

// sorted returns the candidates best first.
func (t *topK) sorted() []cand {
	slices.SortFunc(t.h, func(a, b cand) int {
		if t.worse(b, a) {
			return -1
		}
		if t.worse(a, b) {
			return 1
		}
		return 0
	})
	return t.h
}

// flatMagic starts Flat's binary form.
const flatMagic = "wvf1"

// ErrCorrupt is returned (wrapped) when a Flat's binary form cannot be
// decoded.
var ErrCorrupt = errors.New("vector: corrupt store snapshot")

// AppendBinary appends f's binary form to dst: the magic "wvf1", then
// uvarint dimension and count, then per item, in storage order, the ID,
// content, metadata (count, then key and value pairs in key order) as
// uvarint-length-prefixed strings and the dimension's float32 values,
// little-endian. Equal stores built by equal operations encode equally.
func (f *Flat) AppendBinary(dst []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	dim := f.mu.dim
	dst = append(dst, flatMagic...)
	dst = binary.AppendUvarint(dst, uint64(dim))
	dst = binary.AppendUvarint(dst, uint64(len(f.mu.ids)))
	str := func(s string) {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	for i, id := range f.mu.ids {
		str(id)
		str(f.mu.content[i])
		md := f.mu.meta[i]
		dst = binary.AppendUvarint(dst, uint64(len(md)))
		for _, k := range slices.Sorted(maps.Keys(md)) {
			str(k)
			str(md[k])
		}
		for _, x := range f.mu.vecs[i*dim : (i+1)*dim] {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
		}
	}
	return dst, nil
}

// MarshalBinary implements encoding.BinaryMarshaler (see AppendBinary).
func (f *Flat) MarshalBinary() ([]byte, error) { return f.AppendBinary(nil) }

// UnmarshalBinary replaces f's contents with those of b, the output of
// AppendBinary; an error wraps ErrCorrupt and leaves f unchanged.
func (f *Flat) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if string(r.bytes(len(flatMagic))) != flatMagic {
		return fmt.Errorf("%w: does not start with %q", ErrCorrupt, flatMagic)
	}
	dim, n := int(r.uvarint()), int(r.uvarint())
	if r.err != nil || dim < 0 || n < 0 || (n > 0 && dim == 0) || n > len(b) {
		return fmt.Errorf("%w: header", ErrCorrupt)
	}
	g := NewFlat(dim)
	g.mu.pos = make(map[string]int, n)
	g.mu.vecs = make([]float32, 0, n*dim)
	for i := 0; i < n && r.err == nil; i++ {
		id := r.str()
		content := r.str()
		var md map[string]string
		if m := int(r.uvarint()); m > 0 && m <= len(b) {
			md = make(map[string]string, m)
			for range m {
				k := r.str()
				md[k] = r.str()
			}
		}
		raw := r.bytes(4 * dim)
		if r.err != nil {
			break
		}
		if _, dup := g.mu.pos[id]; dup || id == "" {
			return fmt.Errorf("%w: item %d has a repeated or empty ID %q", ErrCorrupt, i, id)
		}
		g.mu.pos[id] = i
		g.mu.ids = append(g.mu.ids, id)
		g.mu.content = append(g.mu.content, content)
		g.mu.meta = append(g.mu.meta, md)
		g.mu.tags = append(g.mu.tags, g.tagsLocked(md, nil))
		for j := range dim {
			g.mu.vecs = append(g.mu.vecs, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])))
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return fmt.Errorf("%w: truncated or trailing bytes", ErrCorrupt)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.dim, f.mu.vecs, f.mu.ids, f.mu.content, f.mu.meta, f.mu.pos = g.mu.dim, g.mu.vecs, g.mu.ids, g.mu.content, g.mu.meta, g.mu.pos
	f.mu.tags, f.mu.pairs = g.mu.tags, g.mu.pairs
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, m := binary.Uvarint(r.b)
	if m <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.b = r.b[m:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = ErrCorrupt
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = ErrCorrupt
		return ""
	}
	return string(r.bytes(int(n)))
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, m := binary.Varint(r.b)
	if m <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.b = r.b[m:]
	return v
}
