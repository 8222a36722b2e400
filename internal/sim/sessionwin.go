package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

// The session branch (Spec.Session): beside the tumbling window, keyBy ->
// event-time session windows (window.Session) with a gap and an allowed
// lateness, AggregateKeyed (count and sum of ids), a late output. Its
// firings and late records go to the same sink (S1), and its output is
// observed right behind the operator (S2, S3, as the window's).
//
// Session seeds without processing-time timers also overlap every checkpoint with processing (SessionSpec.Overlap): the
// source goes on past a barrier as soon as it has taken its own snapshot,
// not once the checkpoint is complete, so the records after the barrier
// reach the session operator while its keyed state is serialized
// copy-on-write (keyedsnap.go, state/cow.go). Without it every checkpoint of the
// scripted job completes before the next record is read, and no snapshot
// is ever in progress while a subtask writes its state. Each checkpoint
// still covers the same prefix of the workload.

// SessionSpec is the session branch of a seed.
type SessionSpec struct {
	GapMS      int64 `json:"gap_ms"`
	LatenessMS int64 `json:"lateness_ms"`
	// Overlap: the source does not wait for a checkpoint to complete
	// before it reads past its barrier.
	Overlap bool `json:"overlap,omitempty"`
}

func (s *SessionSpec) String() string {
	o := ""
	if s.Overlap {
		o = ", checkpoints overlapping processing"
	}
	return fmt.Sprintf("sessions gap %dms lateness %dms%s", s.GapMS, s.LatenessMS, o)
}

// generateSession draws the session branch, in a third of the seeds, from
// a stream of its own, after every other draw of the seed.
func generateSession(s *Spec) *SessionSpec {
	rng := rand.New(rand.NewPCG(s.Seed, 0x5e55))
	if rng.IntN(3) != 0 {
		return nil
	}
	g := &SessionSpec{GapMS: 1 + rng.Int64N(25)}
	if rng.IntN(3) > 0 {
		g.LatenessMS = int64(5 * rng.IntN(8))
	}
	// Processing time moves at a barrier only while the job holds no
	// record (run.go): those seeds keep waiting for the checkpoint. (Seed
	// 407, with the agent branch and overlapping checkpoints, hung in
	// every run until the runtime's source task stopped waiting after a
	// chained operator failed in its Poll:
	// TestChainedFailureInAWaitingPollEndsTheJob.)
	g.Overlap = s.ProcDelayMS == 0
	return g
}

// sessionLine is a session's firing: its key, window, count and sum of
// ids; sessionLateLine a record no session took.
func sessionLine(key string, start, end, n, sum int64) string {
	return fmt.Sprintf("G %s [%d,%d) n=%d sum=%d", key, start, end, n, sum)
}

func sessionLateLine(key string, ts, id int64) string {
	return fmt.Sprintf("GL %s ts=%d id=%d", key, ts, id)
}

// sessionBranch adds the session operator behind passed and returns its
// lines (firings and late records); obs receives its observer.
func sessionBranch(spec *Spec, passed weir.Stream[event], obs **weirtest.Observation[string]) weir.Stream[string] {
	g := spec.Session
	late := weir.NewOutputTag[event]("session-late")
	opts := []window.Option{window.LateOutput(late)}
	if g.LatenessMS > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(g.LatenessMS)*time.Millisecond))
	}
	sessions := window.AggregateKeyed(weir.KeyBy(passed, func(e event) string { return e.Key }), "session",
		window.Session(time.Duration(g.GapMS)*time.Millisecond), countSum, opts...).UID("session")
	lines := weir.Map(sessions, "session-lines", func(r window.Result[string, acc]) string {
		return sessionLine(r.Key, r.Window.Start, r.Window.End, r.Value.N, r.Value.Sum)
	}).UID("session-lines")
	*obs = weirtest.ObserveWith(lines, weirtest.Options{Name: "observe-session"})
	lates := weir.Map(weir.SideOutput(sessions, late), "session-late-lines", func(e event) string {
		return sessionLateLine(e.Key, e.TS, e.ID)
	}).UID("session-late-lines")
	return weir.Union(lines, lates)
}

// sessionReference computes the session branch's committed lines from the
// workload alone (window/doc.go I1-I6, I8, restated): a record at t makes
// the window [t, t+gap); it joins every open session of its key that this
// window overlaps or touches, and the sessions it so connects become one,
// their cover, repeatedly until no two open sessions of the key touch. A
// window that joins no open session and whose last millisecond plus the
// lateness is at or behind the watermark is late: its record goes to the
// late output. A session fires when the watermark rises to or past its
// last millisecond (end - 1), and again at once whenever a record joins it
// while the watermark is at or past that; it is gone (closed, no longer
// joined) once the watermark reaches end - 1 + lateness. The input ends
// with the maximum watermark. The watermark is the one Reference computes:
// the minimum of the splits'.
func sessionReference(s *Spec) []string {
	type session struct{ start, end, n, sum int64 }
	gap, L := s.Session.GapMS, s.Session.LatenessMS
	splitWM := make([]int64, s.Splits)
	for i := range splitWM {
		splitWM[i] = minWM
	}
	wm := int64(minWM)
	open := map[string][]session{}
	var out []string
	advance := func(to int64) {
		if to <= wm {
			return
		}
		for key, ss := range open {
			kept := ss[:0]
			for _, x := range ss {
				last := x.end - 1
				if last > wm && last <= to {
					out = append(out, sessionLine(key, x.start, x.end, x.n, x.sum))
				}
				if sat(last, L) > to {
					kept = append(kept, x)
				}
			}
			if len(kept) == 0 {
				delete(open, key)
			} else {
				open[key] = kept
			}
		}
		wm = to
	}
	touch := func(a, b session) bool { return a.start <= b.end && b.start <= a.end }
	for _, st := range s.Steps {
		switch st.Kind {
		case StepWatermark:
			splitWM[st.Split] = max(splitWM[st.Split], st.TS)
			advance(slices.Min(splitWM))
		case StepRecord:
			cur := session{start: st.TS, end: sat(st.TS, gap), n: 1, sum: st.ID}
			ss := open[st.Key]
			joined := false
			for changed := true; changed; {
				changed = false
				for i, x := range ss {
					if touch(cur, x) {
						cur = session{start: min(cur.start, x.start), end: max(cur.end, x.end), n: cur.n + x.n, sum: cur.sum + x.sum}
						ss = append(ss[:i:i], ss[i+1:]...)
						joined, changed = true, true
						break
					}
				}
			}
			if !joined && sat(cur.end-1, L) <= wm {
				out = append(out, sessionLateLine(st.Key, st.TS, st.ID))
				continue
			}
			open[st.Key] = append(ss, cur)
			if cur.end-1 <= wm {
				out = append(out, sessionLine(st.Key, cur.start, cur.end, cur.n, cur.sum))
			}
		}
	}
	advance(math.MaxInt64)
	return out
}

// checkSessions checks S2 and S3 behind the session operator: as behind
// the tumbling window, with the session branch's lateness.
func checkSessions(spec *Spec, obs *weirtest.Observation[string]) *Failure {
	if obs == nil {
		return nil
	}
	return checkWindowLateness(obs, spec.Session.LatenessMS, "session")
}
