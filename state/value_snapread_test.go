package state

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// TestSnapshotMayReadGuardsInPlaceEdits: a caller that edits the slice a
// value state returned in place whenever SnapshotMayRead reports false (and
// builds a new slice otherwise) never changes what a Frozen view
// serializes, and SnapshotMayRead reports false whenever no view is live,
// so that the in-place path is the steady state. Views are frozen, partly
// serialized and closed in random order between the edits.
func TestSnapshotMayReadGuardsInPlaceEdits(t *testing.T) {
	rng := keygroup.Range{Start: 0, End: 3}
	kg := func(k string) int { return int(keygroup.HashString(k)&0x7fffffff) % 4 }
	rapid.Check(t, func(rt *rapid.T) {
		b := NewBackend[string](rng)
		st := MustValue[string, []int](b, "s")
		model := map[string][]int{}
		type view struct {
			fz   *Frozen[string]
			want map[string][]int
			got  map[string][]int
			todo []int
		}
		var views []*view
		live := 0
		keys := []string{"a", "b", "c", "d", "e"}
		decode := func(v *view, kgs []int) {
			r := NewBackend[string](rng)
			rs := MustValue[string, []int](r, "s")
			for _, g := range kgs {
				blob, err := v.fz.SnapshotKeyGroup(g)
				if err != nil {
					rt.Fatalf("snapshot of key group %d: %v", g, err)
				}
				if err := r.RestoreKeyGroup(g, blob); err != nil {
					rt.Fatalf("restore of key group %d: %v", g, err)
				}
				ForEachValue(rs, g, func(k string, s []int) { v.got[k] = s })
			}
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 4).Draw(rt, "action") {
			case 0, 1: // edit a key's slice: overwrite, append, or drop the first
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				b.SetCurrentKey(k, kg(k))
				s, _ := st.Value()
				mayRead := st.SnapshotMayRead()
				if live == 0 && mayRead {
					rt.Fatalf("SnapshotMayRead with no live view")
				}
				if mayRead {
					s = slices.Clone(s)
				}
				n := rapid.IntRange(0, 99).Draw(rt, "n")
				switch op := rapid.IntRange(0, 2).Draw(rt, "op"); {
				case op == 0 && len(s) > 0:
					s[0] = n
				case op == 1 && len(s) > 0:
					s = append(s[:0], s[1:]...)
				default:
					s = append(s, n)
				}
				st.Update(s)
				model[k] = slices.Clone(s)
			case 2:
				want := map[string][]int{}
				for k, s := range model {
					want[k] = slices.Clone(s)
				}
				views = append(views, &view{fz: b.Freeze(), want: want, got: map[string][]int{}, todo: []int{0, 1, 2, 3}})
				live++
			case 3: // serialize some key groups of a live view
				for _, v := range views {
					if v.fz != nil && len(v.todo) > 0 {
						n := rapid.IntRange(0, len(v.todo)).Draw(rt, "kgs")
						decode(v, v.todo[:n])
						v.todo = v.todo[n:]
						break
					}
				}
			case 4: // finish and close the oldest live view
				for _, v := range views {
					if v.fz != nil {
						decode(v, v.todo)
						v.todo = nil
						v.fz.Close()
						v.fz = nil
						live--
						break
					}
				}
			}
		}
		for i, v := range views {
			if v.fz != nil {
				decode(v, v.todo)
				v.fz.Close()
			}
			if fmt.Sprint(sorted(v.got)) != fmt.Sprint(sorted(v.want)) {
				rt.Fatalf("view %d serialized %v, want the state at its freeze %v", i, sorted(v.got), sorted(v.want))
			}
		}
		for _, k := range keys {
			b.SetCurrentKey(k, kg(k))
			if st.SnapshotMayRead() {
				rt.Fatalf("SnapshotMayRead after every view closed")
			}
			s, _ := st.Value()
			if !slices.Equal(s, model[k]) {
				rt.Fatalf("live %s = %v, want %v", k, s, model[k])
			}
		}
	})
}

// sorted lists m's entries in key order, empty slices left out (a value
// state stores an empty slice, the model may hold nil).
func sorted(m map[string][]int) []string {
	var out []string
	for k, s := range m {
		if len(s) > 0 {
			out = append(out, fmt.Sprintf("%s=%v", k, s))
		}
	}
	slices.Sort(out)
	return out
}
