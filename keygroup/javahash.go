package keygroup

// replacementChar is U+FFFD, the UTF-16 unit Java substitutes for ill-formed
// UTF-8 input.
const replacementChar = 0xFFFD

// HashString returns java.lang.String.hashCode of the Java string that
// new String(b, StandardCharsets.UTF_8) builds from the bytes b of s:
// h = 31*h + u over the string's UTF-16 code units u, starting from 0, with
// int32 wrap-around. The empty string hashes to 0. A character outside the
// Basic Multilingual Plane (for example an emoji) contributes two surrogate
// units, as it does in Java.
//
// Go strings may hold bytes that are not valid UTF-8, while a Java String
// cannot. HashString decodes such bytes exactly as OpenJDK's
// new String(bytes, UTF_8) does when it replaces malformed input (checked
// against OpenJDK 17 and 25): each ill-formed subsequence becomes one U+FFFD
// (a truncated sequence at the very end becomes one U+FFFD), so for
// example "\xe2\x82A" hashes like "\uFFFDA" and the encoded surrogate
// "\xed\xa0\x80" like "\uFFFD". This can differ from Go's own decoding
// (for range over a string yields one utf8.RuneError per bad byte), but it is
// what a Java producer would have hashed after decoding the same bytes. The
// behaviour was checked against Java on 500,000 random byte strings; a
// sample of them is in testdata/java_utf8_hashes.txt.
func HashString(s string) int32 {
	h, i := hashASCII8(s)
	return hashUTF8(h, s, i)
}

// Powers of 31 modulo 2^32, for eight code units at a time.
const (
	p1 uint32 = 31
	p2 uint32 = 31 * 31
	p3 uint32 = 31 * 31 * 31
	p4 uint32 = 31 * 31 * 31 * 31
	p5 uint32 = 31 * 31 * 31 * 31 * 31
	p6 uint32 = 31 * 31 * 31 * 31 * 31 * 31
	p7 uint32 = 31 * 31 * 31 * 31 * 31 * 31 * 31 & 0xffffffff
	p8 uint32 = 31 * 31 * 31 * 31 * 31 * 31 * 31 * 31 & 0xffffffff
)

// hashASCII8 hashes the longest prefix of s made of whole 8-byte blocks of
// ASCII and returns the hash so far and the prefix length. Eight ASCII
// bytes are eight UTF-16 units, and h*31^8 + u0*31^7 + ... + u7 is the
// same as eight steps of h = 31*h + u, with independent multiplications.
func hashASCII8(s string) (uint32, int) {
	var h uint32
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if w&0x8080808080808080 != 0 {
			break
		}
		h = h*p8 + uint32(b[0])*p7 + uint32(b[1])*p6 + uint32(b[2])*p5 + uint32(b[3])*p4 +
			uint32(b[4])*p3 + uint32(b[5])*p2 + uint32(b[6])*p1 + uint32(b[7])
	}
	return h, i
}

// hashUTF8 continues the hash h over s[i:], one code unit at a time,
// decoding UTF-8 as HashString describes.
func hashUTF8(h uint32, s string, i int) int32 {
	n := len(s)
	for i < n {
		b1 := s[i]
		i++
		if b1 < 0x80 {
			h = 31*h + uint32(b1)
			continue
		}
		switch {
		case 0xc2 <= b1 && b1 <= 0xdf: // two-byte lead
			if i >= n { // truncated at the end
				return int32(31*h + replacementChar)
			}
			b2 := s[i]
			if !isCont(b2) {
				h = 31*h + replacementChar // b2 is decoded on its own
				continue
			}
			i++
			h = 31*h + (uint32(b1&0x1f)<<6 | uint32(b2&0x3f))

		case 0xe0 <= b1 && b1 <= 0xef: // three-byte lead
			if i+1 >= n { // fewer than two bytes follow
				h = 31*h + replacementChar
				if i < n && badSecond3(b1, s[i]) {
					continue // the lone follower is decoded on its own
				}
				return int32(h) // the lead (and a plausible follower) end the input
			}
			b2, b3 := s[i], s[i+1]
			if badSecond3(b1, b2) {
				h = 31*h + replacementChar // only the lead is consumed
				continue
			}
			if !isCont(b3) {
				h = 31*h + replacementChar // lead and b2 are consumed
				i++
				continue
			}
			i += 2
			c := uint32(b1&0x0f)<<12 | uint32(b2&0x3f)<<6 | uint32(b3&0x3f)
			if 0xd800 <= c && c <= 0xdfff {
				c = replacementChar // an encoded surrogate: three bytes, one U+FFFD
			}
			h = 31*h + c

		case 0xf0 <= b1 && b1 <= 0xf7: // four-byte lead (F5..F7 always fail)
			if i+2 >= n { // fewer than three bytes follow
				h = 31*h + replacementChar
				if b1 > 0xf4 || (i < n && badSecond4(b1, s[i])) {
					continue // only the lead is consumed
				}
				i++ // the lead and a plausible second byte are consumed
				if i < n && !isCont(s[i]) {
					continue
				}
				return int32(h)
			}
			b2, b3, b4 := s[i], s[i+1], s[i+2]
			if b1 > 0xf4 || badSecond4(b1, b2) {
				h = 31*h + replacementChar // only the lead is consumed
				continue
			}
			if !isCont(b3) {
				h = 31*h + replacementChar // lead and b2 are consumed
				i++
				continue
			}
			if !isCont(b4) {
				h = 31*h + replacementChar // lead, b2 and b3 are consumed
				i += 2
				continue
			}
			i += 3
			cp := uint32(b1&0x07)<<18 | uint32(b2&0x3f)<<12 | uint32(b3&0x3f)<<6 | uint32(b4&0x3f)
			cp -= 0x10000
			h = 31*h + (0xd800 + cp>>10)   // high surrogate
			h = 31*h + (0xdc00 + cp&0x3ff) // low surrogate

		default: // stray continuation byte, C0, C1, F8..FF
			h = 31*h + replacementChar
		}
	}
	return int32(h)
}

// isCont reports whether b is a UTF-8 continuation byte (10xxxxxx).
func isCont(b byte) bool { return b&0xc0 == 0x80 }

// badSecond3 reports whether b2 cannot follow the three-byte lead b1 as OpenJDK
// sees it: not a continuation byte, or an overlong form after E0. (Surrogates
// after ED are rejected only once all three bytes are seen.)
func badSecond3(b1, b2 byte) bool {
	return !isCont(b2) || (b1 == 0xe0 && b2 < 0xa0)
}

// badSecond4 reports whether b2 cannot follow the four-byte lead b1 (F0..F4):
// not a continuation byte, an overlong form after F0, or beyond U+10FFFF after
// F4.
func badSecond4(b1, b2 byte) bool {
	return !isCont(b2) || (b1 == 0xf0 && b2 < 0x90) || (b1 == 0xf4 && b2 > 0x8f)
}

// HashInt32 returns java.lang.Integer.hashCode(v), which is v itself.
func HashInt32(v int32) int32 { return v }

// HashInt64 returns java.lang.Long.hashCode(v): the low 32 bits of
// v ^ (v >>> 32), the upper half folded onto the lower half.
func HashInt64(v int64) int32 {
	u := uint64(v)
	return int32(uint32(u ^ u>>32))
}

// HashBool returns java.lang.Boolean.hashCode(v): 1231 for true, 1237 for
// false.
func HashBool(v bool) int32 {
	if v {
		return 1231
	}
	return 1237
}
