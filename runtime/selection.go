package runtime

import "slices"

// Input selection: the reading of the inputs of a two-input operator that
// implements InputSelectable (operator.go states the contract).
//
// Such an input processes its batches record by record, asking the
// selection before each record. The batches it has received and not
// finished wait in q, in arrival order: a batch stopped in the middle by a
// deselection (off records done), and the batches of channels blocked by
// an alignment (the stash of other operators' inputs). resume goes through
// q from the start every time, skipping the batches of blocked channels:
// so each channel's batches are processed in order (I1), and none after a
// barrier before its checkpoint is taken.

// queued is a batch of q and how many of its records were processed.
type queued[T any] struct {
	b   batch[T]
	off int
}

// inputSel is the selection of one input of a selecting operator.
type inputSel struct {
	t     *task
	op    InputSelectable
	input int        // 1 or 2
	other *alignGate // the other input's
}

// open reports whether the input may be read now: the operator selects it,
// or an alignment waits only for it (InputSelectable's exception).
func (s *inputSel) open() bool {
	return s.op.SelectsInput(s.input) || s.t.align.delivered(s.other)
}

// selectBy makes the input one of a selecting operator: its batches go
// through handleSel, and the end of an alignment resumes q.
func (s *inputState[T]) selectBy(sel *inputSel) {
	s.sel = sel
	s.ag.drain = s.resume
}

// handleSel is handle for an input of a selecting operator.
func (s *inputState[T]) handleSel(b batch[T]) {
	s.q = append(s.q, queued[T]{b: b})
	s.resume()
}

// resume processes the records of q while the input is selected, and the
// control element of each batch it finishes. It does nothing when called
// again from inside itself (an alignment that ends while it runs drains
// every input): the outer call scans q again after each batch.
func (s *inputState[T]) resume() {
	if s.resuming {
		return
	}
	s.resuming = true
	t := s.sel.t
	for i := 0; i < len(s.q) && t.err == nil; {
		if s.ag.blocked[s.q[i].b.ch] {
			i++
			continue
		}
		for s.q[i].off < len(s.q[i].b.recs) {
			if t.err != nil || !s.sel.open() {
				s.resuming = false
				return
			}
			e := &s.q[i]
			r := e.b.recs[e.off]
			e.off++
			s.to.Collect(r)
		}
		b := s.q[i].b
		s.q = slices.Delete(s.q, i, i+1)
		s.g.release(b)
		s.control(b)
		// The control element may have blocked a channel, or ended an
		// alignment and unblocked every channel (whose batches may come
		// before i in q): scan from the start.
		i = 0
	}
	s.resuming = false
}

// control handles a batch's control element, after its records.
func (s *inputState[T]) control(b batch[T]) {
	switch b.ctrl {
	case ctrlWatermark:
		s.valve.Watermark(int(b.ch), b.val)
	case ctrlIdle:
		s.valve.Idle(int(b.ch))
	case ctrlActive:
		s.valve.Active(int(b.ch))
	case ctrlBarrier:
		s.align.barrier(s.ag, int(b.ch), b.val)
	case ctrlEnd:
		if !s.ended[b.ch] {
			s.ended[b.ch] = true
			s.nEnded++
			s.align.channelEnded(s.ag, int(b.ch))
		}
	}
}
