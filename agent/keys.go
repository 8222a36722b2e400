package agent

// The keys' state in the job's keyed-state backend.
//
// The operator keeps each key's keyState in one value state of the backend
// the job configures (runtime.Config.StateBackend, state.Open), like every
// keyed operator, so checkpoints, restores and rescaling go through the
// key-group machinery of package state.
//
// In memory the backend holds the *keyState itself, which the operator
// changes in place: one lookup per record, and what a snapshot encodes is
// always current. On Pebble the backend holds encoded copies (package
// state's doc: a pointer held in state is not the stored value), so the
// operator keeps the *keyState of every key with work in live: the ready
// queue, completions and waits point at it. Invariants:
//
//	S1. A key is in live while it has an input running or waiting, is
//	    queued for a slot, or has a registered wait; every access to a key
//	    goes through lookup, which returns its live *keyState if it has one.
//	S2. A live key is written to the backend when it leaves live (settle,
//	    when it has no work left) and before every snapshot (flushLive), so
//	    the backend's entry is what the memory backend would hold whenever
//	    anything reads it.

import (
	"fmt"

	"github.com/weirproject/weir/state"
)

// lookup returns the state of key k (of key group kg), making an empty one
// if create and the key has none (ok is then true); it sets the backend's
// current key. On Pebble the state returned is live (S1) until settle.
func (o *operator[K, IN, OUT]) lookup(k K, kg int, create bool) (ks *keyState[K, IN], ok bool) {
	if o.live != nil {
		if ks, ok := o.live[k]; ok {
			return ks, true
		}
	}
	o.backend.SetCurrentKey(k, kg)
	ks, ok = o.keys.Value()
	switch {
	case !ok && !create:
		return nil, false
	case !ok:
		ks = &keyState[K, IN]{key: k, boxed: k, kg: kg}
		o.keys.Update(ks)
	case o.live != nil:
		// A copy decoded from Pebble: the fields that are not
		// checkpointed are rebuilt as a restore does.
		ks.key, ks.boxed, ks.kg = k, k, kg
	}
	if o.live != nil {
		o.live[k] = ks
	}
	return ks, true
}

// settle writes ks back to the backend and drops it from live when it has
// no work left (S2); in memory it does nothing (the backend holds ks).
func (o *operator[K, IN, OUT]) settle(ks *keyState[K, IN]) {
	if o.live == nil || ks.run != nil || ks.queued || ks.hasPending() || ks.waiter != nil {
		return
	}
	o.backend.SetCurrentKey(ks.key, ks.kg)
	o.keys.Update(ks)
	delete(o.live, ks.key)
}

// flushLive writes every live key to the backend, before a snapshot (S2).
func (o *operator[K, IN, OUT]) flushLive() {
	for k, ks := range o.live {
		o.backend.SetCurrentKey(k, ks.kg)
		o.keys.Update(ks)
	}
}

// openKeys opens the job's keyed-state backend and the keys' value state
// in it; on Pebble the operator keeps its live keys (S1).
func (o *operator[K, IN, OUT]) openKeys(opts state.Options) error {
	b, err := state.Open[K](opts, o.Ctx.KeyGroups)
	if err != nil {
		return fmt.Errorf("agent: opening the keyed-state backend: %w", err)
	}
	o.backend = b
	o.backend.SetKeyCodec(o.kc)
	o.keys, err = state.ValueWithCodec[K, *keyState[K, IN]](o.backend, "agent", keyStateCodec[K, IN]{def: o.def, in: state.JSONCodec[IN]()})
	if err != nil {
		return err
	}
	o.keysTab, _ = o.backend.Table(o.keys.Name())
	if b.Kind() == state.BackendPebble {
		o.live = map[K]*keyState[K, IN]{}
	}
	return nil
}
