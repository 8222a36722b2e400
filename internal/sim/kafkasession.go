package sim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/window"
)

// The Kafka form's session windows and allowed lateness, and S18 on its
// checkpoints.
//
// In half the Kafka seeds (KafkaSpec.Session, rand.NewPCG(seed, 0x4a5e),
// drawn after the rest of the form, so no other draw changes) the job also
// runs a keyed event-time session window (gap 1-25ms, allowed lateness
// 0-35ms, a late output) whose lines go to the same exactly-once sink, and
// its tumbling window takes an allowed lateness of its own
// (KafkaSpec.WindowLatenessMS, 0-35ms). Neither changes what the form
// commits if no record is late, which BoundMS guarantees, but one case:
// a record whose timestamp is exactly a session's end (its last
// millisecond + 1) joins that session (touching windows merge) unless the
// watermark reached the session's last millisecond first, which fires the
// session and, without lateness, drops it. A record is above every
// watermark before it by construction (BoundMS); in these seeds the
// generators' bound is BoundMS+1 (KafkaSpec.wmBound), so a record is at
// least 2ms above it: the last millisecond of a session it touches is
// still ahead of the watermark. Every session then fires once, complete,
// whatever the reading order, and kafkaSessionReference is its oracle.
//
// S18 in the Kafka form: the watermark a keyed operator had processed at
// a checkpoint is not fixed by a script here (it depends on the order in
// which partitions are read). A tap chained right behind each keyed window
// operator (wmTap) records, per subtask, the last watermark the operator
// forwarded before each checkpoint's barrier: the operator forwards a
// watermark only after it has fired and cleaned up for it, and takes its
// snapshot at the same barrier, so that watermark is a lower bound of the
// one its snapshot reflects. What a subtask's key groups keep is judged
// against it by the scripted form's rules (expired.go).

// generateKafkaSession draws the session branch and the tumbling window's
// allowed lateness of the Kafka form k of s.
func generateKafkaSession(s *Spec, k *KafkaSpec) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x4a5e))
	if rng.IntN(2) != 0 {
		return
	}
	g := &SessionSpec{GapMS: 1 + rng.Int64N(25)}
	if rng.IntN(3) > 0 {
		g.LatenessMS = int64(5 * (1 + rng.IntN(7)))
	}
	if rng.IntN(3) > 0 {
		k.WindowLatenessMS = int64(5 * (1 + rng.IntN(7)))
	}
	k.Session = g
}

// wmBound is the watermark generators' out-of-orderness bound: BoundMS,
// and one more with sessions (see above).
func (k *KafkaSpec) wmBound() int64 {
	if k.Session != nil {
		return k.BoundMS + 1
	}
	return k.BoundMS
}

// kafkaSessionReference is the session branch's committed lines: per key,
// the records sorted by timestamp, a session ending where the next record
// is more than the gap after the last (a record at t makes [t, t+gap), and
// windows that overlap or touch merge), each firing once with its count
// and sum of ids. No record is late (BoundMS), so there is no late line.
func kafkaSessionReference(k *KafkaSpec) []string {
	gap := k.Session.GapMS
	byKey := map[string][]KafkaRecord{}
	for _, r := range k.Records {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	var out []string
	for key, rs := range byKey {
		slices.SortFunc(rs, func(a, b KafkaRecord) int { return cmp.Compare(a.TS, b.TS) })
		start, last, n, sum := rs[0].TS, rs[0].TS, int64(0), int64(0)
		for _, r := range rs {
			if r.TS > last+gap {
				out = append(out, sessionLine(key, start, last+gap, n, sum))
				start, n, sum = r.TS, 0, 0
			}
			last = r.TS
			n++
			sum += r.ID
		}
		out = append(out, sessionLine(key, start, last+gap, n, sum))
	}
	return out
}

// kafkaSessionBranch adds the session operator of the Kafka form behind
// recs: its lines (through a tap recording its watermarks into seen) and
// its late lines, which the reference never has.
func kafkaSessionBranch(g *SessionSpec, recs weir.Stream[event], seen *wmSeen, parallelism int) []weir.Stream[string] {
	late := weir.NewOutputTag[event]("session-late")
	opts := []window.Option{window.LateOutput(late)}
	if g.LatenessMS > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(g.LatenessMS)*time.Millisecond))
	}
	sessions := window.AggregateKeyed(weir.KeyBy(recs, func(e event) string { return e.Key }), "session",
		window.Session(time.Duration(g.GapMS)*time.Millisecond), countSum, opts...).UID("session").Parallelism(parallelism)
	lines := weir.Transform(sessions, "session-lines", func() runtime.OneInputOperator[window.Result[string, acc], string] {
		return &wmTap{op: "session", seen: seen, line: func(r window.Result[string, acc]) string {
			return sessionLine(r.Key, r.Window.Start, r.Window.End, r.Value.N, r.Value.Sum)
		}}
	}).UID("session-lines").Parallelism(parallelism)
	lates := weir.Map(weir.SideOutput(sessions, late), "session-late-lines", func(e event) string {
		return sessionLateLine(e.Key, e.TS, e.ID)
	}).UID("session-late-lines").Parallelism(parallelism)
	return []weir.Stream[string]{lines, lates}
}

// wmSeen is what the taps of one attempt recorded: per keyed operator,
// subtask and checkpoint, the last watermark the operator forwarded
// before the checkpoint's barrier.
type wmSeen struct {
	mu sync.Mutex
	at map[wmAt]int64
}

type wmAt struct {
	uid  string
	sub  int
	ckpt int64
}

func (s *wmSeen) put(a wmAt, wm int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[wmAt]int64{}
	}
	s.at[a] = wm
}

// taken reports whether a tap recorded checkpoint ckpt: whether it was
// taken in the attempt.
func (s *wmSeen) taken(ckpt int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a := range s.at {
		if a.ckpt == ckpt {
			return true
		}
	}
	return false
}

func (s *wmSeen) get(a wmAt) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wm, ok := s.at[a]
	return wm, ok
}

// wmTap is chained right behind the keyed window operator of UID op: it
// turns each result into its line, and records the last watermark it
// received at every checkpoint's barrier.
type wmTap struct {
	runtime.Base[string]
	op   string
	line func(r window.Result[string, acc]) string
	seen *wmSeen
	wm   int64
}

func (t *wmTap) Open(ctx *runtime.Context, out runtime.Output[string]) error {
	t.wm = minWM
	return t.Base.Open(ctx, out)
}

func (t *wmTap) ProcessRecord(r runtime.Record[window.Result[string, acc]]) error {
	t.Out.Collect(runtime.Record[string]{Value: t.line(r.Value), Timestamp: r.Timestamp})
	return nil
}

func (t *wmTap) ProcessWatermark(ts int64) error {
	t.wm = ts
	t.Out.EmitWatermark(ts)
	return nil
}

func (t *wmTap) SnapshotState(w *runtime.SnapshotWriter) error {
	t.seen.put(wmAt{t.op, t.Ctx.Subtask, w.CheckpointID()}, t.wm)
	return nil
}

// checkKafkaExpired checks S18 on the complete checkpoint at loc of
// attempt n of the Kafka form, against the watermarks seen recorded.
func (kr *kafkaRun) checkKafkaExpired(n int, seen *wmSeen, loc string) *Failure {
	snap, f := readForExpired(kr.fs, loc)
	if snap == nil {
		return f
	}
	if !seen.taken(snap.ID) {
		// The latest checkpoint at the end is an earlier attempt's when
		// the final one was given up (runtime: three failures).
		return nil
	}
	rules := []expiredRule{{"window", windowRule(kr.k.WindowLatenessMS)}}
	if g := kr.k.Session; g != nil {
		rules = append(rules, expiredRule{"session", sessionRule(g.LatenessMS)})
	}
	kr.expiredRead++
	return judgeExpired(snap, rules, func(uid string, sub int) (int64, error) {
		wm, ok := seen.get(wmAt{uid, sub, snap.ID})
		if !ok {
			return 0, fmt.Errorf("no watermark recorded behind it at the barrier")
		}
		return wm, nil
	}, fmt.Sprintf("Kafka checkpoint %d of attempt %d", snap.ID, n))
}
