package wal

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/weirproject/weir/agent"
)

// PruneCheckpoint implements agent.Checkpointed (W7): Prune, with
// the checkpoint id in the same record.
func (s *Store) PruneCheckpoint(checkpoint int64, upTo []agent.KeySeq) error {
	return s.write(recPruneCP, jsonPayload(pruneCP{Checkpoint: checkpoint, UpTo: upTo}), func(int64) {
		s.applyPrune(upTo)
		s.horizon = max(s.horizon, checkpoint)
	})
}

// PruneHorizon implements agent.Checkpointed (W7).
func (s *Store) PruneHorizon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.horizon
}

// marker is the recovery marker of one subtask's store.
type marker struct {
	Version int    `json:"v"`
	Dir     string `json:"dir"`
	Host    string `json:"host,omitempty"`
	StoreID string `json:"store"`
}

// Marker implements agent.Checkpointed (W7).
func (s *Store) Marker() ([]byte, error) {
	host, _ := os.Hostname()
	return json.Marshal(marker{Version: 1, Dir: s.dir, Host: host, StoreID: s.id})
}

// Restore implements agent.Checkpointed (W7): Open has read the
// logs; Restore checks that they are the ones the markers were taken with.
func (s *Store) Restore(markers [][]byte) error {
	for _, raw := range markers {
		var m marker
		if err := json.Unmarshal(raw, &m); err != nil || m.Version != 1 || m.StoreID == "" {
			return fmt.Errorf("wal: unreadable recovery marker %q (written by a newer weir, or by another store?)", raw)
		}
		if m.StoreID == s.id {
			continue
		}
		now := "holds store " + s.id
		if s.newID {
			now = "had no store (it is new, or was emptied) and now holds store " + s.id
		}
		return fmt.Errorf("wal: %w: the checkpoint's action states were recorded by store %s in directory %s on host %q; directory %s %s: the states of the checkpoint's unfinished actions are not there (restored on another host, or with a new directory? restore where the WAL is, or use the Kafka store to restore anywhere)",
			agent.ErrStatesMissing, m.StoreID, m.Dir, m.Host, s.dir, now)
	}
	return nil
}
