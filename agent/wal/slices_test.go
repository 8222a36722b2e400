package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// The keyed tasks of a clustered job (package cluster) that run on one
// machine are slices of one job (runtime.Config.Slice), each a job of
// parallelism 1 with the same operator uid: Factory gives each its own log
// in the operator's directory, of its slice's key groups, so that two
// tasks in one process never write one file and a task reopened (after a
// move to another process on the machine) finds its own states only,
// with its own prune horizon.
func TestFactorySlicesShareADirectory(t *testing.T) {
	dir := t.TempDir()
	open := func(q int) *Store {
		ctx := &runtime.Context{UID: "agent", Parallelism: 1, MaxParallelism: 128, KeyGroups: all, Slice: q, Slices: 4}
		st, err := Factory(dir, Options{NoSync: true})(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*Store)
	}
	stores := make([]*Store, 4)
	for q := range stores {
		stores[q] = open(q)
		kg := keygroup.RangeFor(128, 4, q).Start
		for seq := range int64(2) {
			if err := stores[q].Put(state(fmt.Sprintf("s%d", q), seq, 0, kg, true)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := stores[0].Put(state("other", 0, 0, 127, true)); err == nil {
		t.Fatal("slice 0 accepted a state of key group 127, which is slice 3's")
	}
	if err := stores[2].PruneCheckpoint(40, []agent.KeySeq{{Key: []byte("s2"), Seq: 0}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "agent", "kg-*.wal"))
	var names []string
	for _, l := range logs {
		names = append(names, filepath.Base(l))
	}
	want := []string{"kg-00000-00031.wal", "kg-00032-00063.wal", "kg-00064-00095.wal", "kg-00096-00127.wal"}
	if !slices.Equal(names, want) {
		t.Fatalf("logs %v, want one per slice %v", names, want)
	}
	for q := range 4 {
		s := open(q)
		var keys []string
		s.mu.Lock()
		runs := map[string]int{}
		for k := range s.idx.All() {
			runs[k]++
		}
		for k, n := range runs {
			keys = append(keys, fmt.Sprintf("%s:%d", k, n))
		}
		s.mu.Unlock()
		wantKeys := []string{fmt.Sprintf("s%d:2", q)}
		if q == 2 {
			wantKeys = []string{"s2:1"}
		}
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("slice %d reopened with states %v, want %v", q, keys, wantKeys)
		}
		if h, wantH := s.PruneHorizon(), map[int]int64{2: 40}[q]; h != wantH {
			t.Errorf("slice %d: prune horizon %d, want %d", q, h, wantH)
		}
		s.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "kg-00000-00127.wal")); err == nil {
		t.Fatal("a log of all key groups was written")
	}
}
