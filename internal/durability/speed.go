package durability

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/keygroup"
)

// speedWriters is how many goroutines put at once in the group-commit
// measurement: the actions of one subtask finishing together.
const speedWriters = 64

// opener opens (or reopens) the store measured, over every key group.
type opener func() (agent.ActionStateStore, error)

func openerFor(store, dir string) (opener, error) {
	all := keygroup.Range{Start: 0, End: 127}
	switch store {
	case "wal":
		return func() (agent.ActionStateStore, error) { return wal.Open(dir, all, wal.Options{}) }, nil
	}
	return nil, fmt.Errorf("durability: store %q: want wal", store)
}

// completedState is the record of a completed action with one durable
// call, as the operator writes it.
func completedState(i int) *agent.ActionState {
	key := "key-" + strconv.Itoa(i%512)
	return &agent.ActionState{
		ID:        agent.RunID{Key: []byte(key), Seq: int64(i), EventType: agent.TypeInput, Action: "effect"},
		Pos:       agent.Position{Seq: int64(i)},
		KeyGroup:  i % 128,
		Completed: true,
		Calls:     []agent.CallResult{{Name: "effect", ArgsDigest: "0123456789abcdef", Result: json.RawMessage(`"done-` + strconv.Itoa(i) + `"`)}},
		Sent:      []agent.Event{agent.OutputEvent(strconv.Itoa(i) + " done")},
	}
}

// measureStore fills r's speed fields: puts per second from speedWriters
// goroutines (group commit) and from one (a flush per write), each for
// about budget; then, after a reopen, the states rebuilt per second (the
// open) and the completed actions found per second (a Get of each: what a
// restored operator does for every input it replays).
func measureStore(store, dir string, r *Result) error {
	const budget = 800 * time.Millisecond
	open, err := openerFor(store, dir)
	if err != nil {
		return err
	}
	s, err := open()
	if err != nil {
		return err
	}
	next := 0
	var mu sync.Mutex
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		next++
		return next - 1
	}
	rate := func(writers int) (float64, error) {
		var wg sync.WaitGroup
		var firstErr error
		var errMu sync.Mutex
		n := 0
		began := time.Now()
		deadline := began.Add(budget)
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if err := s.Put(completedState(take())); err != nil {
						errMu.Lock()
						firstErr = err
						errMu.Unlock()
						return
					}
					errMu.Lock()
					n++
					errMu.Unlock()
				}
			}()
		}
		wg.Wait()
		return float64(n) / time.Since(began).Seconds(), firstErr
	}
	if r.DurableCallsPerSec, err = rate(speedWriters); err != nil {
		s.Close()
		return err
	}
	if r.FlushPerWriteCallsPerSec, err = rate(1); err != nil {
		s.Close()
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	total := next
	ids := make([]agent.RunID, total)
	for i := range ids {
		ids[i] = completedState(i).ID
	}
	began := time.Now()
	s, err = open()
	if err != nil {
		return err
	}
	defer s.Close()
	r.RebuildStatesPerSec = float64(total) / time.Since(began).Seconds()
	began = time.Now()
	for i, id := range ids {
		st, err := s.Get(id)
		if err != nil {
			return err
		}
		if st == nil || !st.Completed {
			return fmt.Errorf("durability: store %s lost the state of action %d of %d after a reopen", store, i, total)
		}
	}
	r.ReplayActionsPerSec = float64(total) / time.Since(began).Seconds()
	return nil
}
