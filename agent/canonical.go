package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"unicode/utf8"
)

// Canonical JSON (see EventDigest and Durable's argument digests) is what
// encoding/json gives for a value after a round trip through generic JSON
// values: encode, decode into any (numbers kept as written), encode again.
// That round trip sorts the keys of every object (last duplicate wins),
// keeps numbers and literals as written, and re-encodes every string from
// its decoded text (escapes normalised, HTML characters and U+2028/U+2029
// escaped, invalid UTF-8 replaced by U+FFFD).
//
// The canonicaliser below gives the same bytes without building the tree:
// it marshals v once and re-emits the bytes, copying numbers, literals and
// strings already in canonical form, and sorting an object's members only
// when their keys are not already strictly increasing. Strings that are not
// canonical (rare: they come from json.RawMessage or invalid UTF-8) are
// decoded and re-encoded by encoding/json itself.

// maxCanonicalDepth is encoding/json's nesting limit for decoding: deeper
// values failed the round trip, so they fail here too.
const maxCanonicalDepth = 10000

var errCanonicalSyntax = errors.New("agent: canonical JSON: unexpected input")

// canon is the reusable state of one canonicalisation.
type canon struct {
	in      bytes.Buffer  // json.Encoder output
	enc     *json.Encoder // writes into in
	out     []byte
	members []member // members of the objects being emitted (a stack)
	scratch []byte   // reordering
	depth   int
}

// member is one member of an object in canon.out: its key token spans
// [keyStart, keyEnd) and the member (key, colon, value) [start, end).
type member struct {
	keyStart, keyEnd, start, end int
	escaped                      bool // the key token has escapes
}

var canonPool = sync.Pool{New: func() any {
	c := &canon{}
	c.enc = json.NewEncoder(&c.in)
	return c
}}

func getCanon() *canon { return canonPool.Get().(*canon) }

func putCanon(c *canon) {
	if cap(c.out) > 1<<16 || c.in.Cap() > 1<<16 {
		return // let unusually large buffers go
	}
	c.out, c.scratch, c.members = c.out[:0], c.scratch[:0], c.members[:0]
	canonPool.Put(c)
}

// canonicalJSON encodes v with objects' keys sorted at every level: the
// bytes of json.Marshal of v decoded into generic JSON values (with
// UseNumber) and marshalled again.
func canonicalJSON(v any) ([]byte, error) {
	c := getCanon()
	defer putCanon(c)
	if err := c.append(v); err != nil {
		return nil, err
	}
	return bytes.Clone(c.out), nil
}

// canonicalSum returns the SHA-256 of prefix followed by the canonical JSON
// of v.
func canonicalSum(prefix []byte, v any) ([32]byte, error) {
	c := getCanon()
	defer putCanon(c)
	c.out = append(c.out, prefix...)
	if err := c.append(v); err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c.out), nil
}

// append appends the canonical JSON of v to c.out.
func (c *canon) append(v any) error {
	c.in.Reset()
	if err := c.enc.Encode(v); err != nil {
		return err
	}
	in := c.in.Bytes()
	c.depth = 0
	i, err := c.value(in, skipSpace(in, 0))
	if err != nil {
		return err
	}
	if skipSpace(in, i) != len(in) {
		return errCanonicalSyntax
	}
	return nil
}

func skipSpace(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\n' || in[i] == '\t' || in[i] == '\r') {
		i++
	}
	return i
}

// value emits the value starting at in[i] and returns the index after it.
func (c *canon) value(in []byte, i int) (int, error) {
	if i >= len(in) {
		return 0, errCanonicalSyntax
	}
	switch b := in[i]; {
	case b == '{':
		return c.object(in, i)
	case b == '[':
		return c.array(in, i)
	case b == '"':
		j, _, err := c.str(in, i)
		return j, err
	default: // a number or a literal: copied as written
		j := i
		for j < len(in) && isScalarByte(in[j]) {
			j++
		}
		if j == i {
			return 0, errCanonicalSyntax
		}
		c.out = append(c.out, in[i:j]...)
		return j, nil
	}
}

func isScalarByte(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b == '-' || b == '+' || b == '.' || b == 'E'
}

func (c *canon) enter() error {
	c.depth++
	if c.depth > maxCanonicalDepth {
		return errors.New("agent: canonical JSON: exceeded max depth")
	}
	return nil
}

func (c *canon) array(in []byte, i int) (int, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	c.out = append(c.out, '[')
	i = skipSpace(in, i+1)
	if i < len(in) && in[i] == ']' {
		c.out = append(c.out, ']')
		c.depth--
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(in, i); err != nil {
			return 0, err
		}
		i = skipSpace(in, i)
		if i >= len(in) {
			return 0, errCanonicalSyntax
		}
		switch in[i] {
		case ',':
			c.out = append(c.out, ',')
			i = skipSpace(in, i+1)
		case ']':
			c.out = append(c.out, ']')
			c.depth--
			return i + 1, nil
		default:
			return 0, errCanonicalSyntax
		}
	}
}

func (c *canon) object(in []byte, i int) (int, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	open := len(c.out)
	c.out = append(c.out, '{')
	i = skipSpace(in, i+1)
	if i < len(in) && in[i] == '}' {
		c.out = append(c.out, '}')
		c.depth--
		return i + 1, nil
	}
	base := len(c.members)
	sorted := true
	for {
		if i >= len(in) || in[i] != '"' {
			return 0, errCanonicalSyntax
		}
		m := member{keyStart: len(c.out), start: len(c.out)}
		var err error
		if i, m.escaped, err = c.str(in, i); err != nil {
			return 0, err
		}
		m.keyEnd = len(c.out)
		i = skipSpace(in, i)
		if i >= len(in) || in[i] != ':' {
			return 0, errCanonicalSyntax
		}
		c.out = append(c.out, ':')
		if i, err = c.value(in, skipSpace(in, i+1)); err != nil {
			return 0, err
		}
		m.end = len(c.out)
		if sorted && len(c.members) > base && c.compareKeys(c.members[len(c.members)-1], m) >= 0 {
			sorted = false
		}
		c.members = append(c.members, m)
		i = skipSpace(in, i)
		if i >= len(in) {
			return 0, errCanonicalSyntax
		}
		if in[i] == ',' {
			c.out = append(c.out, ',')
			i = skipSpace(in, i+1)
			continue
		}
		if in[i] != '}' {
			return 0, errCanonicalSyntax
		}
		i++
		break
	}
	if !sorted {
		c.reorder(open, c.members[base:])
	}
	c.members = c.members[:base]
	c.out = append(c.out, '}')
	c.depth--
	return i, nil
}

// reorder rewrites the members of the object opened at c.out[open] (its
// members ms, in c.out) in key order, keeping the last of equal keys.
func (c *canon) reorder(open int, ms []member) {
	slices.SortStableFunc(ms, c.compareKeys)
	c.scratch = c.scratch[:0]
	for k, m := range ms {
		if k+1 < len(ms) && c.compareKeys(m, ms[k+1]) == 0 {
			continue // a later duplicate wins
		}
		if len(c.scratch) > 0 {
			c.scratch = append(c.scratch, ',')
		}
		c.scratch = append(c.scratch, c.out[m.start:m.end]...)
	}
	c.out = append(c.out[:open+1], c.scratch...)
}

// compareKeys compares the decoded keys of a and b (canonical tokens in
// c.out).
func (c *canon) compareKeys(a, b member) int {
	ka, kb := c.out[a.keyStart+1:a.keyEnd-1], c.out[b.keyStart+1:b.keyEnd-1]
	if a.escaped {
		ka = unescapeCanonical(ka)
	}
	if b.escaped {
		kb = unescapeCanonical(kb)
	}
	return bytes.Compare(ka, kb)
}

// str emits the canonical form of the string token at in[i] and returns
// the index after it and whether the emitted token has escapes.
func (c *canon) str(in []byte, i int) (next int, escaped bool, err error) {
	canonical := true
	j := i + 1
	for {
		if j >= len(in) {
			return 0, false, errCanonicalSyntax
		}
		b := in[j]
		if b == '"' {
			break
		}
		if b == '\\' {
			escaped = true
			if j+1 >= len(in) {
				return 0, false, errCanonicalSyntax
			}
			switch in[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(in) {
					return 0, false, errCanonicalSyntax
				}
				if !canonicalUEscape(in[j+2 : j+6]) {
					canonical = false
				}
				j += 6
			default: // \/ decodes to a '/' written as is
				canonical = false
				j += 2
			}
			continue
		}
		if b < utf8.RuneSelf {
			if b < 0x20 || b == '<' || b == '>' || b == '&' {
				canonical = false
			}
			j++
			continue
		}
		r, size := utf8.DecodeRune(in[j:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			canonical = false
		}
		j += size
	}
	tok := in[i : j+1]
	if canonical {
		c.out = append(c.out, tok...)
		return j + 1, escaped, nil
	}
	// Not canonical: re-encode the decoded text as encoding/json does.
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return 0, false, err
	}
	re, err := json.Marshal(s)
	if err != nil {
		return 0, false, err
	}
	c.out = append(c.out, re...)
	return j + 1, bytes.IndexByte(re, '\\') >= 0, nil
}

// canonicalUEscape reports whether \u followed by the four bytes h is how
// encoding/json writes the character it denotes: control characters
// without a short escape, <, >, &, U+2028 and U+2029, in lower-case hex.
func canonicalUEscape(h []byte) bool {
	r := rune(0)
	for _, d := range h {
		switch {
		case d >= '0' && d <= '9':
			r = r<<4 | rune(d-'0')
		case d >= 'a' && d <= 'f':
			r = r<<4 | rune(d-'a'+10)
		default:
			return false // upper case, or not hex
		}
	}
	switch r {
	case '\b', '\f', '\n', '\r', '\t':
		return false
	case '<', '>', '&', '\u2028', '\u2029':
		return true
	}
	return r < 0x20
}

// unescapeCanonical decodes the content of a string token written by
// encoding/json (its escapes are the short ones and \uXXXX).
func unescapeCanonical(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 >= len(s) {
			out = append(out, s[i])
			i++
			continue
		}
		switch e := s[i+1]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			// Canonical tokens escape no surrogates: one \uXXXX is one rune.
			r, n := hexRune(s[i+2:])
			out = utf8.AppendRune(out, r)
			i += 2 + n
			continue
		default:
			out = append(out, e)
		}
		i += 2
	}
	return out
}

// hexRune decodes up to four hex digits at the start of h.
func hexRune(h []byte) (rune, int) {
	r, n := rune(0), 0
	for n < 4 && n < len(h) {
		d := h[n]
		switch {
		case d >= '0' && d <= '9':
			r = r<<4 | rune(d-'0')
		case d >= 'a' && d <= 'f':
			r = r<<4 | rune(d-'a'+10)
		case d >= 'A' && d <= 'F':
			r = r<<4 | rune(d-'A'+10)
		default:
			return r, n
		}
		n++
	}
	return r, n
}
