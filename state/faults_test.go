package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirproject/weir/internal/faultfs"
	"github.com/weirproject/weir/keygroup"
)

// A native checkpoint of the Pebble backend (its synchronous part, Pebble's
// checkpoint into a staging directory) with each of its file-system
// operations failing in turn (N = 1, 2, ... until the checkpoint no longer
// reaches an N-th one): the error reaches the caller, no staging directory
// is left behind, the database keeps working, and the next checkpoint
// restores exactly the state.
func TestNativeCheckpointFailsCleanlyAtEveryStep(t *testing.T) {
	rng := keygroup.Range{Start: 0, End: 127}
	var cur atomic.Pointer[faultfs.FailNth]
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if f := cur.Load(); f != nil {
			return f.MaybeError(op)
		}
		return nil
	}))
	dir := filepath.Join(t.TempDir(), "db")
	b, err := Open[string](Options{Kind: BackendPebble, Dir: dir, FS: fs, MemTableSize: 1 << 20}, rng)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := MustValue[string, string](b, "v")
	put := func(from, to int, round int) {
		for i := from; i < to; i++ {
			k := fmt.Sprint("key-", i)
			b.SetCurrentKey(k, keygroup.Assign(keygroup.HashString(k), 128))
			v.Update(fmt.Sprintf("value-%d-%d", i, round))
		}
	}
	put(0, 200, 0)
	if err := b.Flush(); err != nil { // some SSTs, and a memtable after them
		t.Fatal(err)
	}
	put(100, 300, 1)
	n := 1
	for ; ; n++ {
		id := int64(n)
		stage := fmt.Sprintf("%s.chk-%d", dir, id)
		f := &faultfs.FailNth{N: n, Match: func(op errorfs.Op) bool {
			return faultfs.Mutating(op) && strings.HasPrefix(op.Path, stage)
		}}
		cur.Store(f)
		got, err := b.CheckpointNative(id)
		cur.Store(nil)
		op, failed := f.Failed()
		if !failed {
			if err != nil {
				t.Fatalf("checkpoint %d without a fault: %v", id, err)
			}
			os.RemoveAll(got)
			break
		}
		what := fmt.Sprintf("failing operation %d (%v %s)", n, op.Kind, op.Path)
		if err == nil {
			t.Fatalf("%s: CheckpointNative returned no error", what)
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("%s: %v, not the injected error", what, err)
		}
		if _, err := os.Stat(stage); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the staging directory %s is left (%v)", what, stage, err)
		}
		put(250, 300, n+1) // the database keeps working
	}
	if n < 5 {
		t.Fatalf("a native checkpoint took only %d file-system operations", n-1)
	}
	t.Logf("failed each of %d operations of a native checkpoint", n-1)
	stage, err := b.CheckpointNative(int64(n + 1))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open[string](Options{Kind: BackendPebble, Dir: filepath.Join(t.TempDir(), "db2")}, rng)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := os.Rename(stage, c.NativeRestoreDir(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RestoreNative([]NativePart{{Dir: c.NativeRestoreDir(0), Start: 0, End: 127}}); err != nil {
		t.Fatal(err)
	}
	cv := MustValue[string, string](c, "v")
	if got := cv.tab().numKeys(); got != 300 {
		t.Fatalf("restored %d keys, want 300", got)
	}
	for i := range 300 {
		k := fmt.Sprint("key-", i)
		kg := keygroup.Assign(keygroup.HashString(k), 128)
		b.SetCurrentKey(k, kg)
		c.SetCurrentKey(k, kg)
		w, _ := v.Value()
		if got, ok := cv.Value(); !ok || got != w {
			t.Fatalf("%s restored as %q (%v), want %q", k, got, ok, w)
		}
	}
}
