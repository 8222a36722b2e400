package agent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// durableRun is the store side of one action run: the state recorded so
// far and, after a restore, the calls recorded by an earlier attempt.
type durableRun struct {
	store    ActionStateStore
	id       RunID
	pos      Position
	kg       int
	recorded []CallResult // from an earlier attempt
	calls    []CallResult // this attempt's, in order
	diverged bool
	// Counters of the operator, bumped from the action goroutine.
	onReplay, onDiverge func()
}

// RecordedError is the error of a durable call replayed from the store:
// the original error's text (its type is not preserved).
type RecordedError struct{ Msg string }

// Error returns the recorded error text.
func (e *RecordedError) Error() string { return e.Msg }

// ErrNotSerialisable is wrapped by the error of a durable call whose result
// cannot be recorded as JSON.
var ErrNotSerialisable = errors.New("agent: durable call result is not JSON-serialisable")

// Durable runs fn as a durable call named name with arguments args (any
// JSON-serialisable value identifying what is asked), recording its result
// (or error) in the operator's action-state store as soon as it returns.
// When the action runs again after a restore, a call recorded at the same
// position with the same name and arguments returns the recorded result
// (or a RecordedError) without calling fn. A call that differs from the
// one recorded at its position is a divergence: the recorded calls from
// there on, and the key's recorded future, are discarded, and execution
// continues live.
//
// fn gets an idempotency key derived from the run's identity and the
// call's position and name: the same on every attempt of this call, so
// that a service honouring it can close the window between "the call took
// effect" and "the result was recorded". Without a store (Options.Store
// nil) Durable just calls fn.
func Durable[T any](c *RunnerContext, name string, args any, fn func(ctx context.Context, idempotencyKey string) (T, error)) (T, error) {
	var zero T
	a, err := canonicalJSON(args)
	if err != nil {
		return zero, fmt.Errorf("agent: durable call %q: arguments are not JSON-serialisable: %w", name, err)
	}
	ad := sha256.Sum256(a)
	digest := hex.EncodeToString(ad[:16])
	d := c.durable
	id, err := c.RunID()
	if err != nil {
		return zero, err
	}
	pos := 0
	if d != nil {
		pos = len(d.calls)
	}
	key := idempotencyKey(id, pos, name)
	if d == nil {
		return fn(c.ctx, key)
	}
	if !d.diverged && pos < len(d.recorded) {
		r := d.recorded[pos]
		if r.Name == name && r.ArgsDigest == digest {
			d.calls = append(d.calls, r)
			if d.onReplay != nil {
				d.onReplay()
			}
			if r.Failed {
				return zero, &RecordedError{Msg: r.Error}
			}
			var v T
			if len(r.Result) > 0 {
				if err := json.Unmarshal(r.Result, &v); err != nil {
					return zero, fmt.Errorf("agent: durable call %q: recorded result does not decode into %v: %w", name, reflect.TypeFor[T](), err)
				}
			}
			return v, nil
		}
		c.Logger().Warn("agent: durable call diverged from the recorded run; discarding the recorded future of the key",
			"position", pos, "recorded", r.Name, "asked", name)
		d.diverged = true
		if d.onDiverge != nil {
			d.onDiverge()
		}
		next := d.pos
		next.Action++
		if err := d.store.DiscardFrom(id.Key, next); err != nil {
			return zero, fmt.Errorf("agent: action-state store: %w", err)
		}
	}
	v, err := fn(c.ctx, key)
	if err != nil && c.ctx.Err() != nil {
		return v, err // the operator is closing: record nothing
	}
	cr := CallResult{Name: name, ArgsDigest: digest}
	if err != nil {
		cr.Failed, cr.Error = true, err.Error()
	} else {
		b, merr := json.Marshal(v)
		if merr != nil {
			return v, fmt.Errorf("%w: call %q: %v", ErrNotSerialisable, name, merr)
		}
		cr.Result = b
	}
	d.calls = append(d.calls, cr)
	if perr := d.store.Put(&ActionState{ID: id, Pos: d.pos, KeyGroup: d.kg, Calls: d.calls}); perr != nil {
		return v, fmt.Errorf("agent: recording durable call %q in the action-state store: %w", name, perr)
	}
	return v, err
}

// idempotencyKey derives the idempotency key of the call at position pos
// named name of run id.
func idempotencyKey(id RunID, pos int, name string) string {
	b := id.Encode()
	b = binary.AppendUvarint(b, uint64(pos))
	b = appendLP(b, []byte(name))
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}
