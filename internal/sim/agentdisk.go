package sim

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/keygroup"
)

// checkDiskWALLocked checks S17 on the WAL's disk as attempt n finds it
// (after a process or machine crash), before the attempt opens it: the
// simulator opens the WAL itself (agent/wal's Open, every key group, on a
// crash clone of the disk, so that the attempt's disk stays as it is) and
// every run whose state the store reported durable, and that no discard
// or prune may have removed since, must be there. Unlike the job's own
// Gets, which look up only the runs a restore happens to run again, this
// looks at every state, whatever the timing: a WAL that loses a record
// when it rebuilds its states from a log file (the planted bug
// wal.restore-skips-last-record) fails here in every seed where that
// record is a state the store reported durable.
func (w *agentWorld) checkDiskWALLocked(n int) {
	if w.mu.failure != nil || len(w.mu.durable) == 0 {
		return
	}
	disk := w.mu.disk.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(uint64(n), 0))})
	s, err := wal.Open(filepath.Join(walDir, "agent"), keygroup.Range{Start: 0, End: 127}, wal.Options{FS: disk, NoSync: true})
	if err != nil {
		w.mu.failure = &Failure{Invariant: InvAgentStore, Detail: fmt.Sprintf("before attempt %d: the simulator could not open the WAL on disk: %v", n, err)}
		return
	}
	defer s.Close()
	var missing []string
	input := int64(-1)
	for _, ks := range w.mu.durable {
		st, err := s.Get(ks.id)
		if err == nil && st != nil {
			continue
		}
		missing = append(missing, fmt.Sprintf("run %s of key %s's input %d (err %v)", ks.id.Action, ks.key, ks.seq, err))
		if ids := w.mu.inputs[ks.key]; input < 0 && ks.seq >= 0 && ks.seq < int64(len(ids)) {
			input = ids[ks.seq]
		}
	}
	if len(missing) == 0 {
		return
	}
	slices.Sort(missing)
	w.mu.failure = &Failure{Invariant: InvAgentStore,
		Detail:  fmt.Sprintf("before attempt %d: the WAL on disk, opened as the attempt will open it, lacks %d states the store reported durable (no discard or prune of their keys since)", n, len(missing)),
		Records: missing[:min(4, len(missing))]}
	w.mu.failureInput = input
}
