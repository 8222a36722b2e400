package nexmark

import (
	"reflect"
	"testing"

	"github.com/weirproject/weir/state"
)

// TestQ11OpenCodec: a bidder's open sessions, as q11Sessions keeps them in
// keyed state, survive the state's snapshot codec, overflow sessions
// included (a checkpoint must not lose a session or its count).
func TestQ11OpenCodec(t *testing.T) {
	c := state.DefaultCodec[q11Open]()
	for _, o := range []q11Open{
		{First: q11Session{Start: 1, End: 10_001, Count: 3}},
		q11OpenOf([]q11Session{{Start: 1, End: 10_001, Count: 3}, {Start: 30_000, End: 40_000, Count: 1}, {Start: 50_000, End: 60_500, Count: 7}}),
	} {
		b, err := c.Append(nil, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("decoded %+v, stored %+v", got, o)
		}
	}
}
