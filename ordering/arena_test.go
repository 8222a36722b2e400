package ordering

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/weirproject/weir/state"
)

// H1-H3 and A1-A2 for encoded records: whatever the interleaving of pushes
// and releases, the record sizes (some larger than a slab) and the slab
// size, the encoded queue releases the same records in the same order as
// the queue of values, each decoding to the value pushed; slabs are
// recycled once empty, so the arena never keeps more slabs than it has
// records held plus the one appended to.
func TestEncodedQueueMatchesValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var vals heldQueue[string]
		enc := newEncodedQueue(state.DefaultCodec[string]())
		enc.slab = rapid.IntRange(1, 64).Draw(t, "slab")
		enc.q.chunk = rapid.IntRange(1, 5).Draw(t, "chunk")
		vals.chunk = enc.q.chunk
		seq := uint64(0)
		wm := int64(-1)
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.IntRange(0, 4).Draw(t, "op") > 0 {
				h := heldRec[string]{ts: wm + 1 + rapid.Int64Range(0, 20).Draw(t, "dt"),
					t1: rapid.Int64Range(0, 3).Draw(t, "t1"), seq: seq,
					v: strings.Repeat(string(rune('a'+seq%26)), rapid.IntRange(0, 100).Draw(t, "len"))}
				seq++
				vals.push(h)
				if err := enc.push(h); err != nil {
					t.Fatal(err)
				}
				continue
			}
			wm += rapid.Int64Range(0, 15).Draw(t, "dwm")
			var want, got []heldRec[string]
			vals.release(wm, func(h *heldRec[string]) { want = append(want, *h) })
			n, err := enc.release(wm, func(h *heldRec[string]) { got = append(got, *h) })
			if err != nil || n != len(got) {
				t.Fatalf("release: %d (reported %d), %v", len(got), n, err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("released %v, want %v", got, want)
			}
			if enc.len() != vals.len() {
				t.Fatalf("holds %d, want %d", enc.len(), vals.len())
			}
			slabs := 0
			for _, s := range enc.slabs {
				if s != nil {
					slabs++
				}
			}
			if slabs > enc.len()+1 {
				t.Fatalf("%d slabs kept for %d records held (A2)", slabs, enc.len())
			}
			// A snapshot's copy decodes to the records held.
			recs, err := enc.decode(enc.copyHeld())
			if err != nil {
				t.Fatal(err)
			}
			all := vals.all()
			byseq := func(a, b heldRec[string]) int { return int(a.seq) - int(b.seq) }
			slices.SortFunc(recs, byseq)
			slices.SortFunc(all, byseq)
			if !slices.Equal(recs, all) {
				t.Fatalf("snapshot copy %v, want %v", recs, all)
			}
		}
	})
}

// A codec that fails is reported, naming what to fix, and the rest of the
// due records are still released.
func TestEncodedQueueCodecErrors(t *testing.T) {
	enc := newEncodedQueue[string](badCodec{})
	if err := enc.push(heldRec[string]{ts: 1, v: "fail"}); err == nil || !strings.Contains(err.Error(), "HeldCodec") {
		t.Fatalf("push of a value the codec refuses: %v", err)
	}
	for i, v := range []string{"ok", "undecodable", "ok"} {
		if err := enc.push(heldRec[string]{ts: 1, seq: uint64(i), v: v}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	n, err := enc.release(5, func(h *heldRec[string]) { got = append(got, h.v) })
	if err == nil || n != 3 || !slices.Equal(got, []string{"ok", "ok"}) || enc.len() != 0 {
		t.Fatalf("release: %d, %v, %v", n, got, err)
	}
}

type badCodec struct{}

func (badCodec) Append(dst []byte, v string) ([]byte, error) {
	if v == "fail" {
		return dst, errors.New("refused")
	}
	return append(dst, v...), nil
}

func (badCodec) Decode(b []byte) (string, error) {
	if string(b) == "undecodable" {
		return "", errors.New("bad bytes")
	}
	return string(b), nil
}

func TestHasPointers(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{0, false}, {ev{}, true}, {"", true}, {[]int(nil), true}, {[4]int64{}, false}, {[0]*int{}, false},
		{struct {
			A int
			B [2]float64
		}{}, false},
		{struct{ M map[int]int }{}, true}, {new(int), true},
	} {
		if got := hasPointers(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("hasPointers(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}
