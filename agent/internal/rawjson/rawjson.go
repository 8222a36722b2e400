// Package rawjson checks JSON text quickly: CompactSafe accepts valid,
// compact JSON that json.Marshal would copy unchanged into its output (a
// json.RawMessage it need not rewrite), by recursive descent and without
// allocating, several times faster than json.Valid. It never accepts
// invalid JSON.
package rawjson

// CompactSafe reports whether m is valid JSON that json.Marshal copies as
// it is: no whitespace, nothing to HTML-escape, nesting within
// encoding/json's limit. It may report false for such input (check it
// with encoding/json then), never true for other input.
func CompactSafe(m []byte) bool {
	v := validator{in: m}
	return v.value() && v.i == len(m)
}

// MaxDepth is encoding/json's nesting limit.
const MaxDepth = 10000

// validator checks compact JSON by recursive descent.
type validator struct {
	in    []byte
	i     int
	depth int
}

func (v *validator) value() bool {
	if v.i >= len(v.in) {
		return false
	}
	switch c := v.in[v.i]; {
	case c == '{':
		return v.object()
	case c == '[':
		return v.array()
	case c == '"':
		return v.str()
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *validator) literal(lit string) bool {
	if len(v.in)-v.i < len(lit) || string(v.in[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

func (v *validator) digits() int {
	n := 0
	for v.i < len(v.in) && v.in[v.i] >= '0' && v.in[v.i] <= '9' {
		v.i++
		n++
	}
	return n
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number() bool {
	if v.in[v.i] == '-' {
		v.i++
	}
	if v.i >= len(v.in) {
		return false
	}
	if v.in[v.i] == '0' {
		v.i++
	} else if v.digits() == 0 {
		return false
	}
	if v.i < len(v.in) && v.in[v.i] == '.' {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.i < len(v.in) && (v.in[v.i] == 'e' || v.in[v.i] == 'E') {
		v.i++
		if v.i < len(v.in) && (v.in[v.i] == '+' || v.in[v.i] == '-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

// str checks a string token: escapes valid, no control characters, and
// none of what Marshal escapes in raw messages (< > & U+2028 U+2029).
func (v *validator) str() bool {
	v.i++
	for v.i < len(v.in) {
		c := v.in[v.i]
		switch {
		case c == '"':
			v.i++
			return true
		case c == '\\':
			if v.i+1 >= len(v.in) {
				return false
			}
			switch v.in[v.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i += 2
			case 'u':
				if v.i+6 > len(v.in) {
					return false
				}
				for _, h := range v.in[v.i+2 : v.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				v.i += 6
			default:
				return false
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && v.i+2 < len(v.in) && v.in[v.i+1] == 0x80 && v.in[v.i+2]&^1 == 0xA8:
			return false // U+2028, U+2029
		default:
			v.i++
		}
	}
	return false
}

func (v *validator) enter() bool {
	v.depth++
	v.i++
	return v.depth <= MaxDepth
}

func (v *validator) array() bool {
	if !v.enter() {
		return false
	}
	if v.i < len(v.in) && v.in[v.i] == ']' {
		v.i++
		v.depth--
		return true
	}
	for {
		if !v.value() || v.i >= len(v.in) {
			return false
		}
		switch v.in[v.i] {
		case ',':
			v.i++
		case ']':
			v.i++
			v.depth--
			return true
		default:
			return false
		}
	}
}

func (v *validator) object() bool {
	if !v.enter() {
		return false
	}
	if v.i < len(v.in) && v.in[v.i] == '}' {
		v.i++
		v.depth--
		return true
	}
	for {
		if v.i >= len(v.in) || v.in[v.i] != '"' || !v.str() {
			return false
		}
		if v.i >= len(v.in) || v.in[v.i] != ':' {
			return false
		}
		v.i++
		if !v.value() || v.i >= len(v.in) {
			return false
		}
		switch v.in[v.i] {
		case ',':
			v.i++
		case '}':
			v.i++
			v.depth--
			return true
		default:
			return false
		}
	}
}
