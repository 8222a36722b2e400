package runtime

import (
	"strings"
	"testing"
)

func TestDeadLetterString(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, c := range []struct {
		d    DeadLetter
		want string
	}{
		{DeadLetter{Source: "orders", Split: 3, Position: 17, Raw: []byte(`{"a":`), Reason: "unexpected end of JSON input"},
			`orders split 3 position 17: unexpected end of JSON input (input "{\"a\":")`},
		{DeadLetter{Source: "f", Raw: []byte(long), Reason: "too long"},
			`f split 0 position 0: too long (input "` + long[:80] + `"… 100 bytes)`},
		{DeadLetter{Source: "s", Value: struct{ N int }{4}, Reason: "no timestamp"}, "s split 0 position 0: no timestamp (value {N:4})"},
	} {
		if got := c.d.String(); got != c.want {
			t.Errorf("String() = %s\nwant        %s", got, c.want)
		}
	}
}
