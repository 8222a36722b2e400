package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// InvRestore is S19: the keyed state a restored job holds is the state of
// the checkpoint it restored.
const InvRestore = "S19 the state after a restore equals the state at its checkpoint"

// restoreCheckStream is the stream RestoreCheck is drawn from, after every
// other draw of the seed, so no other seed's job changes.
const restoreCheckStream = 0x5e19

// generateRestoreCheck draws Spec.RestoreCheck: half the seeds.
func generateRestoreCheck(s *Spec) bool {
	return rand.New(rand.NewPCG(s.Seed, restoreCheckStream)).IntN(2) == 0
}

// restoredOps are the keyed operators whose state S19 compares, by uid:
// what they keep changes only with records and watermarks, and a restored
// attempt's source sends neither before its restore barrier but the
// watermarks the checkpoint's own position had (reader.Poll), which fire
// nothing the checkpoint still held (S18). Left out: the timer function's
// state in seeds with processing-time timers (a restored timer whose time
// has passed fires at once), the agent's (it resumes its inputs' actions
// on restore), the source's and the sink's (operator state, not keyed:
// the sink commits what the checkpoint pre-committed).
func restoredOps(spec *Spec) []string {
	ops := []string{"window"}
	if spec.Sort {
		ops = append(ops, "sort")
	}
	if spec.Timers && spec.ProcDelayMS == 0 {
		ops = append(ops, "timers")
	}
	if spec.Session != nil {
		ops = append(ops, "session")
	}
	return ops
}

// checkRestore is S19 on a restored attempt of a seed with RestoreCheck:
// its source stops before its first record at a barrier of its own
// (reader.Poll), the driver takes a checkpoint there, and every keyed
// entry and timer of the operators restoredOps names in that checkpoint
// (at loc) must be one of the checkpoint the attempt restored (from), and
// the other way round, as multisets over all subtasks and key groups,
// decoded from the documented format (docs/state-format.md) as S18
// reads them. A nil Failure with a checkpoint retention deleted meanwhile.
func checkRestore(spec *Spec, fs vfs.FS, from, loc string) *Failure {
	before, f := keptState(spec, fs, from)
	if before == nil {
		return f
	}
	after, f := keptState(spec, fs, loc)
	if after == nil {
		return f
	}
	missing, extra := diff(before, after)
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	var recs []string
	for _, m := range missing {
		recs = append(recs, "lost:  "+m)
	}
	for _, e := range extra {
		recs = append(recs, "added: "+e)
	}
	return &Failure{Invariant: InvRestore, Detail: fmt.Sprintf("the job restored from %s held, at its first checkpoint %s (no record in between), "+
		"%d keyed entries and timers of %v fewer and %d more than that checkpoint", from, loc, len(missing), restoredOps(spec), len(extra)),
		Records: recs[:min(len(recs), 8)]}
}

// keptState returns what the operators restoredOps names keep in the
// checkpoint at loc, one line per keyed entry or timer, sorted; nil and
// a nil Failure when retention deleted the checkpoint meanwhile.
func keptState(spec *Spec, fs vfs.FS, loc string) ([]string, *Failure) {
	snap, f := readForExpired(fs, loc)
	if snap == nil {
		return nil, f
	}
	lines := []string{}
	for _, uid := range restoredOps(spec) {
		op := snap.Operator(uid)
		if op == nil {
			continue
		}
		for sub, st := range op.Subtasks {
			if st == nil {
				continue
			}
			for kg, blob := range st.KeyGroups {
				data, err := blob.Bytes()
				if err == nil {
					var entries []keptEntry
					var timers []keptTimer
					entries, timers, err = decodeKeyed(data)
					for _, e := range entries {
						lines = append(lines, fmt.Sprintf("%s key group %d: state %q key=%q namespace=%x user key=%x value=%x n=%d",
							uid, kg, e.state, e.key, e.ns, e.userKey, e.value, e.n))
					}
					for _, t := range timers {
						lines = append(lines, fmt.Sprintf("%s key group %d: timer ts=%d key=%q namespace=%x processing=%v", uid, kg, t.ts, t.key, t.ns, t.proc))
					}
				}
				if err != nil {
					return nil, &Failure{Invariant: InvRestore, Detail: fmt.Sprintf("checkpoint %s: operator %s subtask %d key group %d: %v", loc, uid, sub, kg, err)}
				}
			}
		}
	}
	slices.Sort(lines)
	return lines, nil
}
