package vector

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
)

// Change is one change to a keyed collection: the upsert of Item, or,
// with Delete, the removal of the item with Item.ID.
type Change struct {
	Item   Item `json:"item"`
	Delete bool `json:"delete,omitempty"`
}

// Upsert returns the change that inserts or replaces it.
func Upsert(it Item) Change { return Change{Item: it} }

// Remove returns the change that deletes the item with id.
func Remove(id string) Change { return Change{Item: Item{ID: id}, Delete: true} }

// Result is a query's answer: the query and its hits, or, when the query
// was invalid (a vector of another dimension, K < 1), Error.
type Result[Q any] struct {
	Query Q      `json:"query"`
	Hits  []Hit  `json:"hits"`
	Error string `json:"error,omitempty"`
}

// IndexOptions configure Index.
type IndexOptions[Q any] struct {
	// Query returns the search a query value asks for; required.
	Query func(q Q) Query
	// Dim fixes the dimension of every collection's vectors; 0 lets each
	// collection's first upsert fix it.
	Dim int
	// QueryCodec encodes held queries in checkpoints; nil means
	// state.DefaultCodec[Q] (JSON for structs).
	QueryCodec state.Codec[Q]
}

// Index keeps one collection (a Flat store) per key from a stream of
// changes and answers a stream of queries on the collection of their key,
// in event-time order (X1-X5 of the package documentation):
//
//	per change or query with timestamp ts:
//	    ts > watermark: hold it
//	    else:           apply or answer it now (late; counted)
//	per watermark W:
//	    release the held records with ts <= W in order (ts, changes before
//	    queries, arrival): apply each change to its key's store, answer
//	    each query from its key's store; then forward W
//
// So a query at time t sees exactly the changes of its key with
// timestamps <= t that were not late, whatever the order in which the two
// streams arrived. Collections and held records are in checkpoints, per
// key group; a restore, at any parallelism, answers the same queries with
// the same hits.
func Index[K comparable, Q any](changes weir.KeyedStream[K, Change], queries weir.KeyedStream[K, Q], name string, opts IndexOptions[Q]) weir.Stream[Result[Q]] {
	if opts.Query == nil {
		panic(fmt.Sprintf("vector: Index %q: IndexOptions.Query is required (it turns a query value into a Query)", name))
	}
	if opts.Dim < 0 {
		panic(fmt.Sprintf("vector: Index %q: IndexOptions.Dim is %d; use a positive number, or 0", name, opts.Dim))
	}
	kc, kq, h := changes.Key(), queries.Key(), changes.Hasher()
	return weir.TransformTwo(changes.Stream, queries.Stream, name, func() runtime.TwoInputOperator[Change, Q, Result[Q]] {
		return &indexOp[K, Q]{keyC: kc, keyQ: kq, hash: h, opts: opts}
	}, runtime.KeyGroups(changes.KeyGroupFunc), runtime.KeyGroups(queries.KeyGroupFunc))
}

// held is a change or query waiting for the watermark.
type held[K comparable, Q any] struct {
	ts     int64
	query  bool // queries sort after changes of equal timestamp
	seq    uint64
	key    K
	change Change
	q      Q
}

func (a *held[K, Q]) compare(b *held[K, Q]) int {
	if c := cmp.Compare(a.ts, b.ts); c != 0 {
		return c
	}
	if a.query != b.query {
		if a.query {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.seq, b.seq)
}

// indexOp is Index's operator. The stores live in a map by key; held
// records in a slice, sorted when a watermark releases some of them (the
// held records are few: those between the watermark and the newest
// timestamps). Snapshots encode both per key group, synchronously.
type indexOp[K comparable, Q any] struct {
	runtime.Base[Result[Q]]
	keyC func(Change) K
	keyQ func(Q) K
	hash keygroup.Hasher[K]
	opts IndexOptions[Q]

	stores map[K]*Flat
	held   []held[K, Q]
	seq    uint64
	wm     int64
	kcodec state.Codec[K]
	qcodec state.Codec[Q]

	late, rejected, answered *runtime.Counter
	holding, items           *runtime.Gauge
	nItems                   int64
}

func (o *indexOp[K, Q]) Open(ctx *runtime.Context, out runtime.Output[Result[Q]]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.stores = map[K]*Flat{}
	o.wm = math.MinInt64
	o.kcodec = state.DefaultCodec[K]()
	o.qcodec = o.opts.QueryCodec
	if o.qcodec == nil {
		o.qcodec = state.DefaultCodec[Q]()
	}
	o.late = ctx.Counter("lateRecords")
	o.rejected = ctx.Counter("changesRejected")
	o.answered = ctx.Counter("queriesAnswered")
	o.holding = ctx.Gauge("recordsHeld")
	o.items = ctx.Gauge("vectors")
	return o.restore(ctx)
}

func (o *indexOp[K, Q]) ProcessRecord1(r runtime.Record[Change]) error {
	k := o.keyC(r.Value)
	if r.Timestamp <= o.wm {
		o.late.Inc()
		o.apply(k, &r.Value)
		return nil
	}
	o.held = append(o.held, held[K, Q]{ts: r.Timestamp, seq: o.seq, key: k, change: r.Value})
	o.seq++
	return nil
}

func (o *indexOp[K, Q]) ProcessRecord2(r runtime.Record[Q]) error {
	k := o.keyQ(r.Value)
	if r.Timestamp <= o.wm {
		o.late.Inc()
		o.answer(k, r.Value, r.Timestamp)
		return nil
	}
	o.held = append(o.held, held[K, Q]{ts: r.Timestamp, query: true, seq: o.seq, key: k, q: r.Value})
	o.seq++
	return nil
}

func (o *indexOp[K, Q]) ProcessWatermark(ts int64) error {
	if ts > o.wm {
		o.wm = ts
		o.release(ts)
	}
	o.holding.Set(int64(len(o.held)))
	o.Out.EmitWatermark(ts)
	return nil
}

// release applies and answers the held records with timestamps <= wm, in
// order, and keeps the others.
func (o *indexOp[K, Q]) release(wm int64) {
	due := 0
	for i := range o.held {
		if o.held[i].ts <= wm {
			o.held[i], o.held[due] = o.held[due], o.held[i]
			due++
		}
	}
	if due == 0 {
		return
	}
	ready := o.held[:due]
	slices.SortFunc(ready, func(a, b held[K, Q]) int { return a.compare(&b) })
	for i := range ready {
		h := &ready[i]
		if h.query {
			o.answer(h.key, h.q, h.ts)
		} else {
			o.apply(h.key, &h.change)
		}
	}
	rest := copy(o.held, o.held[due:])
	clear(o.held[rest:])
	o.held = o.held[:rest]
}

func (o *indexOp[K, Q]) apply(k K, c *Change) {
	s := o.stores[k]
	if c.Delete {
		if s != nil {
			before := len(s.mu.ids)
			s.deleteLocked([]string{c.Item.ID})
			o.addItems(len(s.mu.ids) - before)
			if len(s.mu.ids) == 0 {
				delete(o.stores, k)
			}
		}
		return
	}
	if s == nil {
		s = NewFlat(o.opts.Dim)
		o.stores[k] = s
	}
	before := len(s.mu.ids)
	// The operator is the store's only user, on the subtask goroutine: no
	// lock is taken.
	if err := s.upsertLocked([]Item{c.Item}); err != nil {
		o.rejected.Inc()
		o.Ctx.Logger.Warn("vector: change rejected", "key", k, "error", err)
	}
	o.addItems(len(s.mu.ids) - before)
	if len(s.mu.ids) == 0 {
		delete(o.stores, k)
	}
}

func (o *indexOp[K, Q]) answer(k K, q Q, ts int64) {
	res := Result[Q]{Query: q}
	query := o.opts.Query(q)
	if s := o.stores[k]; s != nil {
		hits, err := s.searchLocked(query)
		if err != nil {
			res.Error = err.Error()
		}
		res.Hits = hits
	} else if err := validateQuery(o.opts.Dim, query); err != nil {
		res.Error = err.Error()
	}
	o.answered.Inc()
	o.Out.Collect(runtime.Record[Result[Q]]{Value: res, Timestamp: ts})
}

func (o *indexOp[K, Q]) addItems(n int) {
	if n != 0 {
		o.nItems += int64(n)
		o.items.Set(o.nItems)
	}
}

func (o *indexOp[K, Q]) EndInput(int) error { return nil }

// SnapshotState writes, per key group, the blob
//
//	uvarint(#stores) { bytes(key) bytes(store) }
//	uvarint(#held)   { bytes(key) varint(ts) byte(kind) bytes(payload) }
//
// where bytes(x) is uvarint(len(x)) x, keys are in the key's state codec,
// stores in Flat's binary form, and a held change (kind 0) is JSON, a held
// query (kind 1) in QueryCodec; held records in release order.
func (o *indexOp[K, Q]) SnapshotState(w *runtime.SnapshotWriter) error {
	type group struct {
		stores []K
		held   []*held[K, Q]
	}
	groups := map[int]*group{}
	of := func(k K) *group {
		kg := keygroup.Assign(o.hash(k), o.Ctx.MaxParallelism)
		g := groups[kg]
		if g == nil {
			g = &group{}
			groups[kg] = g
		}
		return g
	}
	for k := range o.stores {
		g := of(k)
		g.stores = append(g.stores, k)
	}
	slices.SortFunc(o.held, func(a, b held[K, Q]) int { return a.compare(&b) })
	for i := range o.held {
		g := of(o.held[i].key)
		g.held = append(g.held, &o.held[i])
	}
	var err error
	bytes := func(dst, b []byte) []byte { return append(binary.AppendUvarint(dst, uint64(len(b))), b...) }
	for _, kg := range slices.Sorted(maps.Keys(groups)) {
		g := groups[kg]
		var blob, scratch []byte
		blob = binary.AppendUvarint(blob, uint64(len(g.stores)))
		for _, k := range g.stores {
			if scratch, err = o.kcodec.Append(scratch[:0], k); err != nil {
				return fmt.Errorf("vector: snapshot of key %v: %w", k, err)
			}
			blob = bytes(blob, scratch)
			if scratch, err = o.stores[k].AppendBinary(scratch[:0]); err != nil {
				return err
			}
			blob = bytes(blob, scratch)
		}
		blob = binary.AppendUvarint(blob, uint64(len(g.held)))
		for _, h := range g.held {
			if scratch, err = o.kcodec.Append(scratch[:0], h.key); err != nil {
				return fmt.Errorf("vector: snapshot of key %v: %w", h.key, err)
			}
			blob = bytes(blob, scratch)
			blob = binary.AppendVarint(blob, h.ts)
			if h.query {
				blob = append(blob, 1)
				scratch, err = o.qcodec.Append(scratch[:0], h.q)
			} else {
				blob = append(blob, 0)
				scratch, err = json.Marshal(h.change)
			}
			if err != nil {
				return fmt.Errorf("vector: snapshot of a held record of key %v: %w", h.key, err)
			}
			blob = bytes(blob, scratch)
		}
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

func (o *indexOp[K, Q]) restore(ctx *runtime.Context) error {
	var hs []held[K, Q]
	err := ctx.Restored().ForEachKeyGroup(func(kg int, blob []byte) error {
		r := reader{b: blob}
		bad := func(what string) error {
			return fmt.Errorf("vector: restore of operator %q, key group %d: %s: %w", ctx.Name, kg, what, ErrCorrupt)
		}
		for n := r.uvarint(); n > 0 && r.err == nil; n-- {
			k, err := o.kcodec.Decode(r.bytes(int(r.uvarint())))
			if err != nil {
				return bad("key")
			}
			s := &Flat{}
			if err := s.UnmarshalBinary(r.bytes(int(r.uvarint()))); err != nil {
				return bad("store")
			}
			o.stores[k] = s
			o.addItems(s.Len())
		}
		for n := r.uvarint(); n > 0 && r.err == nil; n-- {
			k, err := o.kcodec.Decode(r.bytes(int(r.uvarint())))
			if err != nil {
				return bad("key of a held record")
			}
			h := held[K, Q]{key: k, ts: r.varint()}
			if kind := r.bytes(1); len(kind) == 1 {
				h.query = kind[0] == 1
			}
			payload := r.bytes(int(r.uvarint()))
			if r.err != nil {
				break
			}
			if h.query {
				h.q, err = o.qcodec.Decode(payload)
			} else {
				err = json.Unmarshal(payload, &h.change)
			}
			if err != nil {
				return bad("held record")
			}
			hs = append(hs, h)
		}
		if r.err != nil || len(r.b) != 0 {
			return bad("truncated or trailing bytes")
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Key groups are independent; one order over all of them keeps each
	// key's order.
	slices.SortStableFunc(hs, func(a, b held[K, Q]) int {
		if c := cmp.Compare(a.ts, b.ts); c != 0 {
			return c
		}
		if a.query != b.query {
			if a.query {
				return 1
			}
			return -1
		}
		return 0
	})
	for i := range hs {
		hs[i].seq = o.seq
		o.seq++
	}
	o.held = hs
	o.holding.Set(int64(len(hs)))
	return nil
}
