package state

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// testKind is the kind of backend newB makes: the memory backend, except
// while TestOnPebble runs the shared tests against the Pebble backend.
var testKind = BackendMemory

// openTest holds the Pebble backends newB opened, oldest first; newB closes
// the oldest beyond the last 32 (a rapid iteration uses far fewer), and
// TestOnPebble closes the rest.
var openTest []interface{ Close() error }

// newB returns an empty backend of testKind for the tests shared by both
// backends.
func newB[K comparable](r keygroup.Range) *Backend[K] {
	if testKind == BackendMemory {
		return NewBackend[K](r)
	}
	b, err := Open[K](Options{Kind: testKind, MemTableSize: 1 << 20}, r)
	if err != nil {
		panic(err)
	}
	openTest = append(openTest, b)
	if len(openTest) > 32 {
		openTest[0].Close()
		openTest = openTest[1:]
	}
	return b
}

// fewerChecks lowers rapid's number of checks for the duration of a test
// (opening a Pebble database takes milliseconds), unless WEIR_LONG_TESTS is
// set.
func fewerChecks(t *testing.T) {
	if os.Getenv("WEIR_LONG_TESTS") != "" {
		return
	}
	f := flag.Lookup("rapid.checks")
	old := f.Value.String()
	if old != "100" { // set on the command line: keep it
		return
	}
	flag.Set("rapid.checks", "20")
	t.Cleanup(func() { flag.Set("rapid.checks", old) })
}

func closeTestBackends(t testing.TB) {
	for _, b := range openTest {
		if err := b.Close(); err != nil {
			t.Errorf("closing a Pebble backend: %v", err)
		}
	}
	openTest = nil
}

// TestOnPebble runs the backend-independent tests of state_test.go,
// snapshot_test.go and property_test.go against the Pebble backend. Tests
// of the memory backend's internals (slots, sweeps, caches, allocations)
// are not in the list, nor TestCustomCodecs: the Pebble backend runs the
// key codec on every access, so a key type needs its codec before the
// first access, not only before the first snapshot.
func TestOnPebble(t *testing.T) {
	fewerChecks(t)
	testKind = BackendPebble
	defer func() { testKind = BackendMemory; closeTestBackends(t) }()
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"PerKeyIsolation", TestPerKeyIsolation},
		{"NamespaceIsolation", TestNamespaceIsolation},
		{"MergeNamespaces", TestMergeNamespaces},
		{"RoutingPanics", TestRoutingPanics},
		{"Registration", TestRegistration},
		{"ClearRemovesEntries", TestClearRemovesEntries},
		{"MapRange", TestMapRange},
		{"TableForEachAny", TestTableForEachAny},
		{"ForEachFunctions", TestForEachFunctions},
		{"SnapshotRescaleRoundTrip", TestSnapshotRescaleRoundTrip},
		{"SnapshotFormat", TestSnapshotFormat},
		{"SnapshotLongFields", TestSnapshotLongFields},
		{"SnapshotEmptyKeyGroup", TestSnapshotEmptyKeyGroup},
		{"RestoreRejectsOtherVersions", TestRestoreRejectsOtherVersions},
		{"RestoreWrongKeyGroup", TestRestoreWrongKeyGroup},
		{"RestoreCorrupt", TestRestoreCorrupt},
		{"RestoreKindMismatch", TestRestoreKindMismatch},
		{"RestoreCodecErrorChangesNothing", TestRestoreCodecErrorChangesNothing},
		{"ClearKeyGroupDropsPending", TestClearKeyGroupDropsPending},
		{"RestoreKeepsCurrentKeyCoherent", TestRestoreKeepsCurrentKeyCoherent},
		{"StateMatchesModel", TestStateMatchesModel},
		{"FrozenSnapshotIsFreezeTime", TestFrozenSnapshotIsFreezeTime},
		{"FrozenSnapshotConcurrent", TestFrozenSnapshotConcurrent},
	} {
		t.Run(tc.name, tc.f)
	}
}

func TestOpenUnknownKind(t *testing.T) {
	if _, err := Open[string](Options{Kind: "rocks"}, keygroup.Range{}); err == nil {
		t.Fatal("Open accepted an unknown backend kind")
	}
}

func TestPebbleCloseRemovesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	b, err := Open[string](Options{Kind: BackendPebble, Dir: dir}, keygroup.Range{Start: 0, End: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind() != BackendPebble {
		t.Fatalf("kind %q", b.Kind())
	}
	b.SetCurrentKey("k", 1)
	MustValue[string, int](b, "v").Update(1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("working directory still there after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v (want a no-op)", err)
	}
	if m := NewBackend[string](keygroup.Range{Start: 0, End: 3}); m.Kind() != BackendMemory || m.Close() != nil || m.Close() != nil {
		t.Fatalf("memory backend: kind %q, or Close failed", m.Kind())
	}
}

// TestPebbleMatchesMemory drives a memory and a Pebble backend with the same
// random operations on every state kind and compares every read, the
// dumps, and the snapshots byte for byte (after a canonical sort, since
// entry order within a section is unspecified); snapshots are restored
// crosswise (memory into Pebble and Pebble into memory) at another
// parallelism and must give the same entries.
func TestPebbleMatchesMemory(t *testing.T) {
	fewerChecks(t)
	defer closeTestBackends(t)
	rapid.Check(t, func(rt *rapid.T) {
		mem := full()
		testKind = BackendPebble
		peb := full()
		testKind = BackendMemory
		fm, fp := registerAll(mem), registerAll(peb)
		n := rapid.IntRange(0, 150).Draw(rt, "ops")
		keys := []string{"a", "b", "c", "d", "e"}
		for i := range n {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			set(mem, key)
			set(peb, key)
			v := rapid.IntRange(0, 3).Draw(rt, "v")
			ns := rapid.IntRange(0, 2).Draw(rt, "ns")
			op := rapid.IntRange(0, 13).Draw(rt, "op")
			same := func(what string, a, b any) {
				if fmt.Sprint(a) != fmt.Sprint(b) {
					rt.Fatalf("op %d (%s on %q): memory %v, pebble %v", i, what, key, a, b)
				}
			}
			for _, f := range []*fixture{fm, fp} {
				w := win{int64(ns) * 10, int64(ns)*10 + 10}
				switch op {
				case 0:
					f.val.Update(int64(v))
				case 1:
					f.val.Clear()
				case 2:
					f.lst.Add(fmt.Sprint(v))
				case 3:
					f.lst.Update(slices.Repeat([]string{fmt.Sprint(v)}, v))
				case 4:
					f.mp.Put(int32(v), float64(v)/2)
				case 5:
					f.mp.Remove(int32(v))
				case 6:
					f.nval.Update(w, slices.Repeat([]byte{byte(v)}, v))
				case 7:
					f.nval.Clear(w)
				case 8:
					f.nlst.Add(uint8(ns), v%2 == 0)
				case 9:
					f.nlst.Clear(uint8(ns))
				case 10:
					f.nval.MergeNamespaces(w, []win{{0, 10}, {10, 20}, {20, 30}}, func(a, b []byte) []byte { return append(slices.Clone(a), b...) })
				case 11:
					f.nlst.MergeNamespaces(uint8(ns), []uint8{2, 1})
				case 12:
					f.mp.Clear()
				case 13:
					f.lst.Clear()
				}
			}
			a1, a2 := fm.val.Value()
			b1, b2 := fp.val.Value()
			same("value", []any{a1, a2}, []any{b1, b2})
			same("list", fm.lst.Get(), fp.lst.Get())
			same("map len", fm.mp.Len(), fp.mp.Len())
			w := win{int64(ns) * 10, int64(ns)*10 + 10}
			x1, x2 := fm.nval.Value(w)
			y1, y2 := fp.nval.Value(w)
			same("nvalue", []any{x1, x2}, []any{y1, y2})
			same("nlist", fm.nlst.Get(uint8(ns)), fp.nlst.Get(uint8(ns)))
			var um, up []string
			fm.mp.Range(func(k int32, v float64) bool { um = append(um, fmt.Sprint(k, v)); return true })
			fp.mp.Range(func(k int32, v float64) bool { up = append(up, fmt.Sprint(k, v)); return true })
			slices.Sort(um)
			slices.Sort(up)
			same("map range", um, up)
		}
		diff(rt, "pebble against memory", dump(peb), dump(mem))
		for _, name := range mem.StateNames() {
			tm, _ := mem.Table(name)
			tp, _ := peb.Table(name)
			if tm.NumKeys() != tp.NumKeys() {
				rt.Fatalf("state %q: NumKeys memory %d, pebble %d", name, tm.NumKeys(), tp.NumKeys())
			}
		}
		bm, bp := snapshotAll(rt, mem), snapshotAll(rt, peb)
		if len(bm) != len(bp) {
			rt.Fatalf("memory snapshots %d key groups, pebble %d", len(bm), len(bp))
		}
		want := dump(mem)
		p := rapid.IntRange(1, 3).Draw(rt, "parallelism")
		for i := range p {
			rng := keygroup.RangeFor(maxP, p, i)
			for _, c := range []struct {
				name  string
				kind  string
				blobs map[int][]byte
			}{{"memory into pebble", BackendPebble, bm}, {"pebble into memory", BackendMemory, bp}, {"pebble into pebble", BackendPebble, bp}} {
				testKind = c.kind
				dst := newB[string](rng)
				testKind = BackendMemory
				if rapid.Bool().Draw(rt, "register first") {
					registerAll(dst)
				}
				for kg := rng.Start; kg <= rng.End; kg++ {
					if err := dst.RestoreKeyGroup(kg, c.blobs[kg]); err != nil {
						rt.Fatalf("%s: %v", c.name, err)
					}
				}
				registerAll(dst)
				diff(rt, c.name, dump(dst), restrict(want, rng))
			}
		}
	})
}

// TestPebbleCloseWithFrozenView: closing the backend while a Frozen view
// (a savepoint's asynchronous part) still reads leaves the view working;
// the view's Close closes the database and removes its directory.
func TestPebbleCloseWithFrozenView(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	b, err := Open[string](Options{Kind: BackendPebble, Dir: dir}, keygroup.Range{Start: 0, End: 3})
	if err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey("k", 2)
	MustValue[string, int](b, "v").Update(7)
	f := b.Freeze()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	blob, err := f.SnapshotKeyGroup(2)
	if err != nil || len(blob) == 0 {
		t.Fatalf("snapshot from a view of a closed backend: %x, %v", blob, err)
	}
	f.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("working directory still there after the last view closed: %v", err)
	}
}
