package window

import (
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
)

// mapping is one active session window of a key and the state window under
// which its contents live. When sessions merge, the contents of all merged
// windows are folded into the state window of one of them, and the merged
// result keeps that state window: contents never move to a new namespace,
// they only absorb others (Flink's MergingWindowSet does the same).
type mapping struct {
	win   Window
	state Window
}

// The merging set of a key is a []mapping in keyed value state. Its
// invariant (I6): no two windows in it intersect. Hence a new window
// merges with exactly the windows it intersects itself (their cover cannot
// reach another window without that window intersecting one of them), and
// sessions of one key are few, so a linear scan is the right structure.
//
// A set read from the state is modified in place only when no snapshot
// may read it (owned, from ValueState.SnapshotMayRead): a copy-on-write
// snapshot in progress (state I10) may still be reading the same backing
// array, and it takes its copy of a key group only when the state is
// written (Update), which comes after the edit. While one may, edits build
// a new slice; appending past the set's length is safe either way (a
// snapshot's slice ends before it). Without a checkpoint in flight a merge
// or a removal then allocates nothing.

func find(set []mapping, w Window) int {
	for i := range set {
		if set[i].win == w {
			return i
		}
	}
	return -1
}

// removeAt returns set without its element i, in a new slice.
func removeAt(set []mapping, i int) []mapping {
	if mutant.On(mutant.WindowSessionEditInPlace) {
		copy(set[i:], set[i+1:])
		set[len(set)-1] = mapping{}
		return set[:len(set)-1]
	}
	out := make([]mapping, 0, len(set)-1)
	out = append(out, set[:i]...)
	return append(out, set[i+1:]...)
}

// removeFrom is removeAt, in place when the set is owned (no snapshot may
// read it).
func removeFrom(set []mapping, i int, owned bool) []mapping {
	if !owned {
		return removeAt(set, i)
	}
	return append(set[:i], set[i+1:]...)
}

// storeSet writes the current key's merging set back (I5: an empty set
// leaves no state behind).
func (o *operator[K, T, OUT]) storeSet(set []mapping) {
	if len(set) == 0 {
		o.sessions.Clear()
		return
	}
	o.sessions.Update(set)
}

// addMerging adds v to the windows in o.scratch, merging each with the
// current key's sessions first, and reports whether any window took it.
func (o *operator[K, T, OUT]) addMerging(k K, r runtime.Record[T], wm int64) (taken bool, err error) {
	set, _ := o.sessions.Value()
	owned := !o.sessions.SnapshotMayRead()
	if o.trig != nil {
		o.curKey, o.curKG = k, o.backend.CurrentKeyGroup()
	}
	for _, nw := range o.scratch {
		var actual, sw Window
		var ok bool
		set, actual, sw, ok = o.mergeWindow(set, owned, k, nw, wm)
		if !ok {
			continue // I3: a late window that merged with nothing
		}
		taken = true
		o.contents.add(sw, r.Value, r.Timestamp)
		// Timers are registered on every record: the window may be new
		// (merged) and the timer queue drops duplicates.
		if o.trig != nil {
			err = o.onElement(k, actual, sw, r)
			o.registerCleanup(actual)
		} else {
			err = o.afterAdd(k, actual, sw, true, wm)
		}
		if err != nil {
			break
		}
	}
	o.storeSet(set)
	return taken, err
}

// mergeWindow adds nw to set and returns the updated set, the session
// window nw ended up in and that window's state window; ok is false if nw
// is late and merged with nothing (then set is unchanged). owned says set
// may be edited in place (see the note on the merging set above).
//
// When windows merge, the trigger and cleanup timers of the windows merged
// away are deleted and their contents folded into the state window of the
// first of them; the caller registers the timers of the result.
func (o *operator[K, T, OUT]) mergeWindow(set []mapping, owned bool, k K, nw Window, wm int64) (_ []mapping, actual, sw Window, ok bool) {
	cover, n, last := nw, 0, -1
	for i := range set {
		if set[i].win.Intersects(nw) {
			cover = cover.Cover(set[i].win)
			n++
			last = i
		}
	}
	switch {
	case n == 0:
		if o.eventTime && o.cleanupTime(nw) <= wm {
			return set, nw, nw, false
		}
		return append(set, mapping{win: nw, state: nw}), nw, nw, true
	case n == 1 && set[last].win == cover:
		// nw lies inside an existing session: nothing changes.
		return set, cover, set[last].state, true
	}
	o.merged, o.mergedState = o.merged[:0], o.mergedState[:0]
	// In place, kept overwrites only elements the loop has passed.
	kept := set[:0]
	if !owned && !mutant.On(mutant.WindowSessionEditInPlace) {
		kept = make([]mapping, 0, len(set)-n+1)
	}
	for _, m := range set {
		if m.win.Intersects(nw) {
			o.merged = append(o.merged, m.win)
			o.mergedState = append(o.mergedState, m.state)
		} else {
			kept = append(kept, m)
		}
	}
	kg := o.backend.CurrentKeyGroup()
	if o.trig != nil {
		o.mergeTrigger(k, kg, cover, o.merged)
	} else {
		for _, m := range o.merged {
			if o.eventTime {
				o.timers.DeleteEventTimeTimer(k, kg, m, m.MaxTimestamp())
				o.timers.DeleteEventTimeTimer(k, kg, m, o.cleanupTime(m))
			} else {
				o.timers.DeleteProcessingTimeTimer(k, kg, m, m.MaxTimestamp())
			}
		}
	}
	sw = o.mergedState[0]
	o.contents.merge(sw, o.mergedState[1:])
	return append(kept, mapping{win: cover, state: sw}), cover, sw, true
}
