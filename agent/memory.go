package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Memory is an action's view of one memory: short-term memory (per key,
// kept across the key's inputs, checkpointed with its keyed state) or
// sensory memory (per input, dropped when the input has finished).
//
// Values are stored as JSON. Reads see the memory as it was when the
// action started plus the action's own writes; writes are buffered and
// applied when the action finishes successfully (a failed action leaves no
// trace). A Memory belongs to one action run and is used from its
// goroutine only.
//
// Short-term entries may have a time to live (SetTTL): an entry whose
// deadline has passed is invisible, even before the timer that removes it
// has fired.
type Memory struct {
	name   string
	base   map[string]json.RawMessage // committed; read-only here
	writes map[string]json.RawMessage // buffered; nil value: deleted
	// expiry holds the committed entries' deadlines (processing time, ms;
	// read-only here), now the instant the run started: entries with a
	// deadline at or before now are invisible.
	expiry map[string]int64
	now    int64
	// short says this is short-term memory (the only one with TTLs).
	short bool
}

// ttlPrefix marks the buffered write that carries an entry's TTL (in
// milliseconds): the write travels with the others, so every action-state
// store records it and a replayed run applies it. User names cannot start
// with it.
const ttlPrefix = "\x00ttl\x00"

func (m *Memory) lookup(name string) (json.RawMessage, bool) {
	if v, ok := m.writes[name]; ok {
		return v, v != nil
	}
	v, ok := m.base[name]
	if ok && m.expired(name) {
		return nil, false
	}
	return v, ok
}

func (m *Memory) expired(name string) bool {
	d, ok := m.expiry[name]
	return ok && d <= m.now
}

// Has reports whether name is set.
func (m *Memory) Has(name string) bool {
	_, ok := m.lookup(name)
	return ok
}

// Get decodes the value of name into dst (a pointer) and reports whether
// it was set.
func (m *Memory) Get(name string, dst any) (bool, error) {
	raw, ok := m.lookup(name)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("agent: %s memory %q holds %s, which does not decode into %T: %w", m.name, name, abbrev(raw), dst, err)
	}
	return true, nil
}

// Raw returns the JSON of name.
func (m *Memory) Raw(name string) (json.RawMessage, bool) { return m.lookup(name) }

// Set stores v (which must be JSON-serialisable) under name, without a
// time to live (a TTL the entry had goes).
func (m *Memory) Set(name string, v any) error {
	return m.set(name, v, 0)
}

// SetTTL stores v under name in short-term memory for ttl (processing
// time, counted from when the action's writes are committed): then the
// entry expires, invisible at once to actions that start later and
// removed by a timer of the operator, which checkpoints it. Writing the
// entry again sets a new TTL (Set: none). Expiry is no memory update: it
// sends no TypeMemoryUpdated event. Sensory memory has no TTLs (it lasts
// one input).
func (m *Memory) SetTTL(name string, v any, ttl time.Duration) error {
	if !m.short {
		return fmt.Errorf("agent: %s memory %q: only short-term memory has TTLs (sensory memory lasts one input); use Set", m.name, name)
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("agent: %s memory %q: TTL %v: want at least 1ms (or Set, for no TTL)", m.name, name, ttl)
	}
	return m.set(name, v, ttl)
}

func (m *Memory) set(name string, v any, ttl time.Duration) error {
	if strings.HasPrefix(name, ttlPrefix) {
		return fmt.Errorf("agent: %s memory: name %q starts with a reserved prefix; choose another name", m.name, name)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent: %s memory %q: value %T is not JSON-serialisable: %w", m.name, name, v, err)
	}
	if m.writes == nil {
		m.writes = make(map[string]json.RawMessage, 4)
	}
	m.writes[name] = b
	if ttl > 0 {
		m.writes[ttlPrefix+name] = strconv.AppendInt(nil, ttl.Milliseconds(), 10)
	} else if m.short {
		delete(m.writes, ttlPrefix+name)
	}
	return nil
}

// Delete removes name.
func (m *Memory) Delete(name string) {
	if m.writes == nil {
		m.writes = make(map[string]json.RawMessage, 4)
	}
	m.writes[name] = nil
	delete(m.writes, ttlPrefix+name)
}

// Names returns the names set, sorted.
func (m *Memory) Names() []string {
	set := maps.Clone(m.base)
	if set == nil {
		set = map[string]json.RawMessage{}
	}
	for k := range set {
		if m.expired(k) {
			delete(set, k)
		}
	}
	for k, v := range m.writes {
		if strings.HasPrefix(k, ttlPrefix) {
			continue
		}
		if v == nil {
			delete(set, k)
		} else {
			set[k] = v
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Recall returns the value of name in m as a T, and whether it was set.
func Recall[T any](m *Memory, name string) (T, bool, error) {
	var v T
	ok, err := m.Get(name, &v)
	return v, ok, err
}

// apply writes the buffered writes into dst (creating it if nil) and
// returns it.
func applyWrites(dst, writes map[string]json.RawMessage) map[string]json.RawMessage {
	if len(writes) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]json.RawMessage, len(writes))
	}
	for k, v := range writes {
		if v == nil {
			delete(dst, k)
		} else {
			dst[k] = v
		}
	}
	if len(dst) == 0 {
		return nil
	}
	return dst
}

func abbrev(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
