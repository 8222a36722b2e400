package keygroup

import (
	"bufio"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// The vectors below were produced by a throwaway Java program (not part of
// this repository) run on OpenJDK 17.0.15. For each input it printed
//
//	hash    = String/Integer/Long/Boolean.hashCode(input)
//	murmur  = Flink's MathUtils.murmurHash(hash), re-typed from the Flink
//	          sources (apache/flink flink-core .../util/MathUtils.java,
//	          murmurHash + bitMix)
//	kg128   = murmur % 128    (KeyGroupRangeAssignment.computeKeyGroupForKeyHash)
//	kg32768 = murmur % 32768
//
// The ill-formed UTF-8 string inputs were hashed in Java as
// new String(bytes, StandardCharsets.UTF_8).hashCode().
//
// Flink's own test suite has no concrete key-group values to borrow (its
// KeyGroupRangeTest and KeyGroupStreamPartitionerTest only check range
// arithmetic and consistency), so these Java-produced values are the
// reference.

type stringVector struct {
	in             string
	hash, murmur   int32
	kg128, kg32768 int
}

type int32Vector struct {
	in             int32
	hash, murmur   int32
	kg128, kg32768 int
}

type int64Vector struct {
	in             int64
	hash, murmur   int32
	kg128, kg32768 int
}

type boolVector struct {
	in             bool
	hash, murmur   int32
	kg128, kg32768 int
}

var javaStringVectors = []stringVector{
	{"", 0, 593689054, 94, 31198},
	{"a", 97, 1455541201, 81, 19409},
	{"A", 65, 743412968, 104, 5352},
	{"hello", 99162322, 1715862179, 35, 31395},
	{"Hello, World!", 1498789909, 741723222, 86, 19542},
	{"key-0", 101943362, 591317919, 31, 19359},
	{"key-1", 101943363, 23124534, 54, 23094},
	{"user_12345", 1871841983, 1506719709, 93, 14301},
	{"The quick brown fox jumps over the lazy dog", -609428141, 1974296731, 27, 24731},
	{"\x00", 0, 593689054, 94, 31198},
	{"\x7f", 127, 1931274395, 27, 26779},
	{"\u00e9", 233, 1107437598, 30, 10270},
	{"e\u0301", 3900, 34826962, 82, 27346},
	{"\u4e2d\u6587", 646394, 464757671, 39, 9127},
	{"\u4f60\u597d\u4e16\u754c", 628018387, 1568234000, 16, 23056},
	{"\U0001f600", 1772899, 1934073014, 54, 7350},
	{"a\U0001f600b", 57849694, 1898100721, 113, 14321},
	{"\U0001d11e", 1772394, 857155403, 75, 10059},
	{"\ud7ff", 55295, 1583152818, 50, 32434},
	{"\ue000", 57344, 361369207, 119, 3703},
	{"\uffff", 65535, 1986290322, 18, 25234},
	{"\ufffd", 65533, 1682200812, 108, 22764},
	{"\U0010ffff", 1803232, 1979407395, 35, 23587},
	{"\u00ff\u0100\u07ff\u0800", 7908226, 1322329895, 39, 10023},
	{"polygenelubricants", -2147483648, 1718298732, 108, 10348},
	{"GydZG_", -2147483648, 1718298732, 108, 10348},
	{"DESIGNING WORKHOUSES", -2147483648, 1718298732, 108, 10348},
	// Invalid UTF-8: Java hashed new String(bytes, StandardCharsets.UTF_8).
	{"\xff", 65533, 1682200812, 108, 22764},
	{"\x80", 65533, 1682200812, 108, 22764},
	{"\xc0\x80", 2097056, 384459451, 59, 25275},
	{"\xc1\xbf", 2097056, 384459451, 59, 25275},
	{"\xc2", 65533, 1682200812, 108, 22764},
	{"\xc2\x41", 2031588, 1965378420, 116, 19316},
	{"\xe2\x82", 65533, 1682200812, 108, 22764},
	{"\xe2\x82\x41", 2031588, 1965378420, 116, 19316},
	{"\xe0\x80\x80", 65074269, 1308579112, 40, 21800},
	{"\xe0\x9f\xbf", 65074269, 1308579112, 40, 21800},
	{"\xed\xa0\x80", 65533, 1682200812, 108, 22764},
	{"\xed\xbf\xbf", 65533, 1682200812, 108, 22764},
	{"\xed\xa0\xbd\xed\xb8\x80", 2097056, 384459451, 59, 25275},
	{"\xf0\x9f\x98", 65533, 1682200812, 108, 22764},
	{"\xf0\x9f\x98\x41", 2031588, 1965378420, 116, 19316},
	{"\xf0\x80\x80\x80", 2017367872, 510764506, 90, 9690},
	{"\xf4\x90\x80\x80", 2017367872, 510764506, 90, 9690},
	{"\xf5\x80\x80\x80", 2017367872, 510764506, 90, 9690},
	{"\xf8\x88\x80\x80\x80", -1886039875, 1932557312, 0, 31744},
	{"\x61\xff\x62", 2124838, 1396295086, 46, 17838},
	{"\xe2\x82\xac\xe2\x82", 324817, 613689701, 101, 10597},
	{"\xf0\x9f", 65533, 1682200812, 108, 22764},
	{"\xf0", 65533, 1682200812, 108, 22764},
	{"\xfe\xff", 2097056, 384459451, 59, 25275},
}

var javaInt32Vectors = []int32Vector{
	{0, 0, 593689054, 94, 31198},
	{1, 1, 68075478, 86, 16342},
	{-1, -1, 1982413648, 80, 15184},
	{2, 2, 1085422463, 127, 15231},
	{42, 42, 1134849565, 29, 28189},
	{-42, -42, 189366624, 96, 352},
	{127, 127, 1931274395, 27, 26779},
	{128, 128, 132521001, 41, 7209},
	{1000, 1000, 3506311, 7, 135},
	{123456789, 123456789, 1088346449, 81, 22865},
	{-123456789, -123456789, 1470798557, 93, 6877},
	{2147483647, 2147483647, 1653689534, 62, 19646},
	{-2147483648, -2147483648, 1718298732, 108, 10348},
	{2147483646, 2147483646, 1247003650, 2, 17410},
	{1431655765, 1431655765, 1310894462, 126, 10622},
}

var javaInt64Vectors = []int64Vector{
	{0, 0, 593689054, 94, 31198},
	{1, 1, 68075478, 86, 16342},
	{-1, 0, 593689054, 94, 31198},
	{42, 42, 1134849565, 29, 28189},
	{-42, 41, 667785406, 62, 6334},
	{4294967296, 1, 68075478, 86, 16342},
	{4294967297, 0, 593689054, 94, 31198},
	{-4294967296, -1, 1982413648, 80, 15184},
	{2147483648, -2147483648, 1718298732, 108, 10348},
	{-2147483648, 2147483647, 1653689534, 62, 19646},
	{4294967295, -1, 1982413648, 80, 15184},
	{123456789012345, -2045923535, 1706327101, 61, 31805},
	{-123456789012345, -2045923536, 1107262750, 30, 32030},
	{9223372036854775807, -2147483648, 1718298732, 108, 10348},
	{-9223372036854775808, -2147483648, 1718298732, 108, 10348},
	{1700000000000, -807048821, 1892790720, 64, 12736},
	{81985529216486895, -2004318072, 1749024145, 17, 32145},
}

var javaBoolVectors = []boolVector{
	{true, 1231, 1090530765, 77, 11725},
	{false, 1237, 1530821891, 3, 32003},
}

// checkPipeline checks Murmur and Assign for one vector's Java hash.
func checkPipeline(t *testing.T, name string, hash, murmur int32, kg128, kg32768 int) {
	t.Helper()
	if got := Murmur(hash); got != murmur {
		t.Errorf("%s: Murmur(%d) = %d, want %d", name, hash, got, murmur)
	}
	if got := Assign(hash, 128); got != kg128 {
		t.Errorf("%s: Assign(%d, 128) = %d, want %d", name, hash, got, kg128)
	}
	if got := Assign(hash, 32768); got != kg32768 {
		t.Errorf("%s: Assign(%d, 32768) = %d, want %d", name, hash, got, kg32768)
	}
}

func TestJavaStringVectors(t *testing.T) {
	h, ok := HasherFor[string]()
	if !ok {
		t.Fatal("HasherFor[string] not supported")
	}
	for _, v := range javaStringVectors {
		name := strconv.Quote(v.in)
		if got := HashString(v.in); got != v.hash {
			t.Errorf("HashString(%s) = %d, want %d", name, got, v.hash)
		}
		if got := KeyGroupOf(h, v.in, 128); got != v.kg128 {
			t.Errorf("KeyGroupOf(%s, 128) = %d, want %d", name, got, v.kg128)
		}
		checkPipeline(t, name, v.hash, v.murmur, v.kg128, v.kg32768)
	}
}

func TestJavaInt32Vectors(t *testing.T) {
	for _, v := range javaInt32Vectors {
		name := "int32 " + strconv.Itoa(int(v.in))
		if got := HashInt32(v.in); got != v.hash {
			t.Errorf("HashInt32(%d) = %d, want %d", v.in, got, v.hash)
		}
		checkPipeline(t, name, v.hash, v.murmur, v.kg128, v.kg32768)
	}
}

func TestJavaInt64Vectors(t *testing.T) {
	for _, v := range javaInt64Vectors {
		name := "int64 " + strconv.FormatInt(v.in, 10)
		if got := HashInt64(v.in); got != v.hash {
			t.Errorf("HashInt64(%d) = %d, want %d", v.in, got, v.hash)
		}
		checkPipeline(t, name, v.hash, v.murmur, v.kg128, v.kg32768)
	}
}

func TestJavaBoolVectors(t *testing.T) {
	for _, v := range javaBoolVectors {
		name := "bool " + strconv.FormatBool(v.in)
		if got := HashBool(v.in); got != v.hash {
			t.Errorf("HashBool(%v) = %d, want %d", v.in, got, v.hash)
		}
		checkPipeline(t, name, v.hash, v.murmur, v.kg128, v.kg32768)
	}
}

// TestMurmurMinInt32Fold covers the one input whose scrambled value is
// math.MinInt32 before the final fold, so Flink maps it to 0. The input was
// found by brute force over all 2^32 ints with the Java re-typing of
// MathUtils.murmurHash described above (the scramble is a bijection, so it is
// the only one).
func TestMurmurMinInt32Fold(t *testing.T) {
	const pre = -2089875627
	if got := Murmur(pre); got != 0 {
		t.Fatalf("Murmur(%d) = %d, want 0", pre, got)
	}
	if got := Assign(pre, 128); got != 0 {
		t.Fatalf("Assign(%d, 128) = %d, want 0", pre, got)
	}
}

// TestHashStringJavaRandom checks HashString against Java on the random,
// mostly ill-formed, byte strings in testdata/java_utf8_hashes.txt (see the
// file's header for how they were produced).
func TestHashStringJavaRandom(t *testing.T) {
	f, err := os.Open("testdata/java_utf8_hashes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		hexBytes, hashText, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("malformed line %q", line)
		}
		b, err := hex.DecodeString(hexBytes)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		want, err := strconv.ParseInt(hashText, 10, 32)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if got := HashString(string(b)); got != int32(want) {
			t.Errorf("HashString(%q) = %d, want %d (Java)", b, got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d vectors read", n)
	}
}

// refJavaStringHash is a slow, independent model of String.hashCode for valid
// UTF-8: encode to UTF-16 with the standard library and fold.
func refJavaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func TestHashStringValidUTF8Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if !utf8.ValidString(s) {
			t.Skip("rapid.String produced invalid UTF-8")
		}
		if got, want := HashString(s), refJavaStringHash(s); got != want {
			t.Fatalf("HashString(%q) = %d, want %d", s, got, want)
		}
	})
}

// TestHashStringInvalidUTF8Replacement checks the replacement model on
// strings built from valid pieces and single stray bytes: a stray byte that
// can never start a sequence (continuation bytes, C0, C1, F5..FF) followed by
// ASCII must hash as one U+FFFD.
func TestHashStringInvalidUTF8Replacement(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.StringMatching(`[a-z]{0,5}`).Draw(t, "a")
		b := rapid.StringMatching(`[a-z]{0,5}`).Draw(t, "b")
		stray := rapid.SampledFrom([]byte{0x80, 0x9f, 0xbf, 0xc0, 0xc1, 0xf5, 0xf8, 0xff}).Draw(t, "stray")
		got := HashString(a + string([]byte{stray}) + b)
		want := refJavaStringHash(a + "\uFFFD" + b)
		if got != want {
			t.Fatalf("stray %#x: got %d, want %d", stray, got, want)
		}
	})
}

func TestHashInt64Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64().Draw(t, "v")
		// Long.hashCode: (int)(value ^ (value >>> 32)), written differently.
		hi := int32(uint64(v) >> 32)
		lo := int32(v)
		if got, want := HashInt64(v), hi^lo; got != want {
			t.Fatalf("HashInt64(%d) = %d, want %d", v, got, want)
		}
		if 0 <= v && v <= math.MaxInt32 {
			// Non-negative values that fit in 32 bits hash to themselves.
			if HashInt64(v) != int32(v) {
				t.Fatalf("HashInt64(%d) != %d", v, v)
			}
		}
	})
}

// murmurFlink is MathUtils.murmurHash as Flink writes its fold, with
// branches: Murmur folds without them.
func murmurFlink(h int32) int32 {
	r := int32(scramble(h))
	switch {
	case r >= 0:
		return r
	case r == math.MinInt32:
		return 0
	default:
		return -r
	}
}

func TestMurmurProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := rapid.Int32().Draw(t, "h")
		maxP := rapid.IntRange(1, UpperBound).Draw(t, "maxP")
		m := Murmur(h)
		if m < 0 {
			t.Fatalf("Murmur(%d) = %d < 0", h, m)
		}
		if want := murmurFlink(h); m != want {
			t.Fatalf("Murmur(%d) = %d, Flink's form gives %d", h, m, want)
		}
		kg := Assign(h, maxP)
		if kg < 0 || kg >= maxP || kg != int(m)%maxP {
			t.Fatalf("Assign(%d, %d) = %d, Murmur = %d", h, maxP, kg, m)
		}
	})
}

// The eight-bytes-at-a-time ASCII prefix gives the hash of the byte-at-a-
// time decoder, on strings of ASCII runs (of every length, so that blocks
// end anywhere) mixed with arbitrary bytes, valid UTF-8 or not.
func TestHashStringASCIIBlocksProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		for range rapid.IntRange(0, 6).Draw(t, "pieces") {
			if rapid.Bool().Draw(t, "ascii") {
				b = append(b, rapid.SliceOfN(rapid.ByteRange(0, 0x7f), 0, 40).Draw(t, "run")...)
			} else {
				b = append(b, rapid.SliceOfN(rapid.Byte(), 1, 4).Draw(t, "bytes")...)
			}
		}
		s := string(b)
		if got, want := HashString(s), hashUTF8(0, s, 0); got != want {
			t.Fatalf("HashString(%q) = %d, byte at a time %d", s, got, want)
		}
		if utf8.ValidString(s) {
			if want := refJavaStringHash(s); HashString(s) != want {
				t.Fatalf("HashString(%q) = %d, reference %d", s, HashString(s), want)
			}
		}
	})
}
