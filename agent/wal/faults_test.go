package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/internal/faultfs"
)

// walDir is the log directory of the fault tests: Open creates it, under a
// parent whose own entry is synced.
const walDir = "/agents/op"

func newWALFS(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll("/agents", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/agents"} {
		f, err := mem.OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return mem
}

func encode(t *testing.T, st *agent.ActionState) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// faultRun is one run of the fault test's workload: a store opened over
// fs (holding the states of the previous run), then Puts that overwrite
// two runs in turn (so that the small MaxLogBytes compacts the log, a
// rewrite and rename, during the run) and Close. It returns, per run id,
// the value last acknowledged and the value whose Put failed (which may or
// may not be durable), and whether an error surfaced.
func faultRun(t *testing.T, fs vfs.FS, acked, maybe map[string]string) (sawErr bool) {
	s, err := Open(walDir, all, Options{FS: fs, MaxLogBytes: 900})
	if err != nil {
		return true
	}
	for i := range 12 {
		st := state("k", int64(i%2), 0, 5, i >= 10)
		st.Calls[0].ArgsDigest = fmt.Sprint("v", i)
		if err := s.Put(st); err != nil {
			maybe[st.ID.String()] = encode(t, st)
			// W6: nothing is silently lost after a failure.
			if err := s.Put(state("after", 0, 0, 5, true)); err == nil {
				t.Fatalf("a Put after the failed one (%v) succeeded", err)
			}
			sawErr = true
			break
		}
		acked[st.ID.String()] = encode(t, st)
	}
	if err := s.Close(); err != nil {
		sawErr = true
	}
	return sawErr
}

// Failing each file-system operation of a store's life in turn (Open with
// its rewrite, group-committed Puts, a compaction, Close; N = 1, 2, ...
// until the run no longer reaches an N-th operation): the failure is an
// error to a caller, and a store reopened afterwards (on the file system
// as it is, and as a crash right then would leave it) has every state
// whose Put returned, unchanged, and of the state whose Put failed either
// the acknowledged value before it or the failed one.
func TestFaultsAtEveryStep(t *testing.T) {
	for n := 1; ; n++ {
		mem := newWALFS(t)
		acked, maybe := map[string]string{}, map[string]string{}
		if faultRun(t, mem, acked, maybe) {
			t.Fatal("the run without faults failed")
		}
		inj := &faultfs.FailNth{N: n}
		sawErr := faultRun(t, inj.Wrap(mem), acked, maybe)
		op, failed := inj.Failed()
		if !failed {
			if n < 20 {
				t.Fatalf("only %d operations in a store's life: the test does not exercise the log", n)
			}
			if sawErr {
				t.Fatal("the run failed without an injected fault")
			}
			return
		}
		what := fmt.Sprintf("failing operation %d (%v %s)", n, op.Kind, op.Path)
		if faultfs.Mutating(op) && !sawErr {
			t.Fatalf("%s: no caller saw an error", what)
		}
		for _, fs := range []struct {
			name string
			fs   vfs.FS
		}{{"as is", mem}, {"after a crash", mem.CrashClone(vfs.CrashCloneCfg{})}} {
			s, err := Open(walDir, all, Options{FS: fs.fs})
			if err != nil {
				t.Fatalf("%s, %s: reopen: %v", what, fs.name, err)
			}
			for _, seq := range []int64{0, 1} {
				id := state("k", seq, 0, 5, false).ID
				got, err := s.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				g := "<none>"
				if got != nil {
					g = encode(t, got)
				}
				if w, m := acked[id.String()], maybe[id.String()]; g != w && (m == "" || g != m) {
					t.Fatalf("%s, %s: run %s reopened as %s, want the acknowledged %s (or the failed %s)", what, fs.name, id, g, w, m)
				}
			}
			if got, _ := s.Get(state("after", 0, 0, 5, true).ID); got != nil {
				t.Fatalf("%s, %s: a Put that returned an error left its state", what, fs.name)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The failed operation's error reaches the caller of Put with the log
// named, and the injected cause kept.
func TestWriteErrorNamesTheLog(t *testing.T) {
	mem := newWALFS(t)
	// The second sync of the log's file (the first is Open's rewrite; the
	// file was created under a temporary name, which errorfs reports).
	fail := &faultfs.FailNth{N: 2, Match: func(op errorfs.Op) bool {
		return op.Kind == errorfs.OpFileSync && op.Path == walDir+"/kg-00000-00127.wal.tmp"
	}}
	s, err := Open(walDir, all, Options{FS: fail.Wrap(mem)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Put(state("a", 0, 0, 1, true))
	if !errors.Is(err, errorfs.ErrInjected) || !containsAll(err.Error(), "kg-00000-00127.wal", "check the disk") {
		t.Fatalf("Put: %v; want the injected sync error naming the log", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestOpenSyncsTheDirectoriesItCreates: a store opened in a directory
// several levels of which are new keeps its states through a machine crash
// (W1): Open syncs the entry of every directory it creates, not
// only the last one's. Found by the simulator (internal/sim, seed 29 with
// the agent branch).
func TestOpenSyncsTheDirectoriesItCreates(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("/new/agents/op", all, Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	st := state("k", 0, 0, 5, true)
	if err := s.Put(st); err != nil {
		t.Fatal(err)
	}
	// The crash comes before Close, as a machine's would.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open("/new/agents/op", all, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.newID || r.id != s.id {
		t.Fatalf("after the crash the directory has store id %s (new: %v), want %s: the directory was lost", r.id, r.newID, s.id)
	}
	got, err := r.Get(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || encode(t, got) != encode(t, st) {
		t.Fatalf("after the crash the state whose Put returned is %v", got)
	}
}
