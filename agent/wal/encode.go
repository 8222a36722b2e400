package wal

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/rawjson"
)

// The payload of a put record is json.Marshal of the agent.ActionState.
// appendState writes those bytes without reflection for the fields of
// fixed type and hands encoding/json only what it must (event values and
// attributes of any type); the format is the same, pinned by the golden
// log and by a property test against json.Marshal.

// encoder is the reusable state of one record's encoding.
type encoder struct {
	buf []byte        // the record: header, then payload
	js  bytes.Buffer  // encoding/json output
	enc *json.Encoder // writes into js
}

var encoderPool = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.js)
	return e
}}

func getEncoder() *encoder { return encoderPool.Get().(*encoder) }

func putEncoder(e *encoder) {
	if cap(e.buf) > 1<<20 || e.js.Cap() > 1<<20 {
		return // let unusually large buffers go
	}
	encoderPool.Put(e)
}

// record encodes a record of type typ into e.buf (header and payload),
// the payload appended by payload.
func (e *encoder) record(typ byte, payload func(dst []byte) ([]byte, error)) error {
	b := append(e.buf[:0], make([]byte, headerLen)...)
	b, err := payload(b)
	if err != nil {
		return err
	}
	p := b[headerLen:]
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(p)))
	b[8] = typ
	binary.LittleEndian.PutUint32(b[4:8], crc32.Update(crc32.Checksum(b[8:9], crcTable), crcTable, p))
	e.buf = b
	return nil
}

// appendJSON appends json.Marshal of v.
func (e *encoder) appendJSON(dst []byte, v any) ([]byte, error) {
	e.js.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, err
	}
	out := e.js.Bytes()
	return append(dst, out[:len(out)-1]...), nil // without Encode's newline
}

// appendRaw appends a json.RawMessage as json.Marshal writes it: null when
// nil, otherwise validated, compacted and HTML-escaped.
func (e *encoder) appendRaw(dst []byte, m json.RawMessage) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	if compactSafe(m) {
		return append(dst, m...), nil
	}
	return e.appendJSON(dst, m)
}

// compactSafe reports whether m is valid JSON that json.Marshal copies as
// it is (rawjson.CompactSafe).
func compactSafe(m json.RawMessage) bool { return rawjson.CompactSafe(m) }

// maxDepth is encoding/json's nesting limit.
const maxDepth = rawjson.MaxDepth

// appendState appends json.Marshal of st.
func (e *encoder) appendState(b []byte, st *agent.ActionState) ([]byte, error) {
	var err error
	id := &st.ID
	b = append(b, `{"id":{"Key":`...)
	if id.Key == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, id.Key)
		b = append(b, '"')
	}
	b = append(b, `,"Seq":`...)
	b = strconv.AppendInt(b, id.Seq, 10)
	b = append(b, `,"EventID":`...)
	b = strconv.AppendInt(b, id.EventID, 10)
	b = append(b, `,"EventType":`...)
	b = appendString(b, id.EventType)
	b = append(b, `,"EventDigest":[`...)
	for i, d := range id.EventDigest {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, byteDecimal[d]...)
	}
	b = append(b, `],"Action":`...)
	b = appendString(b, id.Action)
	b = append(b, `},"pos":{"seq":`...)
	b = strconv.AppendInt(b, st.Pos.Seq, 10)
	b = append(b, `,"event":`...)
	b = strconv.AppendInt(b, st.Pos.EventID, 10)
	b = append(b, `,"action":`...)
	b = strconv.AppendInt(b, int64(st.Pos.Action), 10)
	b = append(b, `},"kg":`...)
	b = strconv.AppendInt(b, int64(st.KeyGroup), 10)
	if st.Completed {
		b = append(b, `,"completed":true`...)
	}
	if b, err = e.appendWrites(b, `,"short":`, st.Short); err != nil {
		return b, err
	}
	if b, err = e.appendWrites(b, `,"sensory":`, st.Sensory); err != nil {
		return b, err
	}
	if len(st.Sent) > 0 {
		b = append(b, `,"sent":[`...)
		for i := range st.Sent {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = e.appendEvent(b, &st.Sent[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	if len(st.Calls) > 0 {
		b = append(b, `,"calls":[`...)
		for i := range st.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = e.appendCall(b, &st.Calls[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendWrites appends name and mw unless mw is zero (omitzero).
func (e *encoder) appendWrites(b []byte, name string, mw agent.MemoryWrites) ([]byte, error) {
	if mw.Set == nil && mw.Deleted == nil {
		return b, nil
	}
	b = append(b, name...)
	b = append(b, '{')
	if len(mw.Set) > 0 {
		b = append(b, `"set":{`...)
		keys := make([]string, 0, len(mw.Set))
		for k := range mw.Set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = e.appendRaw(b, mw.Set[k]); err != nil {
				return b, err
			}
		}
		b = append(b, '}')
	}
	if len(mw.Deleted) > 0 {
		if len(mw.Set) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"deleted":[`...)
		for i, k := range mw.Deleted {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func (e *encoder) appendEvent(b []byte, ev *agent.Event) ([]byte, error) {
	var err error
	b = append(b, `{"type":`...)
	b = appendString(b, ev.Type)
	if ev.Value != nil {
		b = append(b, `,"value":`...)
		if s, ok := ev.Value.(string); ok {
			b = appendString(b, s)
		} else if b, err = e.appendJSON(b, ev.Value); err != nil {
			return b, err
		}
	}
	if len(ev.Attrs) > 0 {
		b = append(b, `,"attrs":`...)
		if b, err = e.appendJSON(b, ev.Attrs); err != nil {
			return b, err
		}
	}
	b = append(b, `,"id":`...)
	b = strconv.AppendInt(b, ev.ID, 10)
	b = append(b, `,"parent":`...)
	b = strconv.AppendInt(b, ev.Parent, 10)
	if ev.Action != "" {
		b = append(b, `,"action":`...)
		b = appendString(b, ev.Action)
	}
	return append(b, '}'), nil
}

func (e *encoder) appendCall(b []byte, c *agent.CallResult) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"args":`...)
	b = appendString(b, c.ArgsDigest)
	if len(c.Result) > 0 {
		b = append(b, `,"result":`...)
		var err error
		if b, err = e.appendRaw(b, c.Result); err != nil {
			return b, err
		}
	}
	if c.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, c.Error)
	}
	if c.Failed {
		b = append(b, `,"failed":true`...)
	}
	if c.Pending {
		b = append(b, `,"pending":true`...)
	}
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// byteDecimal holds the decimal forms of 0 to 255 (a digest is an array
// of 32 numbers in JSON).
var byteDecimal = func() (t [256]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

// appendString appends s as a JSON string the way json.Marshal writes it:
// quotes and backslashes escaped, control characters as \b \f \n \r \t or
// \u00XX, the HTML characters < > & and U+2028, U+2029 as \uXXXX, invalid
// UTF-8 as \ufffd, everything else as is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendRecord appends a record of type typ with payload to dst, as the
// store writes it.
func appendRecord(dst []byte, typ byte, payload []byte) []byte {
	e := getEncoder()
	defer putEncoder(e)
	if err := e.record(typ, func(b []byte) ([]byte, error) { return append(b, payload...), nil }); err != nil {
		panic(err)
	}
	return append(dst, e.buf...)
}
