package kafkastore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/rawjson"
)

// A state record's value is a binary encoding of the agent.ActionState,
// version byte stateV1 first; records written before it hold the state's
// JSON (first byte '{'), which decodeState still reads. Decoding the
// binary form costs a few allocations and no reflection for what the
// operator records (calls, memory writes and string outputs), so a
// restored store answers Get at a map lookup plus well under a
// microsecond, where decoding JSON took ~25 µs.
//
// Layout (uvarint: unsigned varint; varint: zigzag varint; bytes: uvarint
// length then the bytes):
//
//	stateV1
//	id:        uvarint 0 (nil key) or 1 + length and the key, varint seq, varint event, bytes event type, 32 bytes digest, bytes action
//	pos:       varint seq, varint event, varint action
//	uvarint key group, byte flags (flagCompleted)
//	short, sensory: uvarint n, n × (bytes name, bytes JSON); uvarint n, n × bytes name (deleted)
//	sent:      uvarint n, n × event
//	calls:     uvarint n, n × (bytes name, bytes args digest, byte flags, [bytes result], bytes error)
//
// An event is bytes type, a value, attributes (tagNone, or tagJSON and
// bytes JSON), varint id, varint parent, bytes action. A value is tagNone
// (nil), tagString and bytes (a valid UTF-8 string: what JSON gives back
// for it) or tagJSON and its JSON (anything else: decoded as
// encoding/json decodes into an any, so the state is the one a JSON round
// trip gives).
const (
	stateV1 = 0x01

	flagCompleted = 1 << 0

	callHasResult = 1 << 0
	callFailed    = 1 << 1
	callPending   = 1 << 2

	tagNone   = 0
	tagString = 1
	tagJSON   = 2
)

// appendState appends the encoding of st to b. RawMessages (memory
// values, call results) must be valid JSON, as json.Marshal requires.
func appendState(b []byte, st *agent.ActionState) ([]byte, error) {
	b = append(b, stateV1)
	id := &st.ID
	if id.Key == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(id.Key))+1)
		b = append(b, id.Key...)
	}
	b = binary.AppendVarint(b, id.Seq)
	b = binary.AppendVarint(b, id.EventID)
	b = appendString(b, id.EventType)
	b = append(b, id.EventDigest[:]...)
	b = appendString(b, id.Action)
	b = binary.AppendVarint(b, st.Pos.Seq)
	b = binary.AppendVarint(b, st.Pos.EventID)
	b = binary.AppendVarint(b, int64(st.Pos.Action))
	b = binary.AppendUvarint(b, uint64(st.KeyGroup))
	var flags byte
	if st.Completed {
		flags |= flagCompleted
	}
	b = append(b, flags)
	var err error
	for _, mw := range [2]*agent.MemoryWrites{&st.Short, &st.Sensory} {
		b = binary.AppendUvarint(b, uint64(len(mw.Set)))
		for k, v := range mw.Set {
			if v == nil {
				v = json.RawMessage("null") // as json.Marshal writes it
			} else if !validJSON(v) {
				return b, fmt.Errorf("memory value %q is not valid JSON", k)
			}
			b = appendString(b, k)
			b = appendBytes(b, v)
		}
		b = binary.AppendUvarint(b, uint64(len(mw.Deleted)))
		for _, k := range mw.Deleted {
			b = appendString(b, k)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(st.Sent)))
	for i := range st.Sent {
		if b, err = appendEvent(b, &st.Sent[i]); err != nil {
			return b, err
		}
	}
	b = binary.AppendUvarint(b, uint64(len(st.Calls)))
	for i := range st.Calls {
		c := &st.Calls[i]
		b = appendString(b, c.Name)
		b = appendString(b, c.ArgsDigest)
		var f byte
		if len(c.Result) > 0 {
			f |= callHasResult
		}
		if c.Failed {
			f |= callFailed
		}
		if c.Pending {
			f |= callPending
		}
		b = append(b, f)
		if len(c.Result) > 0 {
			if !validJSON(c.Result) {
				return b, fmt.Errorf("the result of call %q is not valid JSON", c.Name)
			}
			b = appendBytes(b, c.Result)
		}
		b = appendString(b, c.Error)
	}
	return b, nil
}

// validJSON reports whether m is valid JSON, quickly when it is compact.
func validJSON(m []byte) bool { return rawjson.CompactSafe(m) || json.Valid(m) }

func appendEvent(b []byte, ev *agent.Event) ([]byte, error) {
	b = appendString(b, ev.Type)
	if v, ok := ev.Value.(string); ok && utf8.ValidString(v) {
		b = append(b, tagString)
		b = appendString(b, v)
	} else if ev.Value == nil {
		b = append(b, tagNone)
	} else {
		js, err := json.Marshal(ev.Value)
		if err != nil {
			return b, fmt.Errorf("the value of event %q: %w", ev.Type, err)
		}
		b = append(b, tagJSON)
		b = appendBytes(b, js)
	}
	if len(ev.Attrs) == 0 {
		b = append(b, tagNone)
	} else {
		js, err := json.Marshal(ev.Attrs)
		if err != nil {
			return b, fmt.Errorf("the attributes of event %q: %w", ev.Type, err)
		}
		b = append(b, tagJSON)
		b = appendBytes(b, js)
	}
	b = binary.AppendVarint(b, ev.ID)
	b = binary.AppendVarint(b, ev.Parent)
	return appendString(b, ev.Action), nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errCorrupt = errors.New("truncated or corrupt state")

// decoder reads a binary state. Strings (str) and byte slices (the key,
// JSON values) alias raw, which the store never modifies once it holds it
// (decodeState's contract).
type decoder struct {
	raw []byte
	str string
	off int
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.off = len(d.raw)
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.raw[d.off:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.raw[d.off:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte() byte {
	if d.off >= len(d.raw) {
		d.fail()
		return 0
	}
	d.off++
	return d.raw[d.off-1]
}

// span returns the bounds of the next length-prefixed field.
func (d *decoder) span() (int, int) {
	n := d.uvarint()
	if n > uint64(len(d.raw)-d.off) {
		d.fail()
		return d.off, d.off
	}
	from := d.off
	d.off += int(n)
	return from, d.off
}

func (d *decoder) bytes() []byte {
	from, to := d.span()
	if from == to {
		return nil
	}
	return d.raw[from:to:to]
}

func (d *decoder) string() string {
	from, to := d.span()
	return d.str[from:to]
}

// count reads a count of items each at least min bytes long, refusing one
// the rest of the value cannot hold (a corrupt count must not allocate).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64((len(d.raw)-d.off)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

// decodeState decodes a state record's value: the binary form, or the
// JSON that earlier versions wrote. The state's strings and byte slices
// alias raw: nothing may modify raw afterwards.
func decodeState(raw []byte) (*agent.ActionState, error) {
	if len(raw) > 0 && raw[0] == '{' {
		var st agent.ActionState
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	if len(raw) == 0 || raw[0] != stateV1 {
		return nil, fmt.Errorf("unknown state format (first byte %#x; written by a newer weir?)", firstByte(raw))
	}
	d := decoder{raw: raw, str: unsafe.String(&raw[0], len(raw)), off: 1}
	// One allocation for the state and, in the usual case, its one call
	// and one event.
	m := new(stateMem)
	st := &m.st
	if n := d.uvarint(); n > uint64(len(raw)-d.off+1) {
		d.fail()
	} else if n > 0 {
		st.ID.Key = raw[d.off : d.off+int(n-1) : d.off+int(n-1)]
		d.off += int(n - 1)
	}
	st.ID.Seq = d.varint()
	st.ID.EventID = d.varint()
	st.ID.EventType = d.string()
	if len(raw)-d.off < 32 {
		d.fail()
	} else {
		copy(st.ID.EventDigest[:], raw[d.off:])
		d.off += 32
	}
	st.ID.Action = d.string()
	st.Pos.Seq = d.varint()
	st.Pos.EventID = d.varint()
	st.Pos.Action = int(d.varint())
	st.KeyGroup = int(d.uvarint())
	st.Completed = d.byte()&flagCompleted != 0
	for _, mw := range [2]*agent.MemoryWrites{&st.Short, &st.Sensory} {
		if n := d.count(2); n > 0 {
			mw.Set = make(map[string]json.RawMessage, n)
			for range n {
				k := d.string()
				mw.Set[k] = d.bytes()
			}
		}
		if n := d.count(1); n > 0 {
			mw.Deleted = make([]string, n)
			for i := range mw.Deleted {
				mw.Deleted[i] = d.string()
			}
		}
	}
	if n := d.count(6); n == 1 {
		st.Sent = m.sent[:]
	} else if n > 1 {
		st.Sent = make([]agent.Event, n)
	}
	if len(st.Sent) > 0 {
		for i := range st.Sent {
			if err := d.event(&st.Sent[i]); err != nil {
				return nil, err
			}
		}
	}
	if n := d.count(4); n == 1 {
		st.Calls = m.calls[:]
	} else if n > 1 {
		st.Calls = make([]agent.CallResult, n)
	}
	if len(st.Calls) > 0 {
		for i := range st.Calls {
			c := &st.Calls[i]
			c.Name = d.string()
			c.ArgsDigest = d.string()
			f := d.byte()
			c.Failed, c.Pending = f&callFailed != 0, f&callPending != 0
			if f&callHasResult != 0 {
				c.Result = d.bytes()
			}
			c.Error = d.string()
		}
	}
	if d.err == nil && d.off != len(raw) {
		d.err = errCorrupt
	}
	if d.err != nil {
		return nil, d.err
	}
	return st, nil
}

// stateMem holds a decoded state with room for one event and one call.
type stateMem struct {
	st    agent.ActionState
	sent  [1]agent.Event
	calls [1]agent.CallResult
}

func (d *decoder) event(ev *agent.Event) error {
	ev.Type = d.string()
	switch d.byte() {
	case tagNone:
	case tagString:
		ev.Value = d.string()
	case tagJSON:
		if err := json.Unmarshal(d.bytes(), &ev.Value); err != nil {
			return fmt.Errorf("the value of event %q: %w", ev.Type, err)
		}
	default:
		d.fail()
	}
	switch d.byte() {
	case tagNone:
	case tagJSON:
		if err := json.Unmarshal(d.bytes(), &ev.Attrs); err != nil {
			return fmt.Errorf("the attributes of event %q: %w", ev.Type, err)
		}
	default:
		d.fail()
	}
	ev.ID = d.varint()
	ev.Parent = d.varint()
	ev.Action = d.string()
	return nil
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
