package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/keygroup"
)

var all = keygroup.Range{Start: 0, End: 127}

func state(key string, seq, ev int64, kg int, completed bool) *agent.ActionState {
	return &agent.ActionState{
		ID:       agent.RunID{Key: []byte(key), Seq: seq, EventID: ev, EventType: "input", Action: "a"},
		Pos:      agent.Position{Seq: seq, EventID: ev},
		KeyGroup: kg, Completed: completed,
		Calls: []agent.CallResult{{Name: "call", ArgsDigest: "d", Result: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}},
		Sent:  []agent.Event{agent.OutputEvent(fmt.Sprintf("out-%s-%d", key, seq))},
	}
}

func mustOpen(t *testing.T, dir string, rng keygroup.Range) *Store {
	t.Helper()
	s, err := Open(dir, rng, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s *Store, st *agent.ActionState) *agent.ActionState {
	t.Helper()
	got, err := s.Get(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPutGetReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, all)
	a0, a1, a2, b0 := state("a", 0, 0, 1, true), state("a", 1, 0, 1, false), state("a", 2, 3, 1, true), state("b", 0, 0, 2, true)
	for _, st := range []*agent.ActionState{a0, a1, a2, b0} {
		if err := s.Put(st); err != nil {
			t.Fatal(err)
		}
	}
	if pos, ok := s.Latest([]byte("a")); !ok || pos != a2.Pos {
		t.Fatalf("latest %v %v", pos, ok)
	}
	if err := s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DiscardFrom([]byte("a"), agent.Position{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(a0); err == nil {
		t.Fatal("Put after Close succeeded")
	}
	s = mustOpen(t, dir, all)
	defer s.Close()
	if get(t, s, a0) != nil || get(t, s, a2) != nil {
		t.Fatal("pruned or discarded state came back")
	}
	got := get(t, s, a1)
	if got == nil || got.Completed || string(got.Calls[0].Result) != `{"seq":1}` || got.Pos != a1.Pos {
		t.Fatalf("a1 after reopen: %+v", got)
	}
	if b := get(t, s, b0); b == nil || !b.Completed || len(b.Sent) != 1 {
		t.Fatalf("b0 after reopen: %+v", b)
	}
	if out, err := agent.ValueAs[string](get(t, s, b0).Sent[0]); err != nil || out != "out-b-0" {
		t.Fatalf("sent event: %q %v", out, err)
	}
}

// TestGroupCommit: writers that queue while a batch is being synced share
// the next fsync.
func TestGroupCommit(t *testing.T) {
	s := mustOpen(t, t.TempDir(), all)
	defer s.Close()
	const n = 50
	release := make(chan struct{})
	var once sync.Once
	s.beforeSync = func() { once.Do(func() { <-release }) }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Put(state(fmt.Sprint("k", i), 0, 0, 5, true))
		}()
	}
	// Wait until every writer has queued its record, then let the first
	// batch's sync go on.
	for {
		s.mu.Lock()
		w := s.writes
		s.mu.Unlock()
		if w == n {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	writes, syncs, states, _ := s.Stats()
	if writes != n || states != n || syncs > 2 {
		t.Fatalf("%d writes, %d syncs, %d states; want %d writes in at most 2 syncs", writes, syncs, states, n)
	}
}

// TestTornTail: a record cut short by a crash ends the log; the records
// before it survive.
func TestTornTail(t *testing.T) {
	for _, damage := range []string{"truncate", "flip", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, all)
			first, second := state("a", 0, 0, 1, true), state("a", 1, 0, 1, true)
			s.Put(first)
			s.Put(second)
			path := s.path
			s.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			one := len(b) / 2 // both records have the same size
			switch damage {
			case "truncate":
				b = b[:len(b)-3]
			case "flip":
				b[one+headerLen+5] ^= 0xff
			case "garbage":
				b = append(b, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, dir, all)
			defer s.Close()
			if get(t, s, first) == nil {
				t.Fatal("the intact record was lost")
			}
			if (get(t, s, second) != nil) != (damage == "garbage") {
				t.Fatalf("second record present = %v", get(t, s, second) != nil)
			}
			// The log was rewritten: new records follow the intact ones.
			third := state("a", 2, 0, 1, true)
			if err := s.Put(third); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s = mustOpen(t, dir, all)
			defer s.Close()
			if get(t, s, third) == nil || get(t, s, first) == nil {
				t.Fatal("records after recovery lost")
			}
		})
	}
}

// TestKeyGroupsAcrossParallelism: logs written by two subtasks are merged
// by one subtask owning both ranges, and split again by subtasks owning
// parts.
func TestKeyGroupsAcrossParallelism(t *testing.T) {
	dir := t.TempDir()
	lo := mustOpen(t, dir, keygroup.Range{Start: 0, End: 63})
	hi := mustOpen(t, dir, keygroup.Range{Start: 64, End: 127})
	lo.Put(state("x", 0, 0, 10, true))
	hi.Put(state("y", 0, 0, 100, true))
	lo.Close()
	hi.Close()

	one := mustOpen(t, dir, all)
	if get(t, one, state("x", 0, 0, 10, true)) == nil || get(t, one, state("y", 0, 0, 100, true)) == nil {
		t.Fatal("merge lost a state")
	}
	one.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(names) != 1 || filepath.Base(names[0]) != "kg-00000-00127.wal" {
		t.Fatalf("after merging: %v", names)
	}

	part := mustOpen(t, dir, keygroup.Range{Start: 0, End: 31})
	defer part.Close()
	if get(t, part, state("x", 0, 0, 10, true)) == nil || get(t, part, state("y", 0, 0, 100, true)) != nil {
		t.Fatal("a subtask sees states of key groups it does not own, or misses its own")
	}
	names, _ = filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(names) != 2 {
		t.Fatalf("the wider log must stay for the other subtasks: %v", names)
	}
}

// TestCompaction: overwriting the same states keeps the log bounded.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, all, Options{MaxLogBytes: 4096, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := s.Put(state(fmt.Sprint("k", i%5), 0, 0, 1, i%2 == 0)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, states, size := s.Stats()
	if states != 5 || size > 3*4096 {
		t.Fatalf("%d states in a log of %d bytes", states, size)
	}
	s.Close()
	s, _ = Open(dir, all, Options{})
	defer s.Close()
	if _, _, states, _ := s.Stats(); states != 5 {
		t.Fatalf("%d states after reopening", states)
	}
}

// TestWriteErrorsAreSticky: once a write fails, every later write fails
// and says which file.
func TestWriteErrorsAreSticky(t *testing.T) {
	s := mustOpen(t, t.TempDir(), all)
	s.f.Close() // the disk went away
	err1 := s.Put(state("a", 0, 0, 1, true))
	err2 := s.Put(state("b", 0, 0, 1, true))
	if err1 == nil || err2 == nil || err2.Error() != err1.Error() {
		t.Fatalf("errors %v / %v", err1, err2)
	}
	s.Close()
}

// TestHorizonAndStoreID: the prune horizon and the store id survive
// reopening (each Open rewrites the log) and a change of parallelism; a
// marker of the same directory restores, one of another fails with
// agent.ErrStatesMissing.
func TestHorizonAndStoreID(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, keygroup.Range{Start: 0, End: 63})
	if err := s.Put(state("k", 0, 0, 1, true)); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneCheckpoint(5, []agent.KeySeq{{Key: []byte("k"), Seq: 0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneCheckpoint(3, nil); err != nil { // an older horizon does not lower it
		t.Fatal(err)
	}
	m, err := s.Marker()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 {
		s = mustOpen(t, dir, all)
		if h := s.PruneHorizon(); h != 5 {
			t.Fatalf("horizon after reopening: %d, want 5", h)
		}
		if err := s.Restore([][]byte{m}); err != nil {
			t.Fatalf("restore with the directory's own marker: %v", err)
		}
		s.Close()
	}
	other := mustOpen(t, t.TempDir(), all)
	defer other.Close()
	if err := other.Restore([][]byte{m}); !errors.Is(err, agent.ErrStatesMissing) {
		t.Fatalf("restore with another directory's marker: %v, want agent.ErrStatesMissing", err)
	}
	if h := other.PruneHorizon(); h != 0 {
		t.Fatalf("horizon of a new directory: %d", h)
	}
}

// TestPutQueued: a state queued by PutQueued is in memory at once and on
// disk once its Wait returns; a write queued behind a batch being synced
// waits for that batch too; a write error reaches Wait.
func TestPutQueued(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, all)
	release := make(chan struct{})
	var once sync.Once
	s.beforeSync = func() { once.Do(func() { <-release }) }
	first, err := s.PutQueued(state("a", 0, 0, 1, false))
	if err != nil {
		t.Fatal(err)
	}
	// The first batch is held before its sync; wait until the writer
	// has taken it, then queue the run's completed state behind it.
	for {
		s.mu.Lock()
		taken := s.w.BatchesLocked() > 0
		s.mu.Unlock()
		if taken {
			break
		}
		runtime.Gosched()
	}
	done := state("a", 0, 0, 1, true)
	second, err := s.PutQueued(done)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, done); got == nil || !got.Completed {
		t.Fatalf("queued state not in memory: %+v", got)
	}
	waited := make(chan error, 1)
	go func() { waited <- second.Wait() }()
	close(release)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, syncs, _, _ := s.Stats(); syncs != 2 {
		t.Fatalf("%d syncs, want 2 (the held batch, then the second)", syncs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, all)
	if got := get(t, s, done); got == nil || !got.Completed {
		t.Fatalf("after reopen: %+v, want the completed state", got)
	}
	s.f.Close() // the disk went away
	p, err := s.PutQueued(state("b", 0, 0, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err == nil {
		t.Fatal("Wait of a write that failed returned nil")
	}
	if _, err := s.PutQueued(state("c", 0, 0, 1, true)); err == nil {
		t.Fatal("PutQueued after a failed write succeeded")
	}
	s.Close()
}
