package runtime

// Barrier alignment.
//
// A checkpoint barrier n travels through every channel after the records
// that precede checkpoint n. A task with inputs snapshots its operators
// once barrier n has arrived on every live channel of every input:
//
//	exactly-once: a channel that delivered barrier n is blocked; its later
//	    batches are stashed (at most BuffersPerChannel of them, since their
//	    buffers are not released: the producer then blocks, so the stash is
//	    bounded, I4). When the last barrier arrives: snapshot, forward the
//	    barrier, unblock, and process the stash in arrival order.
//	at-least-once: nothing is blocked; records after barrier n on a fast
//	    channel are processed before the snapshot, so a restore replays
//	    them again (duplicates, never loss).
//
// A barrier newer than the one being aligned aborts the older alignment
// (its checkpoint cannot complete: the coordinator times it out). Barriers
// of checkpoints already completed or aborted here are ignored. A channel
// that ends counts as having delivered every barrier.

type aligner struct {
	t        *task
	blocking bool  // exactly-once
	id       int64 // checkpoint being aligned; 0: none
	done     int64 // highest checkpoint completed or abandoned here
	pending  int   // live channels that have not delivered barrier id
	gates    []*alignGate
}

// alignGate is the aligner's view of one input gate.
type alignGate struct {
	seen    []bool
	blocked []bool
	ended   []bool
	unseen  int    // live channels that have not delivered barrier id (while a.id != 0)
	drain   func() // processes the gate's stash
}

func (a *aligner) addGate(n int, drain func()) *alignGate {
	g := &alignGate{seen: make([]bool, n), blocked: make([]bool, n), ended: make([]bool, n), drain: drain}
	a.gates = append(a.gates, g)
	return g
}

// live counts the live channels of every gate into its unseen and
// returns their sum: at the start of an alignment, none has delivered
// its barrier.
func (a *aligner) live() int {
	n := 0
	for _, g := range a.gates {
		g.unseen = 0
		for _, e := range g.ended {
			if !e {
				g.unseen++
			}
		}
		n += g.unseen
	}
	return n
}

func (a *aligner) barrier(g *alignGate, ch int, id int64) {
	if id <= a.done {
		return
	}
	if id > a.id {
		if a.id != 0 {
			a.t.job.coord.declined(a.id)
			a.release(a.id)
		}
		a.id = id
		for _, gg := range a.gates {
			clear(gg.seen)
		}
		a.pending = a.live()
	}
	if g.seen[ch] {
		return
	}
	g.seen[ch] = true
	g.unseen--
	a.pending--
	if a.blocking {
		g.blocked[ch] = true
	}
	if a.pending == 0 {
		a.complete()
	}
}

func (a *aligner) channelEnded(g *alignGate, ch int) {
	g.ended[ch] = true
	if a.id != 0 && !g.seen[ch] {
		g.seen[ch] = true
		g.unseen--
		a.pending--
		if a.pending == 0 {
			a.complete()
		}
	}
}

// abort abandons the alignment of id (the coordinator aborted it).
func (a *aligner) abort(id int64) {
	if id > a.done {
		a.done = id
	}
	if a.id != 0 && a.id <= id {
		a.release(a.id)
	}
}

func (a *aligner) complete() {
	id := a.id
	a.t.checkpoint(id)
	a.release(id)
}

// release ends the alignment of id: unblock every channel and process the
// stashed batches (which may start the next alignment).
func (a *aligner) release(id int64) {
	if id > a.done {
		a.done = id
	}
	a.id = 0
	for _, g := range a.gates {
		clear(g.blocked)
	}
	for _, g := range a.gates {
		g.drain()
	}
}

// delivered reports whether an alignment is pending and every live channel
// of g has delivered its barrier: g can do nothing more for it, only the
// other inputs can (InputSelectable's exception).
func (a *aligner) delivered(g *alignGate) bool {
	return a.id != 0 && g.unseen == 0
}
