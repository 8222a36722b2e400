package window

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/state"
)

// stamped is a record with its timestamp, as a window with an evictor
// keeps it.
type stamped[T any] struct {
	V  T
	TS int64
}

// evicting keeps every record of a (key, window) with its timestamp, for
// windows with an Evictor (Flink's EvictingWindowOperator): at each firing
// the evictor may drop records before and after fn sees the rest, and what
// it drops is written back. fn is the window function over the records
// (Process's own, or a fold for Reduce and Aggregate).
type evicting[K comparable, T, OUT any] struct {
	fn      func(key K, w Window, elems []T, emit func(OUT)) error
	evictor Evictor
	codec   state.Codec[T]
	st      *state.NamespacedListState[K, Window, stamped[T]]
	ctx     EvictorContext

	// Scratch, reused per firing: the window's records (a copy: the
	// state's storage is not modified in place), their values for fn, and
	// the evictor's view.
	cur  []stamped[T]
	vals []T
	view Elements
}

func (c *evicting[K, T, OUT]) open(b *state.Backend[K]) {
	c.st = state.MustNamespacedListWithCodecs[K, Window, stamped[T]](b, contentsName, WindowCodec{}, stampedCodec[T]{c.codec})
	c.st.OrderNamespaces(opensBefore)
	c.view.vals = &c.cur
}

func (c *evicting[K, T, OUT]) add(sw Window, v T, ts int64) bool {
	fresh := len(c.st.Get(sw)) == 0
	c.st.Add(sw, stamped[T]{V: v, TS: ts})
	return fresh
}

// evict runs f (EvictBefore or EvictAfter) over c.cur and drops what it
// evicted; it reports whether it evicted anything.
func (c *evicting[K, T, OUT]) evict(f func(*Elements, Window, *EvictorContext), w Window) bool {
	n := len(c.cur)
	c.view.ts = c.view.ts[:0]
	for _, s := range c.cur {
		c.view.ts = append(c.view.ts, s.TS)
	}
	if cap(c.view.evicted) < n {
		c.view.evicted = make([]bool, n)
	} else {
		c.view.evicted = c.view.evicted[:n]
		clear(c.view.evicted)
	}
	f(&c.view, w, &c.ctx)
	kept := c.cur[:0]
	for i, s := range c.cur {
		if !c.view.evicted[i] {
			kept = append(kept, s)
		}
	}
	clear(c.cur[len(kept):])
	c.cur = kept
	return len(kept) != n
}

func (c *evicting[K, T, OUT]) fire(key K, w, sw Window, emit func(OUT)) error {
	list := c.st.Get(sw)
	if len(list) == 0 {
		return nil
	}
	c.cur = append(c.cur[:0], list...)
	changed := c.evict(c.evictor.EvictBefore, w)
	var err error
	if len(c.cur) > 0 {
		c.vals = c.vals[:0]
		for _, s := range c.cur {
			c.vals = append(c.vals, s.V)
		}
		err = c.fn(key, w, c.vals, emit)
		clear(c.vals)
	}
	if err == nil && c.evict(c.evictor.EvictAfter, w) {
		changed = true
	}
	if changed {
		c.st.Update(sw, c.cur)
	}
	clear(c.cur)
	return err
}

func (c *evicting[K, T, OUT]) clear(sw Window) { c.st.Clear(sw) }

func (c *evicting[K, T, OUT]) merge(target Window, sources []Window) {
	c.st.MergeNamespaces(target, sources)
}

// stampedCodec encodes a stamped record: zig-zag varint timestamp, then
// the record in its codec.
type stampedCodec[T any] struct{ c state.Codec[T] }

func (s stampedCodec[T]) Append(dst []byte, v stamped[T]) ([]byte, error) {
	return s.c.Append(binary.AppendVarint(dst, v.TS), v.V)
}

func (s stampedCodec[T]) Decode(src []byte) (stamped[T], error) {
	ts, n := binary.Varint(src)
	if n <= 0 {
		return stamped[T]{}, fmt.Errorf("%w: window record timestamp: bad or truncated varint", state.ErrCorruptSnapshot)
	}
	v, err := s.c.Decode(src[n:])
	if err != nil {
		return stamped[T]{}, err
	}
	return stamped[T]{V: v, TS: ts}, nil
}
