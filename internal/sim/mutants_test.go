package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

// hangAtPreCommit blocks every pre-commit until release is closed.
type hangAtPreCommit struct {
	*sink
	release <-chan struct{}
}

func (m hangAtPreCommit) PreCommit(t Txn) error {
	<-m.release
	return m.sink.PreCommit(t)
}

// An attempt that does not finish in time fails S4 naming where the job's
// goroutines waited when its time ran out, taken before it was cancelled.
func TestStalledAttemptNamesWhereItWaits(t *testing.T) {
	// Released after the time-out: a cancelled job still waits for the
	// pre-commit it is in.
	release := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(release) })
	res, err := Run(context.Background(), 1, Options{SkipKafka: true, SkipAgent: true, timeout: 2 * time.Second,
		wrap: func(k *sink) weir.TwoPhaseCommitter[string, Txn] { return hangAtPreCommit{k, release} }})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Failure
	if f == nil || f.Invariant != InvCompletes || !strings.Contains(f.Detail, "did not finish within 2s") {
		t.Fatalf("got %v, want S4: did not finish within 2s", f)
	}
	if !slices.ContainsFunc(f.Records, func(r string) bool { return strings.Contains(r, "hangAtPreCommit.PreCommit") }) {
		t.Fatalf("the failure's records do not name the pre-commit the job waits in: %q", f.Records)
	}
}
