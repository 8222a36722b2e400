package state

import (
	"testing"
)

// tryRegisterAll registers the fixture's states, returning the first error
// (a restored blob may hold entries the fixture's codecs cannot decode).
func tryRegisterAll(b *Backend[string]) error {
	for _, err := range []error{
		errOf(Value[string, int64](b, "val")),
		errOf(List[string, string](b, "lst")),
		errOf(Map[string, int32, float64](b, "mp")),
		errOf(NamespacedValue[string, win, []byte](b, "nval")),
		errOf(NamespacedList[string, uint8, bool](b, "nlst")),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func errOf[S any](_ S, err error) error { return err }

// FuzzRestoreKeyGroup feeds arbitrary blobs to RestoreKeyGroup, with the
// fixture's states registered before or after. It must never panic; a failed
// restore must change nothing; a successful one must survive a snapshot and
// a restore into a fresh backend unchanged (pending entries included).
//
//	go test ./state/ -run '^$' -fuzz FuzzRestoreKeyGroup -fuzztime 20s
func FuzzRestoreKeyGroup(f *testing.F) {
	_, kg, blob := sample(f)
	f.Add(blob, false)
	f.Add(blob, true)
	f.Add([]byte(nil), true)
	f.Add(blob[:len(blob)/2], false)
	f.Add(append([]byte{2}, blob[1:]...), false)
	b := full()
	set(b, "a")
	MustValue[string, string](b, "big").Update(string(make([]byte, 300)))
	MustList[string, string](b, "other").Add("unregistered")
	big, _ := b.SnapshotKeyGroup(kg)
	f.Add(big, false)

	f.Fuzz(func(t *testing.T, blob []byte, registerFirst bool) {
		b := full()
		if registerFirst {
			registerAll(b)
		}
		if err := b.RestoreKeyGroup(kg, blob); err != nil {
			if !registerFirst {
				registerAll(b)
			}
			if d := dump(b); len(d) != 0 {
				t.Fatalf("failed restore (%v) left entries %v", err, d)
			}
			if len(b.pending) != 0 {
				t.Fatalf("failed restore (%v) left pending entries", err)
			}
			return
		}
		if !registerFirst && tryRegisterAll(b) != nil {
			return // entries the fixture's codecs do not accept: an error, not a panic
		}
		again, err := b.SnapshotKeyGroup(kg)
		if err != nil {
			t.Fatalf("snapshot after a successful restore: %v", err)
		}
		c := full()
		registerAll(c)
		if err := c.RestoreKeyGroup(kg, again); err != nil {
			t.Fatalf("restore of a re-snapshot: %v", err)
		}
		diff(t, "re-snapshot", dump(c), dump(b))
		if len(c.pending) != len(b.pending) {
			t.Fatalf("pending states: %d after re-snapshot, %d before", len(c.pending), len(b.pending))
		}
	})
}
