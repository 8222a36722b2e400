package timer

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

const maxP = 128

func kgOf(key string) int { return keygroup.Assign(keygroup.HashString(key), maxP) }

func fullService() *Service[string, window] {
	return NewService[string, window](keygroup.Range{Start: 0, End: maxP - 1})
}

// dumpTimers renders every timer of s as "domain|kg|ts|key|namespace".
func dumpTimers(s *Service[string, window]) map[string]bool {
	out := map[string]bool{}
	r := s.Range()
	for kg := r.Start; kg <= r.End; kg++ {
		s.ForEachEventTimeTimer(kg, func(t Timer[string, window]) {
			out[fmt.Sprintf("event|%d|%d|%s|%v", t.KeyGroup, t.Timestamp, t.Key, t.Namespace)] = true
		})
		s.ForEachProcessingTimeTimer(kg, func(t Timer[string, window]) {
			out[fmt.Sprintf("proc|%d|%d|%s|%v", t.KeyGroup, t.Timestamp, t.Key, t.Namespace)] = true
		})
	}
	return out
}

func restrictTimers(d map[string]bool, r keygroup.Range) map[string]bool {
	out := map[string]bool{}
	for k := range d {
		var kg int
		fmt.Sscanf(k[strings.Index(k, "|")+1:], "%d", &kg)
		if r.Contains(kg) {
			out[k] = true
		}
	}
	return out
}

// mutateTimers registers and deletes n random timers.
func mutateTimers(rt *rapid.T, s *Service[string, window], n int) {
	ts := rapid.OneOf(rapid.Int64Range(-5, 5), rapid.Int64(), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64}))
	for range n {
		key := fmt.Sprintf("k%d", rapid.IntRange(0, 40).Draw(rt, "key"))
		kg := kgOf(key)
		start := rapid.Int64Range(-2, 2).Draw(rt, "window")
		w := window{start * 10, start*10 + 10}
		t := ts.Draw(rt, "ts")
		switch rapid.IntRange(0, 3).Draw(rt, "op") {
		case 0:
			s.RegisterEventTimeTimer(key, kg, w, t)
		case 1:
			s.DeleteEventTimeTimer(key, kg, w, t)
		case 2:
			s.RegisterProcessingTimeTimer(key, kg, w, t)
		case 3:
			s.DeleteProcessingTimeTimer(key, kg, w, t)
		}
	}
}

// TestSnapshotRescaleRoundTrip snapshots every key group of a service owning
// [0,127] with random event-time and processing-time timers, keeps changing
// it, and restores into 1 to 4 services (rescale 1 -> p); each must hold
// exactly the snapshot-time timers of its key groups, and be told the new
// processing-time head.
func TestSnapshotRescaleRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := fullService()
		mutateTimers(rt, src, rapid.IntRange(0, 100).Draw(rt, "ops"))
		want := dumpTimers(src)
		blobs := map[int][]byte{}
		for kg := range maxP {
			blob, err := src.SnapshotKeyGroup(kg)
			if err != nil {
				rt.Fatalf("snapshot of key group %d: %v", kg, err)
			}
			if (blob == nil) != (src.event.LenKeyGroup(kg)+src.proc.LenKeyGroup(kg) == 0) {
				rt.Fatalf("key group %d: blob %x", kg, blob)
			}
			blobs[kg] = blob
		}
		if got := dumpTimers(src); !maps.Equal(got, want) {
			rt.Fatalf("snapshot changed the service")
		}
		mutateTimers(rt, src, rapid.IntRange(0, 30).Draw(rt, "more ops"))

		p := rapid.IntRange(1, 4).Draw(rt, "parallelism")
		for i := range p {
			rng := keygroup.RangeFor(maxP, p, i)
			dst := NewService[string, window](rng)
			var head int64
			heads := 0
			dst.OnProcessingHeadChange(func(ts int64) { head = ts; heads++ })
			for kg := rng.Start; kg <= rng.End; kg++ {
				if err := dst.RestoreKeyGroup(kg, blobs[kg]); err != nil {
					rt.Fatalf("restore of key group %d into %v: %v", kg, rng, err)
				}
			}
			if got, w := dumpTimers(dst), restrictTimers(want, rng); !maps.Equal(got, w) {
				rt.Fatalf("service %v holds %v, want %v", rng, got, w)
			}
			if next, ok := dst.NextProcessingTime(); ok != (heads > 0) || ok && next != head {
				rt.Fatalf("head-change callback saw %d (%d calls), next processing time %d, %v", head, heads, next, ok)
			}
			// Restored timers fire in order.
			last := int64(math.MinInt64)
			dst.AdvanceWatermark(math.MaxInt64, func(t Timer[string, window]) {
				if t.Timestamp < last {
					rt.Fatalf("fired %d after %d", t.Timestamp, last)
				}
				last = t.Timestamp
			})
		}
	})
}

// TestSnapshotFormat pins the bytes of version 1 for one timer of each kind.
func TestSnapshotFormat(t *testing.T) {
	s := NewService[string, struct{}](keygroup.Range{Start: 0, End: 127})
	s.RegisterEventTimeTimer("a", 5, struct{}{}, -1)
	s.RegisterProcessingTimeTimer("bc", 5, struct{}{}, 64)
	blob, err := s.SnapshotKeyGroup(5)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		1,      // format version
		5,      // key group
		1,      // one event-time timer
		1,      // timestamp -1, zig-zag
		1, 'a', // key
		0,       // namespace struct{}: no bytes
		1,       // one processing-time timer
		0x80, 1, // timestamp 64, zig-zag 128
		2, 'b', 'c', // key
		0, // namespace
	}
	if !bytes.Equal(blob, want) {
		t.Fatalf("blob % x\nwant % x", blob, want)
	}
	if blob, err := s.SnapshotKeyGroup(6); blob != nil || err != nil {
		t.Fatalf("empty key group: %x, %v", blob, err)
	}
}

func sampleTimers(t testing.TB) (int, []byte) {
	s := fullService()
	kg := kgOf("a")
	s.RegisterEventTimeTimer("a", kg, window{0, 10}, 9)
	s.RegisterEventTimeTimer("a", kg, window{10, 20}, 19)
	s.RegisterProcessingTimeTimer("a", kg, window{0, 10}, 1000)
	blob, err := s.SnapshotKeyGroup(kg)
	if err != nil {
		t.Fatal(err)
	}
	return kg, blob
}

func TestRestoreErrors(t *testing.T) {
	kg, blob := sampleTimers(t)

	for _, v := range []byte{0, 2} {
		err := fullService().RestoreKeyGroup(kg, append([]byte{v}, blob[1:]...))
		if !errors.Is(err, codec.ErrSnapshotVersion) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Errorf("version %d: %v", v, err)
		}
	}
	if err := fullService().RestoreKeyGroup((kg+1)%maxP, blob); err == nil {
		t.Error("blob of another key group: no error")
	}
	if err := NewService[string, window](keygroup.Range{Start: 0, End: 0}).RestoreKeyGroup(1, nil); err == nil {
		t.Error("key group outside the range: no error")
	}
	if _, err := NewService[string, window](keygroup.Range{Start: 0, End: 0}).SnapshotKeyGroup(1); err == nil {
		t.Error("snapshot of a key group outside the range: no error")
	}
	corrupt := func(what string, bad []byte) {
		t.Helper()
		s := fullService()
		err := s.RestoreKeyGroup(kg, bad)
		if !errors.Is(err, codec.ErrCorruptSnapshot) {
			t.Fatalf("%s: %v, want ErrCorruptSnapshot", what, err)
		}
		if n := s.NumEventTimeTimers() + s.NumProcessingTimeTimers(); n != 0 {
			t.Fatalf("%s: failed restore added %d timers", what, n)
		}
	}
	for n := 1; n < len(blob); n++ {
		corrupt(fmt.Sprintf("truncated to %d bytes", n), blob[:n])
	}
	corrupt("trailing byte", append(bytes.Clone(blob), 0))

	// A namespace the codec rejects: an error naming it, and nothing added
	// (the first timers decoded fine).
	s := NewServiceWithCodecs[string, window](keygroup.Range{Start: 0, End: maxP - 1}, nil, rejectLater{})
	if err := s.RestoreKeyGroup(kg, blob); err == nil || !strings.Contains(err.Error(), "namespace") || !strings.Contains(err.Error(), "too late") {
		t.Fatalf("bad namespace: %v", err)
	}
	if s.NumEventTimeTimers()+s.NumProcessingTimeTimers() != 0 {
		t.Fatal("failed restore added timers")
	}
}

// rejectLater is the JSON codec of window refusing windows starting at 10.
type rejectLater struct{}

func (rejectLater) Append(dst []byte, w window) ([]byte, error) {
	return codec.JSON[window]().Append(dst, w)
}

func (rejectLater) Decode(src []byte) (window, error) {
	w, err := codec.JSON[window]().Decode(src)
	if err == nil && w.Start == 10 {
		err = errors.New("too late")
	}
	return w, err
}

// upper stores keys upper-cased, to show the service's key codec is used.
type upper struct{}

func (upper) Append(dst []byte, v string) ([]byte, error) {
	return append(dst, strings.ToUpper(v)...), nil
}
func (upper) Decode(src []byte) (string, error) { return strings.ToLower(string(src)), nil }

func TestServiceCodecs(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 3}
	s := NewServiceWithCodecs[string, window](r, upper{}, nil)
	s.RegisterEventTimeTimer("key", 2, window{1, 2}, 7)
	blob, err := s.SnapshotKeyGroup(2)
	if err != nil || !bytes.Contains(blob, []byte("KEY")) || !bytes.Contains(blob, []byte(`{"Start":1,"End":2}`)) {
		t.Fatalf("blob % q, %v", blob, err)
	}
	c := NewService[string, window](r)
	c.SetKeyCodec(upper{})
	if err := c.RestoreKeyGroup(2, blob); err != nil {
		t.Fatal(err)
	}
	c.AdvanceWatermark(7, func(tm Timer[string, window]) {
		if tm != (Timer[string, window]{Timestamp: 7, Key: "key", KeyGroup: 2, Namespace: window{1, 2}}) {
			t.Fatalf("restored %+v", tm)
		}
	})
	if c.NumEventTimeTimers() != 0 {
		t.Fatal("restored timer did not fire")
	}
	c.SetKeyCodec(nil) // back to the default
	c.SetNamespaceCodec(nil)
	c.RegisterEventTimeTimer("key", 2, window{1, 2}, 7)
	if blob, _ := c.SnapshotKeyGroup(2); !bytes.Contains(blob, []byte("key")) {
		t.Fatalf("default key codec: % q", blob)
	}
}

// FuzzServiceRestoreKeyGroup: arbitrary blobs never panic, a failed restore
// adds nothing, and a successful one survives a snapshot and restore.
//
//	go test ./timer/ -run '^$' -fuzz FuzzServiceRestoreKeyGroup -fuzztime 20s
func FuzzServiceRestoreKeyGroup(f *testing.F) {
	kg, blob := sampleTimers(f)
	f.Add(blob)
	f.Add(blob[:len(blob)-3])
	f.Add([]byte(nil))
	f.Fuzz(func(t *testing.T, blob []byte) {
		s := fullService()
		if err := s.RestoreKeyGroup(kg, blob); err != nil {
			if n := s.NumEventTimeTimers() + s.NumProcessingTimeTimers(); n != 0 {
				t.Fatalf("failed restore (%v) added %d timers", err, n)
			}
			return
		}
		again, err := s.SnapshotKeyGroup(kg)
		if err != nil {
			t.Fatal(err)
		}
		c := fullService()
		if err := c.RestoreKeyGroup(kg, again); err != nil {
			t.Fatalf("restore of a re-snapshot: %v", err)
		}
		if !maps.Equal(dumpTimers(c), dumpTimers(s)) {
			t.Fatalf("re-snapshot differs: %v vs %v", dumpTimers(c), dumpTimers(s))
		}
	})
}
