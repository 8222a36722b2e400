// Package bytesize reads sizes written for people, such as 512, 64KiB,
// 100MiB or 2GiB, for flags and pipeline files. It guarantees that what
// it accepts is a non-negative number of bytes that fits in an int64.
package bytesize

import (
	"errors"
	"strconv"
	"strings"
)

// units are the accepted suffixes, binary multiples only.
var units = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}}

// ErrSyntax is Parse's error: it says what is accepted.
var ErrSyntax = errors.New("want a non-negative number of bytes, optionally with KiB, MiB or GiB (such as 100MiB)")

// Parse returns the number of bytes s stands for: digits, optionally
// followed by KiB, MiB or GiB (spaces before the unit are allowed). It
// returns ErrSyntax for anything else, for a negative size and for one
// beyond 2^62 bytes.
func Parse(s string) (int64, error) {
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, ErrSyntax
	}
	return n * mult, nil
}
