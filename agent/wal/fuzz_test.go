package wal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/keygroup"
)

// dumpStore returns the live states of s, canonically.
func dumpStore(t *testing.T, s *Store) string {
	t.Helper()
	var out []string
	var live int64
	for k, r := range s.idx.All() {
		e := r.V
		b, err := json.Marshal(e.st)
		if err != nil {
			t.Fatal(err)
		}
		if string(e.st.ID.Key) != k || keyOf(&e.st.ID) != r.ID || agent.Position(r.Pos) != e.st.Pos {
			t.Fatalf("state %s filed under key %q, id %+v, position %+v", b, k, r.ID, r.Pos)
		}
		live += e.size
		out = append(out, string(b))
	}
	if live != s.live {
		t.Fatalf("live bytes %d, the entries add up to %d", s.live, live)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

func newReplayStore(rng keygroup.Range) *Store {
	return &Store{rng: rng, idx: actionindex.New[runKey, entry]()}
}

// FuzzReplay feeds arbitrary log bytes to the replay of a store's Open
// (W3). It must never panic, and what it keeps must survive a
// rewrite (the compaction and Open's fresh log): the live records
// replayed give the same states, byte for byte the same log again.
//
//	go test ./agent/wal -run '^$' -fuzz FuzzReplay -fuzztime 60s -parallel 1
func FuzzReplay(f *testing.F) {
	var log []byte
	for i, st := range []*agent.ActionState{state("a", 0, 0, 1, true), state("a", 1, 0, 1, false), state("b", 0, 2, 90, true)} {
		b, _ := json.Marshal(st)
		log = appendRecord(log, recPut, b)
		if i == 1 {
			d, _ := json.Marshal(discardRec{Key: []byte("a"), Pos: agent.Position{Seq: 1}})
			log = appendRecord(log, recDiscard, d)
		}
	}
	p, _ := json.Marshal([]agent.KeySeq{{Key: []byte("b"), Seq: 0}})
	log = appendRecord(log, recPrune, p)
	f.Add(log, uint8(0))
	f.Add(log[:len(log)-3], uint8(1))
	f.Add(appendRecord(nil, 9, []byte("{}")), uint8(0))
	f.Add(appendRecord(nil, recPut, []byte(`{"id":{"Key":null},"kg":-1}`)), uint8(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0, 1}, uint8(0)) // a 1 GiB length, torn
	f.Fuzz(func(t *testing.T, data []byte, half uint8) {
		rng := all
		if half%2 == 1 {
			rng = keygroup.Range{Start: 0, End: 63}
		}
		s := newReplayStore(rng)
		if err := s.loadFrom("fuzz", bytes.NewReader(data)); err != nil {
			return
		}
		want := dumpStore(t, s)
		buf, err := s.liveRecords()
		if err != nil {
			t.Fatal(err)
		}
		s2 := newReplayStore(rng)
		if err := s2.loadFrom("rewritten", bytes.NewReader(buf)); err != nil {
			t.Fatalf("replaying the rewritten log: %v", err)
		}
		if got := dumpStore(t, s2); got != want {
			t.Fatalf("rewrite changed the states:\n%s\nwant\n%s", got, want)
		}
		buf2, err := s2.liveRecords()
		if err != nil || !bytes.Equal(buf, buf2) {
			t.Fatalf("the rewritten log is not stable (%v)", err)
		}
	})
}
