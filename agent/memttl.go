package agent

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/timer"
)

// applyShort commits an action's short-term writes to the key's memory on
// the subtask goroutine: values, deletions and TTLs (a deadline and a
// timer per entry with one). It returns the updates to send as
// TypeMemoryUpdated events (none unless an action listens to them): one
// per entry whose value changed, in the order of the names.
func (o *operator[K, IN, OUT]) applyShort(ks *keyState[K, IN], writes map[string]json.RawMessage) []MemoryUpdate {
	if len(writes) == 0 {
		return nil
	}
	listen := len(o.def.byType[TypeMemoryUpdated]) > 0
	var now int64
	if len(ks.expiry) > 0 || hasTTL(writes) {
		now = clock.NowMillis(o.Ctx.Clock)
	}
	var updates []MemoryUpdate
	apply := func(name string, v json.RawMessage) {
		old, had := ks.memory[name]
		if had {
			if d, ok := ks.expiry[name]; ok && d <= now {
				had = false
			}
		}
		if ttl, ok := writes[ttlPrefix+name]; ok && v != nil {
			ms, _ := strconv.ParseInt(string(ttl), 10, 64)
			o.setExpiry(ks, name, now+ms)
		} else {
			o.clearExpiry(ks, name)
		}
		if v == nil {
			delete(ks.memory, name)
		} else {
			if ks.memory == nil {
				ks.memory = make(map[string]json.RawMessage, len(writes))
			}
			ks.memory[name] = v
		}
		if listen && (had || v != nil) && !(had && v != nil && bytes.Equal(old, v)) {
			u := MemoryUpdate{Key: ks.boxed, Name: name, New: v}
			if had {
				u.Old = old
			}
			updates = append(updates, u)
		}
	}
	if !listen && len(writes) == 1 {
		for name, v := range writes {
			apply(name, v)
		}
	} else {
		for _, name := range slices.Sorted(maps.Keys(writes)) {
			if !strings.HasPrefix(name, ttlPrefix) {
				apply(name, writes[name])
			}
		}
	}
	if len(ks.memory) == 0 {
		ks.memory = nil
	}
	return updates
}

func hasTTL(writes map[string]json.RawMessage) bool {
	for k := range writes {
		if strings.HasPrefix(k, ttlPrefix) {
			return true
		}
	}
	return false
}

// setExpiry gives entry name of ks the deadline d and its timer, replacing
// the timer of an earlier deadline.
func (o *operator[K, IN, OUT]) setExpiry(ks *keyState[K, IN], name string, d int64) {
	if old, ok := ks.expiry[name]; ok {
		if old == d {
			return
		}
		o.ttl.DeleteProcessingTimeTimer(ks.key, ks.kg, name, old)
	}
	if ks.expiry == nil {
		ks.expiry = map[string]int64{}
	}
	ks.expiry[name] = d
	o.ttl.RegisterProcessingTimeTimer(ks.key, ks.kg, name, d)
}

// clearExpiry removes the TTL of entry name of ks, if it has one.
func (o *operator[K, IN, OUT]) clearExpiry(ks *keyState[K, IN], name string) {
	old, ok := ks.expiry[name]
	if !ok {
		return
	}
	o.ttl.DeleteProcessingTimeTimer(ks.key, ks.kg, name, old)
	delete(ks.expiry, name)
	if len(ks.expiry) == 0 {
		ks.expiry = nil
	}
}

// purgeExpired removes the entries of ks whose deadline has passed (no
// action of the key runs).
func (o *operator[K, IN, OUT]) purgeExpired(ks *keyState[K, IN]) {
	now := clock.NowMillis(o.Ctx.Clock)
	for name, d := range ks.expiry {
		if d <= now {
			o.ttl.DeleteProcessingTimeTimer(ks.key, ks.kg, name, d)
			delete(ks.expiry, name)
			delete(ks.memory, name)
			o.cExpired.Inc()
		}
	}
	if len(ks.expiry) == 0 {
		ks.expiry = nil
	}
	if len(ks.memory) == 0 {
		ks.memory = nil
	}
}

// scheduleTTL asks the runtime for a processing-time wake-up at ts unless
// an earlier one is pending (the TTL timers' head-change callback).
func (o *operator[K, IN, OUT]) scheduleTTL(ts int64) {
	if ts >= o.nextWake || o.closed {
		return
	}
	o.nextWake = ts
	o.Ctx.RegisterProcessingTimer(ts, o.wakeTTL)
}

// wakeTTL fires the due TTL timers and schedules the next wake-up.
func (o *operator[K, IN, OUT]) wakeTTL(now int64) {
	o.nextWake = math.MaxInt64
	if o.closed {
		return
	}
	o.ttl.AdvanceProcessingTime(now, o.expire)
	if next, ok := o.ttl.NextProcessingTime(); ok {
		o.scheduleTTL(next)
	}
}

// expire removes the entry of a TTL timer that fired, unless it was
// written again since (its deadline moved) or an action of the key is
// running and may be reading the memory: then expired entries go when the
// input finishes (they are invisible already).
func (o *operator[K, IN, OUT]) expire(t timer.Timer[K, string]) {
	ks, ok := o.lookup(t.Key, t.KeyGroup, false)
	if !ok {
		return
	}
	defer o.settle(ks)
	if ks.expiry[t.Namespace] != t.Timestamp {
		return
	}
	if ks.run != nil {
		ks.purgeDue = true
		return
	}
	delete(ks.expiry, t.Namespace)
	delete(ks.memory, t.Namespace)
	o.cExpired.Inc()
	if len(ks.expiry) == 0 {
		ks.expiry = nil
	}
	if len(ks.memory) == 0 {
		ks.memory = nil
	}
}
