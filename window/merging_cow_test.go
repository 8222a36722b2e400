package window

import (
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/state"
)

// TestSessionSetEditsKeepAFrozenSnapshot: a copy-on-write snapshot taken
// before a key's merging set is edited must hold the set as it was. The
// snapshot copies a key group when the state is written (Update), so an
// edit made in place on the set read from the state, before the write,
// reached the snapshot: a restore then lost the removed session and found
// an empty one in its place.
func TestSessionSetEditsKeepAFrozenSnapshot(t *testing.T) {
	rng := keygroup.Range{Start: 0, End: 0}
	b := state.NewBackend[string](rng)
	sessions := state.MustValueWithCodec[string, []mapping](b, sessionSetName, sessionSetCodec{})
	b.SetCurrentKey("k", 0)
	before := []mapping{
		{win: Window{Start: 0, End: 10}, state: Window{Start: 0, End: 10}},
		{win: Window{Start: 20, End: 30}, state: Window{Start: 20, End: 30}},
		{win: Window{Start: 40, End: 50}, state: Window{Start: 40, End: 50}},
	}
	sessions.Update(slices.Clone(before))

	fz := b.Freeze()
	defer fz.Close()
	set, _ := sessions.Value()
	sessions.Update(removeAt(set, 0))

	blob, err := fz.SnapshotKeyGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	r := state.NewBackend[string](rng)
	restored := state.MustValueWithCodec[string, []mapping](r, sessionSetName, sessionSetCodec{})
	if err := r.RestoreKeyGroup(0, blob); err != nil {
		t.Fatal(err)
	}
	r.SetCurrentKey("k", 0)
	got, _ := restored.Value()
	if !slices.Equal(got, before) {
		t.Fatalf("the snapshot taken before the edit holds %v, want %v", got, before)
	}
	now, _ := sessions.Value()
	if want := before[1:]; !slices.Equal(now, want) {
		t.Fatalf("the live set is %v, want %v", now, want)
	}
}

// TestSessionSetEditedInPlaceOnlyWithoutSnapshot: the operator edits a
// merging set in place (no allocation) exactly when no snapshot may read it
// (ValueState.SnapshotMayRead): while a Frozen view is live it builds a new
// set, and the view holds the set as it was; once the view is closed the
// removal reuses the set's memory.
func TestSessionSetEditedInPlaceOnlyWithoutSnapshot(t *testing.T) {
	rng := keygroup.Range{Start: 0, End: 0}
	b := state.NewBackend[string](rng)
	sessions := state.MustValueWithCodec[string, []mapping](b, sessionSetName, sessionSetCodec{})
	b.SetCurrentKey("k", 0)
	before := []mapping{
		{win: Window{Start: 0, End: 10}, state: Window{Start: 0, End: 10}},
		{win: Window{Start: 20, End: 30}, state: Window{Start: 20, End: 30}},
		{win: Window{Start: 40, End: 50}, state: Window{Start: 40, End: 50}},
	}
	sessions.Update(slices.Clone(before))

	fz := b.Freeze()
	set, _ := sessions.Value()
	if !sessions.SnapshotMayRead() {
		t.Fatal("SnapshotMayRead is false while a Frozen view of the state is live")
	}
	edited := removeFrom(set, 0, !sessions.SnapshotMayRead())
	if &edited[0] == &set[0] || &edited[0] == &set[1] {
		t.Fatal("the set was edited in place while a snapshot may read it")
	}
	sessions.Update(edited)
	blob, err := fz.SnapshotKeyGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	fz.Close()
	r := state.NewBackend[string](rng)
	restored := state.MustValueWithCodec[string, []mapping](r, sessionSetName, sessionSetCodec{})
	if err := r.RestoreKeyGroup(0, blob); err != nil {
		t.Fatal(err)
	}
	r.SetCurrentKey("k", 0)
	if got, _ := restored.Value(); !slices.Equal(got, before) {
		t.Fatalf("the snapshot taken before the edit holds %v, want %v", got, before)
	}

	set, _ = sessions.Value()
	if sessions.SnapshotMayRead() {
		t.Fatal("SnapshotMayRead is true with every Frozen view closed")
	}
	allocs := testing.AllocsPerRun(1, func() {
		edited = removeFrom(set, 0, !sessions.SnapshotMayRead())
	})
	if allocs != 0 || &edited[0] != &set[0] {
		t.Fatalf("without a snapshot the removal allocated %v times (in place: %v)", allocs, &edited[0] == &set[0])
	}
	sessions.Update(edited)
	if now, _ := sessions.Value(); !slices.Equal(now, before[2:]) {
		t.Fatalf("the live set is %v, want %v", now, before[2:])
	}
}
