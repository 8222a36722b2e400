package durability

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/keygroup"
)

// speedWriters is how many goroutines put at once in the group-commit
// measurement: the actions of one subtask finishing together.
const speedWriters = 64

// opener opens the store measured, over every key group: fresh the first
// time, then as a restore does (the WAL reads its logs; the Kafka store
// reads its topic from the recovery marker taken when it was new). serial
// opens it flushing every write on its own, the baseline group commit is
// measured against: one Put at a time, each with its own fsync (WAL) or
// its own produce round (Kafka store, as Flink Agents flushes the producer
// after every write).
type opener func(serial bool) (agent.ActionStateStore, error)

func openerFor(store, dir string, brokers []string) (opener, error) {
	all := keygroup.Range{Start: 0, End: 127}
	switch store {
	case "wal":
		return func(serial bool) (agent.ActionStateStore, error) {
			s, err := wal.Open(filepath.Join(dir, "wal"), all, wal.Options{})
			if err != nil || !serial {
				return s, err
			}
			return &onePut{ActionStateStore: s}, nil
		}, nil
	case "kafka":
		var marker []byte
		return func(serial bool) (agent.ActionStateStore, error) {
			opts := kafkastore.Options{Brokers: brokers, Topic: "speed", Partitions: 1,
				Logger: slog.New(slog.DiscardHandler)}
			s, err := kafkastore.Open(opts, all, 128)
			if err != nil {
				return nil, err
			}
			if marker == nil {
				marker, err = s.Marker()
			} else {
				err = s.Restore([][]byte{marker})
			}
			if err != nil {
				s.Close()
				return nil, err
			}
			if serial {
				return &onePut{ActionStateStore: s}, nil
			}
			return s, nil
		}, nil
	}
	return nil, fmt.Errorf("durability: store %q: want wal or kafka", store)
}

// onePut lets one Put run at a time: no write shares another's flush.
type onePut struct {
	agent.ActionStateStore
	mu sync.Mutex
}

func (s *onePut) Put(st *agent.ActionState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ActionStateStore.Put(st)
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

// Puts of each speed measurement: with group commit, and flushing every
// write (the latter much slower, the WAL's most).
const (
	groupPuts       = 60000
	serialPutsKafka = 6000
	serialPutsWAL   = 1000
)

// measureStore fills r's speed fields on a store of its own (and, for the
// Kafka store, a broker of its own, so that what the trials left on theirs
// does not weigh): puts per second from speedWriters goroutines with group
// commit and with a flush per write; then, after a reopen, the states
// rebuilt per second (the open) and the completed actions found per
// second (a Get of each: what a restored operator does for every input it
// replays). The states are built before each clock starts: what is
// measured is the store.
func measureStore(store, dir string, r *Result) error {
	var brokers []string
	if store == "kafka" {
		b, err := broker.Start(broker.Options{})
		if err != nil {
			return err
		}
		defer b.Close()
		brokers = b.Addrs()
	}
	open, err := openerFor(store, dir, brokers)
	if err != nil {
		return err
	}
	serialPuts := serialPutsKafka
	if store == "wal" {
		serialPuts = serialPutsWAL
	}
	next := 0
	rate := func(serial bool, puts int) (float64, error) {
		states := make([]*agent.ActionState, puts)
		for i := range states {
			states[i] = completedState(next + i)
		}
		next += puts
		s, err := open(serial)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		var wg sync.WaitGroup
		var firstErr error
		var errMu sync.Mutex
		var taken atomic.Int64
		began := time.Now()
		for range speedWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(taken.Add(1)) - 1
					if i >= len(states) {
						return
					}
					if err := s.Put(states[i]); err != nil {
						errMu.Lock()
						firstErr = err
						errMu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(len(states)) / time.Since(began).Seconds(), firstErr
	}
	if r.DurableCallsPerSec, err = rate(false, groupPuts); err != nil {
		return err
	}
	if r.FlushPerWriteCallsPerSec, err = rate(true, serialPuts); err != nil {
		return err
	}
	total := next
	ids := make([]agent.RunID, total)
	for i := range ids {
		ids[i] = completedState(i).ID
	}
	began := time.Now()
	s, err := open(false)
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
