package sim

import (
	"context"
	"testing"

	"github.com/weirproject/weir"
)

// Planted bugs: sinks that break the two-phase contract. The simulator must
// find each within the stated number of seeds, or it cannot fail and
// proves nothing.

// commitEarly commits a transaction at its pre-commit, before the
// checkpoint that covers it completes: a failure before the checkpoint
// completes then replays records already committed.
type commitEarly struct{ *sink }

func (m commitEarly) PreCommit(t Txn) error {
	if err := m.st.prepare(t); err != nil {
		return err
	}
	if err := m.st.commit(t); err != nil {
		return err
	}
	return m.sink.PreCommit(t)
}

// dropLastBeforeBarrier loses the last record written before each
// checkpoint barrier (and before the end of input).
type dropLastBeforeBarrier struct{ *sink }

func (m dropLastBeforeBarrier) PreCommit(t Txn) error {
	m.st.dropLast(t)
	return m.sink.PreCommit(t)
}

func TestPlantedBugsAreFound(t *testing.T) {
	for _, m := range []struct {
		name   string
		within uint64 // seeds 1..within
		wrap   func(*sink) weir.TwoPhaseCommitter[string, Txn]
	}{
		{"commit before the checkpoint completes", 40, func(k *sink) weir.TwoPhaseCommitter[string, Txn] { return commitEarly{k} }},
		{"drop the last record before a barrier", 5, func(k *sink) weir.TwoPhaseCommitter[string, Txn] { return dropLastBeforeBarrier{k} }},
	} {
		found := uint64(0)
		for seed := uint64(1); seed <= m.within && found == 0; seed++ {
			res, err := Run(context.Background(), seed, Options{wrap: m.wrap, SkipKafka: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != nil {
				found = seed
				t.Logf("%s: found by seed %d (%s; faults %s): %v %q", m.name, seed, res.Shape, res.Schedule(), res.Failure, res.Failure.Records)
			}
		}
		if found == 0 {
			t.Errorf("%s: not found within %d seeds", m.name, m.within)
		}
	}
}
