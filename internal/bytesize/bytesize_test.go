package bytesize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "512": 512, "64KiB": 64 << 10, "100MiB": 100 << 20, "2GiB": 2 << 30, "16 MiB": 16 << 20,
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "lots", "-1", "-1KiB", "1.5MiB", "1MB", "1 KB", "KiB", "4611686018427387905", "4294967297GiB"} {
		if got, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %d, %v; want ErrSyntax", s, got, err)
		}
	}
}
