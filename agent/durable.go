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
	"slices"

	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/internal/mutant"
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
	// storeErr is the first error of the store in this run: it fails the
	// job even with Options.ContinueOnError (and even if the action
	// swallowed it), since the store can no longer record.
	storeErr error
	// pending is the queued record of the last call's result (the store
	// is a Queuer), not yet known to be durable; settle waits for it.
	pending Pending
	// Counters of the operator, bumped from the action goroutine.
	onReplay, onDiverge func()
	// known is the input's runState.known (recall).
	known *bool
}

// failed records a store error of the run (the first one).
func (d *durableRun) failed(err error) {
	if d.storeErr == nil {
		d.storeErr = err
	}
}

// settle waits until the record of the last call's result, if one is
// queued, is durable. It is called before a durable call starts (so that
// at most one call per run has taken effect without its result recorded,
// as without Queuer) and when the action has returned (before its outputs
// can leave).
func (d *durableRun) settle() error {
	p := d.pending
	if p == nil {
		return d.storeErr
	}
	d.pending = nil
	if err := p.Wait(); err != nil {
		err = fmt.Errorf("agent: recording a durable call's result in the action-state store: %w", err)
		d.failed(err)
		return err
	}
	killpoint.Hit("agent.after-record")
	return nil
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
	return durable(c, name, args, fn, nil)
}

// DurableReconciled is Durable for calls whose effect can be looked up
// afterwards: before calling fn it records the call as pending. A restore
// that finds the call pending (fn was called but its result was not
// recorded: the process died in between) calls reconcile with the same
// idempotency key instead of repeating fn. reconcile reports whether the
// call took effect and, if so, its result, which is then recorded and
// returned; if it did not, fn is called. This closes the window Durable
// leaves for services that cannot dedupe on the idempotency key but can be
// asked. The pending record costs one more store write per call.
func DurableReconciled[T any](c *RunnerContext, name string, args any,
	fn func(ctx context.Context, idempotencyKey string) (T, error),
	reconcile func(ctx context.Context, idempotencyKey string) (result T, found bool, err error)) (T, error) {
	if reconcile == nil {
		return durable(c, name, args, fn, nil)
	}
	return durable(c, name, args, fn, reconcile)
}

func durable[T any](c *RunnerContext, name string, args any, fn func(context.Context, string) (T, error),
	reconcile func(context.Context, string) (T, bool, error)) (T, error) {
	var zero T
	ad, err := canonicalSum(nil, args)
	if err != nil {
		return zero, fmt.Errorf("agent: durable call %q: arguments are not JSON-serialisable: %w", name, err)
	}
	digest := hex.EncodeToString(ad[:16])
	d := c.durable
	id, err := c.RunID()
	if err != nil {
		return zero, err
	}
	var pos int
	if d != nil {
		pos = len(d.calls)
	} else {
		pos = c.plainCalls
		c.plainCalls++
	}
	key := idempotencyKey(id, pos, name)
	if d == nil {
		return fn(c.ctx, key)
	}
	// The previous call's result must be durable before this call can
	// take effect.
	if !mutant.On(mutant.AgentCallBeforeRecorded) {
		if err := d.settle(); err != nil {
			return zero, err
		}
	}
	// record records cr as the call's result: queued, when the store is
	// a Queuer and the caller need not wait (settle waits later), else
	// written and waited for.
	record := func(cr CallResult, wait bool) error {
		if pos < len(d.calls) {
			d.calls[pos] = cr
		} else {
			d.calls = append(d.calls, cr)
		}
		st := &ActionState{ID: id, Pos: d.pos, KeyGroup: d.kg, Calls: slices.Clone(d.calls)}
		var err error
		q, queue := d.store.(Queuer)
		if queue && !wait {
			d.pending, err = q.PutQueued(st)
		} else {
			err = d.store.Put(st)
		}
		if err != nil {
			err = fmt.Errorf("agent: recording durable call %q in the action-state store: %w", name, err)
			d.failed(err)
			return err
		}
		if d.pending == nil && !cr.Pending {
			killpoint.Hit("agent.after-record") // else settle hits it
		}
		return nil
	}
	result := func(v T, err error) (CallResult, error) {
		cr := CallResult{Name: name, ArgsDigest: digest}
		if err != nil {
			cr.Failed, cr.Error = true, err.Error()
			return cr, nil
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			return cr, fmt.Errorf("%w: call %q: %v", ErrNotSerialisable, name, merr)
		}
		cr.Result = b
		return cr, nil
	}
	if !d.diverged && pos < len(d.recorded) {
		r := d.recorded[pos]
		if r.Name == name && r.ArgsDigest == digest {
			if r.Pending && reconcile != nil {
				v, found, err := reconcile(c.ctx, key)
				if err != nil {
					return zero, fmt.Errorf("agent: reconciling durable call %q: %w", name, err)
				}
				if found {
					cr, err := result(v, nil)
					if err != nil {
						return v, err
					}
					if err := record(cr, false); err != nil {
						return v, err
					}
					return v, nil
				}
				// It did not take effect: call it below, in place.
				d.calls = append(d.calls, r)
				goto live
			}
			if !r.Pending {
				c.replayedCall = true
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
			// Pending without a reconciler: call again.
		} else {
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
	}
	if reconcile != nil {
		// The pending mark must be durable before the call can take
		// effect: a restore reconciles only a call it finds pending.
		if err := record(CallResult{Name: name, ArgsDigest: digest, Pending: true}, true); err != nil {
			return zero, err
		}
	}
live:
	killpoint.Hit("agent.before-call")
	v, err := fn(c.ctx, key)
	if err != nil && c.ctx.Err() != nil {
		return v, err // the operator is closing: record nothing more
	}
	killpoint.Hit("agent.after-call")
	cr, rerr := result(v, err)
	if rerr != nil {
		return v, rerr
	}
	if perr := record(cr, false); perr != nil {
		return v, perr
	}
	return v, err
}

// nonDurableCalls implements host.
func (o *operator[K, IN, OUT]) nonDurableCalls() bool { return o.opts.NonDurableCalls }

func (o *operator[K, IN, OUT]) callStat(name string) *callStat { return o.calls[name] }

// idempotencyKey derives the idempotency key of the call at position pos
// named name of run id.
func idempotencyKey(id RunID, pos int, name string) string {
	if mutant.On(mutant.AgentKeyPerInput) {
		id = RunID{Key: id.Key, Seq: id.Seq}
		name = ""
	}
	var buf [256]byte
	b := id.appendEncode(buf[:0])
	b = binary.AppendUvarint(b, uint64(pos))
	b = appendLP(b, []byte(name))
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}
