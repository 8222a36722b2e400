package agent

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRetentionProperties runs random sequences of finished inputs,
// snapshots (checkpoints and savepoints), completions in any order and
// aborts through retention, and checks every prune it returns against a
// model that recomputes the retained window from scratch: R1 (nothing
// pruned that a retained checkpoint needs), R2 (everything the oldest
// retained checkpoint covers is pruned), R3 (the horizon never goes back
// nor passes the oldest retained checkpoint) and R4 (savepoints are not
// retained).
func TestRetentionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keep := rapid.IntRange(0, 3).Draw(t, "keep")
		keys := rapid.IntRange(1, 4).Draw(t, "keys")
		var (
			r         retention
			finished  = map[string]int64{}
			nextSeq   = map[string]int64{}
			coveredBy = map[string]map[int64]int64{} // key -> seq -> checkpoint whose snapshot it finished before
			inFlight  []int64
			isSP      = map[int64]bool{}
			completed []int64 // completed checkpoints (not savepoints), the model's retained window is its tail
			pruned    = map[string]int64{}
			horizon   int64
			nextID    int64 = 1
		)
		oldest := func() (int64, bool) {
			c := slices.Clone(completed)
			slices.Sort(c)
			if len(c) == 0 {
				return 0, false
			}
			return c[max(0, len(c)-max(keep, 1))], true
		}
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); op {
			case 0, 1: // an input finishes
				k := fmt.Sprint("k", rapid.IntRange(0, keys-1).Draw(t, "key"))
				finished[k] = nextSeq[k]
				nextSeq[k]++
			case 2: // a snapshot
				id := nextID
				nextID++
				sp := rapid.IntRange(0, 3).Draw(t, "savepoint") == 0
				for k, s := range finished {
					if coveredBy[k] == nil {
						coveredBy[k] = map[int64]int64{}
					}
					// Every earlier sequence number not covered yet
					// finished before this snapshot too.
					for q := int64(0); q <= s; q++ {
						if _, ok := coveredBy[k][q]; !ok {
							coveredBy[k][q] = id
						}
					}
				}
				r.taken(id, sp, finished)
				finished = map[string]int64{}
				inFlight = append(inFlight, id)
				isSP[id] = sp
			case 3, 4: // a completion, usually the oldest in flight
				if len(inFlight) == 0 {
					continue
				}
				i := 0
				if op == 4 {
					i = rapid.IntRange(0, len(inFlight)-1).Draw(t, "which")
				}
				id := inFlight[i]
				inFlight = slices.Delete(inFlight, i, i+1)
				if !isSP[id] {
					completed = append(completed, id)
				}
				p := r.completed(id, keep)
				o, ok := oldest()
				if !ok {
					if len(p.upTo) > 0 {
						t.Fatalf("R1: prune %v with no checkpoint retained", p.upTo)
					}
					continue
				}
				if len(r.retained) == 0 || r.retained[0] != o {
					t.Fatalf("R4: retained %v, want the window ending at %v (oldest %d)", r.retained, completed, o)
				}
				for k, s := range p.upTo {
					for q := pruned[k]; q <= s; q++ {
						c, ok := coveredBy[k][q]
						if !ok || c > o {
							t.Fatalf("R1: key %s seq %d pruned (up to %d), covered by checkpoint %d (covered: %v), oldest retained %d", k, q, s, c, ok, o)
						}
					}
					pruned[k] = max(pruned[k], s+1)
				}
				if len(p.upTo) > 0 {
					if p.horizon < horizon || p.horizon > o {
						t.Fatalf("R3: horizon %d after %d, oldest retained %d", p.horizon, horizon, o)
					}
					horizon = p.horizon
				}
				for k, m := range coveredBy {
					for q, c := range m {
						if c <= o && q >= pruned[k] {
							t.Fatalf("R2: key %s seq %d covered by checkpoint %d <= oldest retained %d, not pruned (pruned below %d)", k, q, c, o, pruned[k])
						}
					}
				}
			case 5: // an abort
				if len(inFlight) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(inFlight)-1).Draw(t, "aborted")
				r.aborted(inFlight[i])
				inFlight = slices.Delete(inFlight, i, i+1)
			}
		}
	})
}
