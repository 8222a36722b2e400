package state

import (
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// op is one random operation on a fixture, drawn once and applied to
// several backends.
type op struct {
	key  string
	kind int
	i64  int64
	str  string
	strs []string
	i32  int32
	f64  float64
	win  win
	data []byte
	u8   uint8
	bit  bool
}

var opGen = rapid.Custom(func(t *rapid.T) op {
	s := rapid.Int64Range(-2, 2).Draw(t, "start")
	return op{
		key:  fmt.Sprintf("k%d", rapid.IntRange(0, 60).Draw(t, "k")),
		kind: rapid.IntRange(0, 11).Draw(t, "op"),
		i64:  rapid.Int64().Draw(t, "i64"),
		str:  rapid.StringN(0, 8, 8).Draw(t, "str"),
		strs: rapid.SliceOfN(rapid.StringN(0, 4, 4), 0, 3).Draw(t, "strs"),
		i32:  rapid.Int32Range(-3, 3).Draw(t, "i32"),
		f64:  rapid.Float64().Draw(t, "f64"),
		win:  win{s * 10, s*10 + 10},
		data: rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "data"),
		u8:   rapid.Uint8Range(0, 3).Draw(t, "u8"),
		bit:  rapid.Bool().Draw(t, "bit"),
	}
})

func (o op) apply(b *Backend[string], f *fixture) {
	if len(o.key)%2 == 0 {
		// Half of the keys made current without their key group, as a
		// keyed operator does: value state then reads its index (X1-X3).
		b.SetKeyGroupFunc(kgOf)
		b.SetCurrentKeyLazy(o.key)
	} else {
		set(b, o.key)
	}
	switch o.kind {
	case 0:
		// Read first, so that the value state's cached-entry path is taken.
		v, _ := f.val.Value()
		f.val.Update(v ^ o.i64)
	case 1:
		f.val.Clear()
	case 2:
		f.lst.Add(o.str)
	case 3:
		f.lst.Update(o.strs)
	case 4:
		// Read first, so that the map state's remembered map is written.
		if _, ok := f.mp.Get(o.i32); ok || o.bit {
			f.mp.Put(o.i32, o.f64)
		} else {
			f.mp.Put(o.i32+1, o.f64)
		}
	case 5:
		f.mp.Remove(o.i32)
	case 6:
		f.nval.Update(o.win, o.data)
	case 7:
		f.nval.Clear(o.win)
	case 8:
		f.nlst.Add(o.u8, o.bit)
	case 9:
		f.nlst.MergeNamespaces(o.u8, []uint8{o.u8 + 1, o.u8 + 2})
	case 10:
		// Many namespaces for one key: the key gets an index in its key
		// group (nstable.go), which copy-on-write must copy too.
		for j := range int64(nsIndexAbove + 8) {
			f.nval.Update(win{100 + 10*j, 110 + 10*j}, o.data)
		}
	case 11:
		// And back to few: the index is dropped, the array shrinks.
		for j := range int64(nsIndexAbove + 8) {
			if j%8 != 0 {
				f.nval.Clear(win{100 + 10*j, 110 + 10*j})
			}
		}
	}
}

// frozenDump restores every key group of a Frozen view into a new backend
// and dumps it.
func frozenDump(t tester, fz *Frozen[string], kgs []int) map[string]string {
	t.Helper()
	r := full()
	registerAll(r)
	for _, kg := range kgs {
		blob, err := fz.SnapshotKeyGroup(kg)
		if err != nil {
			t.Fatalf("frozen snapshot of key group %d: %v", kg, err)
		}
		if err := r.RestoreKeyGroup(kg, blob); err != nil {
			t.Fatalf("restore of key group %d: %v", kg, err)
		}
	}
	return dump(r)
}

// TestFrozenSnapshotIsFreezeTime: random operations on every state kind,
// with Frozen views taken at random points (several alive at once) and
// serialized key group by key group while the operations go on. Each view
// restores to exactly the content of its Freeze time, and the live backend
// ends equal to a twin that took the same operations and never froze.
func TestFrozenSnapshotIsFreezeTime(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b, twin := full(), full()
		f, ft := registerAll(b), registerAll(twin)
		type view struct {
			fz   *Frozen[string]
			want map[string]string
			got  map[string]string
			todo []int // key groups not serialized yet
		}
		var views []*view
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			for _, o := range rapid.SliceOfN(opGen, 0, 60).Draw(rt, "ops") {
				o.apply(b, f)
				o.apply(twin, ft)
			}
			switch rapid.IntRange(0, 2).Draw(rt, "action") {
			case 0:
				v := &view{fz: b.Freeze(), want: dump(b), got: map[string]string{}}
				for kg := range 128 {
					v.todo = append(v.todo, kg)
				}
				views = append(views, v)
			case 1:
				if len(views) == 0 {
					continue
				}
				// Serialize some key groups of one view.
				v := views[rapid.IntRange(0, len(views)-1).Draw(rt, "view")]
				n := rapid.IntRange(0, len(v.todo)).Draw(rt, "n")
				for k, val := range frozenDump(rt, v.fz, v.todo[:n]) {
					v.got[k] = val
				}
				v.todo = v.todo[n:]
			}
		}
		for _, o := range rapid.SliceOfN(opGen, 0, 60).Draw(rt, "last ops") {
			o.apply(b, f)
			o.apply(twin, ft)
		}
		for i, v := range views {
			for k, val := range frozenDump(rt, v.fz, v.todo) {
				v.got[k] = val
			}
			v.fz.Close()
			diff(rt, fmt.Sprintf("view %d", i), v.got, v.want)
		}
		diff(rt, "live backend", dump(b), dump(twin))
		if n := b.frozenLive.Load(); n != 0 {
			rt.Fatalf("%d frozen views live after closing all", n)
		}
	})
}

// TestFrozenSnapshotConcurrent serializes a Frozen view on another goroutine
// while the backend's goroutine keeps writing every key group (run with
// -race: the view must never read what the writer writes).
func TestFrozenSnapshotConcurrent(t *testing.T) {
	b := full()
	f := registerAll(b)
	ops := rapid.SliceOfN(opGen, 20_000, 20_000).Example(1)
	for _, o := range ops[:10_000] {
		o.apply(b, f)
	}
	for round := range 3 {
		fz := b.Freeze()
		want := dump(b)
		var got map[string]string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			kgs := make([]int, 128)
			for i := range kgs {
				kgs[i] = 127 - i // the writer starts at the other end
			}
			got = frozenDump(t, fz, kgs)
		}()
		for _, o := range ops[10_000+round*3000 : 10_000+(round+1)*3000] {
			o.apply(b, f)
		}
		wg.Wait()
		fz.Close()
		diff(t, fmt.Sprintf("round %d", round), got, want)
	}
}

// A key group is serialized once: by the view before the subtask writes
// it, or by the subtask just before its first write (which then goes in
// place); only a key group the view is serializing at that instant is
// copied.
func TestFrozenKeyGroupSerializedOnceNeverCopiedUnlessBusy(t *testing.T) {
	b := full()
	v := MustValue[string, int](b, "v")
	set(b, "a")
	v.Update(1)
	kg := b.CurrentKeyGroup()
	ptr := func() string { return fmt.Sprintf("%p", v.groups[kg]) }
	before := ptr()
	restored := func(blob []byte) int {
		r := full()
		rv := MustValue[string, int](r, "v")
		if err := r.RestoreKeyGroup(kg, blob); err != nil {
			t.Fatal(err)
		}
		set(r, "a")
		got, _ := rv.Value()
		return got
	}

	// The view serializes first; the write after goes in place.
	fz := b.Freeze()
	blob, err := fz.SnapshotKeyGroup(kg)
	if err != nil {
		t.Fatal(err)
	}
	set(b, "a")
	v.Update(2)
	if ptr() != before {
		t.Fatal("a key group the view had serialized was copied on write")
	}
	if got := restored(blob); got != 1 {
		t.Fatalf("view 1 holds %d, want 1", got)
	}
	fz.Close()

	// The subtask writes first: it serializes the key group for the view,
	// then writes in place.
	fz = b.Freeze()
	set(b, "a")
	v.Update(3)
	if ptr() != before {
		t.Fatal("the subtask copied a key group it could serialize itself")
	}
	if blob, err = fz.SnapshotKeyGroup(kg); err != nil {
		t.Fatal(err)
	}
	if got := restored(blob); got != 2 {
		t.Fatalf("view 2 holds %d, want 2", got)
	}
	fz.Close()

	// The view is serializing the key group when the subtask writes: the
	// subtask copies and the view reads the original.
	fz = b.Freeze()
	p := fz.view.(*frozenMem[string]).pins[kg]
	p.state.Store(pinView) // as AppendSnapshotKeyGroup's claim does
	set(b, "a")
	v.Update(4)
	if ptr() == before {
		t.Fatal("a key group the view was reading was written in place")
	}
	dst, err := fz.view.(*frozenMem[string]).appendKeyGroup(nil, kg)
	if err != nil {
		t.Fatal(err)
	}
	p.state.Store(pinDone)
	close(p.done)
	if got := restored(dst); got != 3 {
		t.Fatalf("view 3 holds %d, want 3", got)
	}
	fz.Close()
	set(b, "a")
	if got, _ := v.Value(); got != 4 {
		t.Fatalf("live value %d, want 4", got)
	}
}
