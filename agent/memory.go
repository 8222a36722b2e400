package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
type Memory struct {
	name   string
	base   map[string]json.RawMessage // committed; read-only here
	writes map[string]json.RawMessage // buffered; nil value: deleted
}

func (m *Memory) lookup(name string) (json.RawMessage, bool) {
	if v, ok := m.writes[name]; ok {
		return v, v != nil
	}
	v, ok := m.base[name]
	return v, ok
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

// Set stores v (which must be JSON-serialisable) under name.
func (m *Memory) Set(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent: %s memory %q: value %T is not JSON-serialisable: %w", m.name, name, v, err)
	}
	if m.writes == nil {
		m.writes = make(map[string]json.RawMessage, 4)
	}
	m.writes[name] = b
	return nil
}

// Delete removes name.
func (m *Memory) Delete(name string) {
	if m.writes == nil {
		m.writes = make(map[string]json.RawMessage, 4)
	}
	m.writes[name] = nil
}

// Names returns the names set, sorted.
func (m *Memory) Names() []string {
	set := maps.Clone(m.base)
	if set == nil {
		set = map[string]json.RawMessage{}
	}
	for k, v := range m.writes {
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
