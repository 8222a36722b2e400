package window

import "github.com/weirproject/weir/state"

// Names of the window operator's states (stable: they are in snapshots).
const (
	contentsName   = "window-contents"
	sessionSetName = "window-sessions"
)

// contents is what a window keeps for each (key, window) and how it turns
// that into output: an accumulator (Reduce, Aggregate and their variants)
// or the buffered records (Process). One instance belongs to one operator
// subtask; every method works on the backend's current key.
//
// The window operator keeps windows apart (timers, lateness, merging);
// contents only store, merge, emit and clear. Windows passed as "state
// window" (sw) name where the contents live, which for merged session
// windows can differ from the window that fires (see mergingSet).
type contents[K comparable, T, OUT any] interface {
	// open registers the state on the subtask's backend.
	open(b *state.Backend[K])
	// add adds v, whose timestamp is ts, to the contents of state window
	// sw and reports whether they were empty before (the window's first
	// record). Only contents with an evictor keep ts.
	add(sw Window, v T, ts int64) (fresh bool)
	// fire emits the result of window w, whose contents live in sw, for
	// key. Empty contents emit nothing.
	fire(key K, w, sw Window, emit func(OUT)) error
	// clear drops the contents of sw.
	clear(sw Window)
	// merge folds the contents of sources into target and drops sources.
	merge(target Window, sources []Window)
}

// incremental keeps one accumulator per (key, window): Flink's
// ReducingState / AggregatingState. firstFn turns a window's first record
// into an accumulator, addFn folds in the next ones, mergeFn combines the
// accumulators of merged sessions, finishFn turns the accumulator into
// output when the window fires.
type incremental[K comparable, T, ACC, OUT any] struct {
	firstFn  func(v T) ACC
	addFn    func(acc ACC, v T) ACC
	mergeFn  func(a, b ACC) ACC
	finishFn func(key K, w Window, acc ACC, emit func(OUT)) error
	codec    state.Codec[ACC]
	st       *state.NamespacedValueState[K, Window, ACC]
}

func (c *incremental[K, T, ACC, OUT]) open(b *state.Backend[K]) {
	c.st = state.MustNamespacedValueWithCodecs[K, Window, ACC](b, contentsName, WindowCodec{}, c.codec)
	c.st.OrderNamespaces(opensBefore)
}

func (c *incremental[K, T, ACC, OUT]) add(sw Window, v T, _ int64) bool {
	return !c.st.Modify(sw, func(acc ACC, ok bool) ACC {
		if ok {
			return c.addFn(acc, v)
		}
		return c.firstFn(v)
	})
}

func (c *incremental[K, T, ACC, OUT]) fire(key K, w, sw Window, emit func(OUT)) error {
	acc, ok := c.st.Value(sw)
	if !ok {
		return nil
	}
	return c.finishFn(key, w, acc, emit)
}

func (c *incremental[K, T, ACC, OUT]) clear(sw Window) { c.st.Clear(sw) }

func (c *incremental[K, T, ACC, OUT]) merge(target Window, sources []Window) {
	c.st.MergeNamespaces(target, sources, c.mergeFn)
}

// buffered keeps every record of a (key, window) in list state, for
// Process functions that need them all.
type buffered[K comparable, T, OUT any] struct {
	f     func(key K, w Window, elems []T, emit func(OUT)) error
	codec state.Codec[T]
	st    *state.NamespacedListState[K, Window, T]
}

func (c *buffered[K, T, OUT]) open(b *state.Backend[K]) {
	c.st = state.MustNamespacedListWithCodecs[K, Window, T](b, contentsName, WindowCodec{}, c.codec)
	c.st.OrderNamespaces(opensBefore)
}

// opensBefore orders windows by end, then start: the order in which a key
// usually gets them (its next window ends later), which the state uses to
// know a key's next window is new without looking at the ones it holds.
func opensBefore(a, b Window) bool {
	return a.End < b.End || (a.End == b.End && a.Start < b.Start)
}

func (c *buffered[K, T, OUT]) add(sw Window, v T, _ int64) bool {
	fresh := len(c.st.Get(sw)) == 0
	c.st.Add(sw, v)
	return fresh
}

func (c *buffered[K, T, OUT]) fire(key K, w, sw Window, emit func(OUT)) error {
	elems := c.st.Get(sw)
	if len(elems) == 0 {
		return nil
	}
	return c.f(key, w, elems, emit)
}

func (c *buffered[K, T, OUT]) clear(sw Window) { c.st.Clear(sw) }

func (c *buffered[K, T, OUT]) merge(target Window, sources []Window) {
	c.st.MergeNamespaces(target, sources)
}
