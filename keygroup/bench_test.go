package keygroup

import (
	"strconv"
	"testing"
)

var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i*7919) + "-session"
	}
	return keys
}()

var benchSink int

// BenchmarkAssignString measures the full per-record path for a string key:
// Java hash, murmur, key group and subtask.
func BenchmarkAssignString(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		kg := Assign(HashString(benchKeys[i&1023]), 128)
		benchSink += OperatorIndex(kg, 128, 4)
	}
}

// BenchmarkHasherString measures a HasherFor[string] hasher through
// KeyGroupOf; it must report 0 allocs/op.
func BenchmarkHasherString(b *testing.B) {
	h, ok := HasherFor[string]()
	if !ok {
		b.Fatal("unsupported")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += KeyGroupOf(h, benchKeys[i&1023], 128)
	}
}

// BenchmarkHasherNamedString is BenchmarkHasherString for a named string type.
func BenchmarkHasherNamedString(b *testing.B) {
	h, _ := HasherFor[userID]()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += KeyGroupOf(h, userID(benchKeys[i&1023]), 128)
	}
}

// BenchmarkHashStringNonASCII measures HashString on multi-byte UTF-8.
func BenchmarkHashStringNonASCII(b *testing.B) {
	const s = "\u4f60\u597d\u4e16\u754c-\U0001F600-\u00e9t\u00e9"
	b.ReportAllocs()
	for b.Loop() {
		benchSink += int(HashString(s))
	}
}

func BenchmarkMurmur(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		benchSink += int(Murmur(int32(i)))
	}
}
