package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// fixture holds one state of each kind, with value types that exercise the
// built-in codecs and the JSON one (win is in state_test.go).
type fixture struct {
	val  *ValueState[string, int64]
	lst  *ListState[string, string]
	mp   *MapState[string, int32, float64]
	nval *NamespacedValueState[string, win, []byte]
	nlst *NamespacedListState[string, uint8, bool]
}

// registrars register the states of a fixture one by one, so a test can
// register some before a restore and the rest after.
var registrars = []func(b *Backend[string], f *fixture){
	func(b *Backend[string], f *fixture) { f.val = MustValue[string, int64](b, "val") },
	func(b *Backend[string], f *fixture) { f.lst = MustList[string, string](b, "lst") },
	func(b *Backend[string], f *fixture) { f.mp = MustMap[string, int32, float64](b, "mp") },
	func(b *Backend[string], f *fixture) { f.nval = MustNamespacedValue[string, win, []byte](b, "nval") },
	func(b *Backend[string], f *fixture) { f.nlst = MustNamespacedList[string, uint8, bool](b, "nlst") },
}

func registerAll(b *Backend[string]) *fixture {
	f := &fixture{}
	for _, r := range registrars {
		r(b, f)
	}
	return f
}

// mutate applies n random operations to the states of f.
func mutate(rt *rapid.T, b *Backend[string], f *fixture, n int) {
	key := rapid.Custom(func(t *rapid.T) string { return fmt.Sprintf("k%d", rapid.IntRange(0, 40).Draw(t, "k")) })
	nsWin := rapid.Custom(func(t *rapid.T) win {
		s := rapid.Int64Range(-2, 2).Draw(t, "start")
		return win{s * 10, s*10 + 10}
	})
	for range n {
		set(b, key.Draw(rt, "key"))
		switch rapid.IntRange(0, 9).Draw(rt, "op") {
		case 0:
			f.val.Update(rapid.Int64().Draw(rt, "v"))
		case 1:
			f.val.Clear()
		case 2:
			f.lst.Add(rapid.String().Draw(rt, "item"))
		case 3:
			f.lst.Update(rapid.SliceOfN(rapid.String(), 0, 3).Draw(rt, "items"))
		case 4:
			f.mp.Put(rapid.Int32Range(-3, 3).Draw(rt, "uk"), rapid.Float64().Draw(rt, "uv"))
		case 5:
			f.mp.Remove(rapid.Int32Range(-3, 3).Draw(rt, "uk"))
		case 6:
			f.nval.Update(nsWin.Draw(rt, "ns"), rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(rt, "bytes"))
		case 7:
			f.nval.Clear(nsWin.Draw(rt, "ns"))
		case 8:
			f.nlst.Add(rapid.Uint8Range(0, 3).Draw(rt, "ns"), rapid.Bool().Draw(rt, "b"))
		case 9:
			f.nlst.Clear(rapid.Uint8Range(0, 3).Draw(rt, "ns"))
		}
	}
}

// dump renders every entry of b, by "state|key group|key|namespace". Maps
// print with sorted keys, so equal contents give equal dumps.
func dump(b *Backend[string]) map[string]string {
	out := map[string]string{}
	for _, name := range b.StateNames() {
		t, _ := b.Table(name)
		for kg := b.Range().Start; kg <= b.Range().End; kg++ {
			t.ForEachAny(kg, func(key, ns, value any) {
				out[fmt.Sprintf("%s|%d|%v|%v", name, kg, key, ns)] = fmt.Sprintf("%v", value)
			})
		}
	}
	return out
}

// restrict returns the entries of d whose key group is in r.
func restrict(d map[string]string, r keygroup.Range) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		var name string
		var kg int
		fmt.Sscanf(strings.Replace(k, "|", " ", 2), "%s %d", &name, &kg)
		if r.Contains(kg) {
			out[k] = v
		}
	}
	return out
}

// tester is what testing.TB and *rapid.T share.
type tester interface {
	fataler
	Errorf(format string, args ...any)
	FailNow()
}

func snapshotAll(t tester, b *Backend[string]) map[int][]byte {
	t.Helper()
	blobs := map[int][]byte{}
	for kg := b.Range().Start; kg <= b.Range().End; kg++ {
		blob, err := b.SnapshotKeyGroup(kg)
		if err != nil {
			t.Fatalf("snapshot of key group %d: %v", kg, err)
		}
		blobs[kg] = blob
	}
	return blobs
}

func diff(t tester, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing %s = %s", what, k, w)
		} else if g != w {
			t.Errorf("%s: %s = %s, want %s", what, k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %s", what, k, g)
		}
	}
	t.FailNow()
}

// TestSnapshotRescaleRoundTrip snapshots every key group of a backend owning
// [0,127] with random content of every state kind, keeps changing it, and
// restores the snapshots into 1 to 4 backends (a rescale 1 -> p), each
// registering a random subset of its states before the restore and the rest
// after, some of them snapshotting while entries are still pending. Each new
// backend must hold exactly the snapshot-time entries of its key groups.
func TestSnapshotRescaleRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := full()
		f := registerAll(src)
		mutate(rt, src, f, rapid.IntRange(0, 120).Draw(rt, "ops"))
		want := dump(src)

		blobs := snapshotAll(rt, src)
		diff(rt, "source after snapshot", dump(src), want) // snapshots do not mutate
		for kg, blob := range blobs {
			if (blob == nil) != (len(restrict(want, keygroup.Range{Start: kg, End: kg})) == 0) {
				rt.Fatalf("key group %d: blob %x, but the key group has %d entries", kg, blob,
					len(restrict(want, keygroup.Range{Start: kg, End: kg})))
			}
		}
		mutate(rt, src, f, rapid.IntRange(0, 40).Draw(rt, "more ops")) // must not reach the blobs

		p := rapid.IntRange(1, 4).Draw(rt, "parallelism")
		for i := range p {
			rng := keygroup.RangeFor(maxP, p, i)
			dst := newB[string](rng)
			g := &fixture{}
			before := rapid.SliceOfN(rapid.Bool(), len(registrars), len(registrars)).Draw(rt, "register before restore")
			for j, r := range registrars {
				if before[j] {
					r(dst, g)
				}
			}
			for kg := rng.Start; kg <= rng.End; kg++ {
				if err := dst.RestoreKeyGroup(kg, blobs[kg]); err != nil {
					rt.Fatalf("restore of key group %d into %v: %v", kg, rng, err)
				}
			}
			if rapid.Bool().Draw(rt, "snapshot with pending entries") {
				// Entries of unregistered states must be carried over.
				again := snapshotAll(rt, dst)
				dst2 := newB[string](rng)
				registerAll(dst2)
				for kg, blob := range again {
					if err := dst2.RestoreKeyGroup(kg, blob); err != nil {
						rt.Fatalf("restore of a snapshot with pending entries: %v", err)
					}
				}
				diff(rt, fmt.Sprintf("re-snapshot of %v", rng), dump(dst2), restrict(want, rng))
			}
			for j, r := range registrars {
				if !before[j] {
					r(dst, g)
				}
			}
			diff(rt, fmt.Sprintf("backend %v", rng), dump(dst), restrict(want, rng))
			if len(dst.pending) != 0 {
				rt.Fatalf("entries still pending after every state registered: %v", dst.pending)
			}
		}
	})
}

// TestSnapshotFormat pins the bytes of version 1 for one entry (documented in
// doc.go and docs/state-format.md).
func TestSnapshotFormat(t *testing.T) {
	b := full()
	set(b, "a")
	MustValue[string, int64](b, "count").Update(5)
	kg := kgOf("a")
	if kg != 81 {
		t.Fatalf("key group of \"a\" is %d; docs/state-format.md says 81", kg)
	}
	blob, err := b.SnapshotKeyGroup(kg)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		1,                          // format version
		byte(kg),                   // key group (< 128: one byte)
		1,                          // one state
		5, 'c', 'o', 'u', 'n', 't', // name
		1,      // kind: value
		5,      // section length
		1,      // one entry
		1, 'a', // key
		1, 10, // value: zig-zag varint of 5
	}
	if !bytes.Equal(blob, want) {
		t.Fatalf("blob % x\nwant % x", blob, want)
	}
}

// TestSnapshotLongFields covers length prefixes and sections of more than one
// varint byte (values of 200 B and 70 kB, a list of 300 items).
func TestSnapshotLongFields(t *testing.T) {
	b := full()
	val := MustValue[string, string](b, "v")
	lst := MustList[string, int](b, "l")
	long := strings.Repeat("x", 70_000)
	set(b, "a")
	val.Update(long)
	for i := range 300 {
		lst.Add(i * 1000)
	}
	set(b, strings.Repeat("k", 200))
	val.Update("short")
	want := dump(b)
	c := full()
	MustValue[string, string](c, "v")
	for kg, blob := range snapshotAll(t, b) {
		if err := c.RestoreKeyGroup(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
	MustList[string, int](c, "l")
	diff(t, "restored", dump(c), want)
}

func TestSnapshotEmptyKeyGroup(t *testing.T) {
	b := full()
	registerAll(b)
	blob, err := b.SnapshotKeyGroup(3)
	if err != nil || blob != nil {
		t.Fatalf("empty key group: %x, %v; want nil, nil", blob, err)
	}
	for _, empty := range [][]byte{nil, {}} {
		if err := b.RestoreKeyGroup(3, empty); err != nil {
			t.Fatalf("restore of an empty blob: %v", err)
		}
	}
	if _, err := b.SnapshotKeyGroup(maxP); err == nil {
		t.Fatal("snapshot of a key group outside the range: no error")
	}
	if err := newB[string](keygroup.Range{Start: 0, End: 9}).RestoreKeyGroup(10, nil); err == nil {
		t.Fatal("restore of a key group outside the range: no error")
	}
}

// sample returns a backend with a few entries of every kind, all in key
// group kgOf("a") (keys "a" only), and that key group's blob.
func sample(t testing.TB) (*Backend[string], int, []byte) {
	t.Helper()
	b := full()
	f := registerAll(b)
	set(b, "a")
	f.val.Update(-7)
	f.lst.Add("x")
	f.lst.Add("yy")
	f.mp.Put(1, 1.5)
	f.mp.Put(2, -2)
	f.nval.Update(win{0, 10}, []byte("hello"))
	f.nlst.Add(1, true)
	f.nlst.Add(2, false)
	kg := kgOf("a")
	blob, err := b.SnapshotKeyGroup(kg)
	if err != nil {
		t.Fatal(err)
	}
	return b, kg, blob
}

func TestRestoreRejectsOtherVersions(t *testing.T) {
	_, kg, blob := sample(t)
	for _, v := range []byte{0, 2, 0x7f} {
		bad := append([]byte{v}, blob[1:]...)
		err := full().RestoreKeyGroup(kg, bad)
		if !errors.Is(err, ErrSnapshotVersion) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Errorf("version %d: %v", v, err)
		}
	}
}

func TestRestoreWrongKeyGroup(t *testing.T) {
	_, kg, blob := sample(t)
	other := (kg + 1) % maxP
	if err := full().RestoreKeyGroup(other, blob); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("key group %d", kg)) {
		t.Fatalf("restoring key group %d's blob as %d: %v", kg, other, err)
	}
}

// TestRestoreCorrupt checks that every truncation of a valid blob, and the
// blob with bytes appended, is rejected with ErrCorruptSnapshot and changes
// nothing, whether the states are registered or not.
func TestRestoreCorrupt(t *testing.T) {
	_, kg, blob := sample(t)
	for _, registered := range []bool{false, true} {
		check := func(what string, bad []byte) {
			t.Helper()
			b := full()
			if registered {
				registerAll(b)
			}
			err := b.RestoreKeyGroup(kg, bad)
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("registered=%v, %s: %v, want ErrCorruptSnapshot", registered, what, err)
			}
			registerAll(b)
			if d := dump(b); len(d) != 0 {
				t.Fatalf("registered=%v, %s: failed restore left entries %v", registered, what, d)
			}
		}
		for n := 1; n < len(blob); n++ {
			check(fmt.Sprintf("truncated to %d bytes", n), blob[:n])
		}
		check("trailing byte", append(bytes.Clone(blob), 0))
		// A list entry claiming zero items.
		b := full()
		set(b, "a")
		MustList[string, int](b, "l").Add(1)
		good, _ := b.SnapshotKeyGroup(kg)
		bad := bytes.Clone(good)
		bad[len(bad)-3] = 0 // the list length, before item length 1 and item 0x02
		if !bytes.HasSuffix(good, []byte{1, 1, 2}) {
			t.Fatalf("unexpected layout % x", good)
		}
		err := newB[string](b.Range()).RestoreKeyGroup(kg, bad)
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("empty list: %v", err)
		}
	}
	// Unsorted (here: duplicated) state names.
	b := full()
	set(b, "a")
	MustValue[string, int](b, "x").Update(1)
	one, _ := b.SnapshotKeyGroup(kg)
	body := one[3:] // after version, key group, state count
	dup := append([]byte{1, byte(kg), 2}, append(bytes.Clone(body), body...)...)
	if err := full().RestoreKeyGroup(kg, dup); !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), "sorted") {
		t.Fatalf("duplicated state: %v", err)
	}
}

func TestRestoreKindMismatch(t *testing.T) {
	_, kg, blob := sample(t)

	// Registered before the restore.
	b := full()
	MustList[string, int64](b, "val") // "val" is value state in the blob
	err := b.RestoreKeyGroup(kg, blob)
	if err == nil || !strings.Contains(err.Error(), `"val"`) || !strings.Contains(err.Error(), "value state") {
		t.Fatalf("kind mismatch: %v", err)
	}
	registerAll(newB[string](b.Range())) // the other names are fine
	if n := MustList[string, int64](b, "val").numKeys(); n != 0 {
		t.Fatalf("failed restore changed the state: %d keys", n)
	}

	// Registered after the restore.
	b = full()
	if err := b.RestoreKeyGroup(kg, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := Map[string, int32, float64](b, "lst"); err == nil || !strings.Contains(err.Error(), `"lst"`) {
		t.Fatalf("registering pending list state as map: %v", err)
	}
	expectPanic(t, "MustNamespacedValue of pending list state", `"lst"`, func() {
		MustNamespacedValue[string, int, int](b, "lst")
	})
	// The right kind still gets the entries.
	got := map[string][]string{}
	registerAll(b).lst.forEach(kg, func(k string, v []string) { got[k] = v })
	if got := fmt.Sprint(got); got != "map[a:[x yy]]" {
		t.Fatalf("list after failed registrations: %s", got)
	}
}

// failingCodec decodes like the default int64 codec but refuses 13.
type failingCodec struct{}

func (failingCodec) Append(dst []byte, v int64) ([]byte, error) {
	return DefaultCodec[int64]().Append(dst, v)
}

func (failingCodec) Decode(src []byte) (int64, error) {
	v, err := DefaultCodec[int64]().Decode(src)
	if v == 13 {
		return 0, errors.New("unlucky")
	}
	return v, err
}

// TestRestoreCodecErrorChangesNothing: a codec error in the second state of a
// blob must leave the first one untouched (registered before), and a codec
// error while decoding pending entries must leave the state unregistered.
func TestRestoreCodecErrorChangesNothing(t *testing.T) {
	b := full()
	set(b, "a")
	MustValue[string, int64](b, "a-first").Update(1)
	MustValue[string, int64](b, "b-second").Update(13)
	kg := kgOf("a")
	blob, _ := b.SnapshotKeyGroup(kg)

	c := full()
	first := MustValue[string, int64](c, "a-first")
	MustValueWithCodec[string, int64](c, "b-second", failingCodec{})
	err := c.RestoreKeyGroup(kg, blob)
	if err == nil || !strings.Contains(err.Error(), "unlucky") || !strings.Contains(err.Error(), `"b-second"`) {
		t.Fatalf("codec error: %v", err)
	}
	if first.tab().numKeys() != 0 {
		t.Fatal("a failed restore changed another state")
	}

	c = full()
	if err := c.RestoreKeyGroup(kg, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := ValueWithCodec[string, int64](c, "b-second", failingCodec{}); err == nil || !strings.Contains(err.Error(), "unlucky") {
		t.Fatalf("pending decode error: %v", err)
	}
	if _, ok := c.Table("b-second"); ok {
		t.Fatal("state registered although its restored entries failed to decode")
	}
	if v := MustValue[string, int64](c, "b-second"); v.tab().numKeys() != 1 {
		t.Fatal("entries lost after a failed registration")
	}
}

// upperCodec stores strings upper-cased, to show that a state's codec is used.
type upperCodec struct{}

func (upperCodec) Append(dst []byte, v string) ([]byte, error) {
	return append(dst, strings.ToUpper(v)...), nil
}
func (upperCodec) Decode(src []byte) (string, error) { return strings.ToLower(string(src)), nil }

// pairKey is a key type the default (JSON) codec refuses: its fields are
// unexported.
type pairKey struct{ a, b string }

type pairCodec struct{}

func (pairCodec) Append(dst []byte, k pairKey) ([]byte, error) {
	dst = appendString(dst, k.a)
	return append(dst, k.b...), nil
}

func (pairCodec) Decode(src []byte) (pairKey, error) {
	r := newReader(src)
	a, err := r.Field("a")
	if err != nil {
		return pairKey{}, err
	}
	return pairKey{string(a), string(src[r.Off:])}, nil
}

func TestCustomCodecs(t *testing.T) {
	b := newB[pairKey](keygroup.Range{Start: 0, End: 0})
	st := MustMapWithCodecs[pairKey, string, string](b, "m", upperCodec{}, nil)
	nl := MustNamespacedListWithCodecs[pairKey, string, string](b, "nl", nil, upperCodec{})
	b.SetCurrentKey(pairKey{"x", "y"}, 0)
	st.Put("hello", "world")
	nl.Add("ns", "item")

	if _, err := b.SnapshotKeyGroup(0); err == nil || !strings.Contains(err.Error(), "unexported") {
		t.Fatalf("default key codec of pairKey: %v", err)
	}
	b.SetKeyCodec(pairCodec{})
	blob, err := b.SnapshotKeyGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"HELLO", "world", "ns", "ITEM"} {
		if !bytes.Contains(blob, []byte(s)) {
			t.Errorf("blob % q lacks %q", blob, s)
		}
	}

	c := newB[pairKey](b.Range())
	c.SetKeyCodec(pairCodec{})
	if err := c.RestoreKeyGroup(0, blob); err != nil {
		t.Fatal(err)
	}
	st2 := MustMapWithCodecs[pairKey, string, string](c, "m", upperCodec{}, nil)
	nl2 := MustNamespacedListWithCodecs[pairKey, string, string](c, "nl", nil, upperCodec{})
	c.SetCurrentKey(pairKey{"x", "y"}, 0)
	if v, _ := st2.Get("hello"); v != "world" {
		t.Errorf("map state after restore: %v", v)
	}
	if v := nl2.Get("ns"); fmt.Sprint(v) != "[item]" {
		t.Errorf("namespaced list after restore: %v", v)
	}
}

// TestClearKeyGroupDropsPending: entries restored for a state not registered
// yet leave with their key group.
func TestClearKeyGroupDropsPending(t *testing.T) {
	_, kg, blob := sample(t)
	b := full()
	if err := b.RestoreKeyGroup(kg, blob); err != nil {
		t.Fatal(err)
	}
	b.ClearKeyGroup(kg)
	if blob, _ := b.SnapshotKeyGroup(kg); blob != nil {
		t.Fatalf("snapshot after ClearKeyGroup: %x", blob)
	}
	if d := dump(registerBackend(b)); len(d) != 0 {
		t.Fatalf("entries after ClearKeyGroup: %v", d)
	}
}

func registerBackend(b *Backend[string]) *Backend[string] {
	registerAll(b)
	return b
}

// TestRestoreKeepsCurrentKeyCoherent: restoring an entry of the current key
// must not leave the value cache pointing at the replaced entry.
func TestRestoreKeepsCurrentKeyCoherent(t *testing.T) {
	src := full()
	set(src, "a")
	MustValue[string, int](src, "v").Update(42)
	blob, _ := src.SnapshotKeyGroup(kgOf("a"))

	b := full()
	v := MustValue[string, int](b, "v")
	set(b, "a")
	v.Update(1)
	v.Value() // caches the entry
	if err := b.RestoreKeyGroup(kgOf("a"), blob); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Value(); got != 42 {
		t.Fatalf("value after restore: %d, want 42", got)
	}
	v.Update(43)
	var seen int
	v.forEach(kgOf("a"), func(_ string, x int) { seen = x })
	if seen != 43 {
		t.Fatalf("update after restore went to a stale entry: stored %d", seen)
	}
}

// TestSnapshotOfLossyTypeNamesState checks that the JSON codec's refusal of
// a type with unexported fields shows up as a snapshot error naming the
// state and the field.
func TestSnapshotOfLossyTypeNamesState(t *testing.T) {
	type hidden struct {
		Name   string
		secret string
	}
	b := full()
	st := MustValue[string, hidden](b, "h")
	set(b, "k")
	st.Update(hidden{"a", "b"})
	if _, err := b.SnapshotKeyGroup(kgOf("k")); err == nil || !strings.Contains(err.Error(), `"h"`) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("snapshot of a lossy type: %v", err)
	}
}
