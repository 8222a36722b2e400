// Package storetest is the conformance suite of agent.ActionStateStore
// implementations: agent.MemoryStore, the embedded WAL (agent/wal) and the
// Kafka store (agent/kafkastore) all run it.
//
// # What Run checks
//
//	C1. Get returns what Put recorded (as a JSON round trip), nil for an
//	    unknown run; a second Put of a run replaces the first.
//	C2. Latest returns the greatest position recorded for a key, and
//	    ok false for a key without states.
//	C3. DiscardFrom removes exactly the key's states at or after the
//	    position; other keys keep theirs.
//	C4. Prune removes exactly the named keys' states up to the sequence
//	    numbers; other keys keep theirs.
//	C5. Concurrent Puts (the operator's action goroutines) all land.
//	C6. A store that is an agent.Queuer shows a state queued by PutQueued
//	    at once (Get, Latest), before its Wait; a later state of the same
//	    run queued after it replaces it; Wait returns nil, also when called
//	    again.
package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/weirproject/weir/agent"
)

// State returns a state of run (key, seq, event, action) in key group kg,
// with a recorded call and an output event, so that round trips cover the
// nested fields.
func State(key string, seq, event int64, action, kg int, completed bool) *agent.ActionState {
	return &agent.ActionState{
		ID: agent.RunID{Key: []byte(key), Seq: seq, EventID: event, EventType: "input",
			Action: fmt.Sprintf("act%d", action)},
		Pos:      agent.Position{Seq: seq, EventID: event, Action: action},
		KeyGroup: kg, Completed: completed,
		Calls: []agent.CallResult{{Name: "call", ArgsDigest: "d",
			Result: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}},
		Sent: []agent.Event{agent.OutputEvent(fmt.Sprintf("out-%s-%d", key, seq))},
	}
}

// Equal reports whether got is want after a JSON round trip (what a
// durable store returns); nil equals only nil.
func Equal(got, want *agent.ActionState) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return reflect.DeepEqual(roundTrip(got), roundTrip(want))
}

func roundTrip(st *agent.ActionState) agent.ActionState {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	var c agent.ActionState
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}

// Run checks the store open returns (a new, empty store serving key
// groups 0 and 1 at least) against the contract above.
func Run(t *testing.T, open func(t *testing.T) agent.ActionStateStore) {
	t.Helper()
	s := open(t)
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(st *agent.ActionState, want *agent.ActionState) {
		t.Helper()
		got, err := s.Get(st.ID)
		must(err)
		if !Equal(got, want) {
			t.Fatalf("Get(%s/%d/%d/%s) = %+v, want %+v", st.ID.Key, st.Pos.Seq, st.Pos.EventID, st.ID.Action, got, want)
		}
	}
	latest := func(key string, want agent.Position, wantOK bool) {
		t.Helper()
		got, ok := s.Latest([]byte(key))
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("Latest(%s) = %v %v, want %v %v", key, got, ok, want, wantOK)
		}
	}

	// C1. Round trip and replacement.
	a0 := State("a", 0, 0, 0, 0, false)
	check(a0, nil)
	latest("a", agent.Position{}, false)
	must(s.Put(a0))
	check(a0, a0)
	a0done := State("a", 0, 0, 0, 0, true)
	must(s.Put(a0done))
	check(a0, a0done)

	// C2. Latest.
	a1 := State("a", 1, 0, 0, 0, true)
	a1b := State("a", 1, 2, 1, 0, true)
	b0 := State("b", 0, 0, 0, 1, true)
	b3 := State("b", 3, 1, 0, 1, true)
	for _, st := range []*agent.ActionState{a1, a1b, b0, b3} {
		must(s.Put(st))
	}
	latest("a", a1b.Pos, true)
	latest("b", b3.Pos, true)

	// C3. DiscardFrom: a's states from (1, 1, 0) on; b keeps its own.
	must(s.DiscardFrom([]byte("a"), agent.Position{Seq: 1, EventID: 1}))
	check(a1, a1)
	check(a1b, nil)
	check(b3, b3)
	latest("a", a1.Pos, true)

	// C4. Prune: a up to seq 0; b untouched.
	must(s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 0}}))
	check(a0, nil)
	check(a1, a1)
	check(b0, b0)
	must(s.Prune([]agent.KeySeq{{Key: []byte("a"), Seq: 5}}))
	latest("a", agent.Position{}, false)
	latest("b", b3.Pos, true)

	// C5. Concurrent Puts.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	var sts []*agent.ActionState
	for i := range 32 {
		st := State(fmt.Sprintf("c%d", i%4), int64(i), 0, 0, i%2, true)
		sts = append(sts, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(st); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, st := range sts {
		check(st, st)
	}

	// C6. Queued writes.
	if q, ok := s.(agent.Queuer); ok {
		d0 := State("d", 0, 0, 0, 1, false)
		p0, err := q.PutQueued(d0)
		must(err)
		check(d0, d0)
		latest("d", d0.Pos, true)
		d0done := State("d", 0, 0, 0, 1, true)
		p1, err := q.PutQueued(d0done)
		must(err)
		check(d0, d0done)
		must(p1.Wait())
		must(p0.Wait())
		must(p1.Wait())
		check(d0, d0done)
		latest("d", d0.Pos, true)
	}
}
