package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

// The invariants a run checks (the package documentation numbers them).
const (
	InvExactlyOnce = "S1 exactly-once output"
	InvWatermarks  = "S2 watermarks rise"
	InvBehindWM    = "S3 nothing emitted behind the watermark"
	InvCompletes   = "S4 the job completes"
	InvSorted      = "S5 the sort releases in order, at the watermark"
	InvNoLeak      = "S6 no goroutine outlives the job"
	InvMemory      = "S7 memory is bounded"
	InvTimers      = "S8 timers fire in timestamp order, once the watermark reaches them"
	InvProcTimers  = "S9 processing-time timers fire once, when due, and hold each record once"
)

// MaxAttempts bounds the attempts of one run: one per fault plus the clean
// one, with room for a fault that strikes again after a restore.
const MaxAttempts = 8

// AttemptTimeout bounds one attempt; a run that reaches it fails S4.
const AttemptTimeout = time.Minute

// Result is the outcome of one seed.
type Result struct {
	Seed     uint64  `json:"seed"`
	Shape    string  `json:"shape"`
	Faults   []Fault `json:"faults"`
	Attempts int     `json:"attempts"`
	// Restores counts the attempts that started from a checkpoint.
	Restores int `json:"restores"`
	// ZombieFenced counts the Kafka form's attempts that failed because
	// a request of the attempt before fenced their producer
	// (zombieFenced): counted as that attempt's fault.
	ZombieFenced int `json:"zombie_fenced,omitempty"`
	// Storage are the checkpoint storage's faults (Spec.Storage), with
	// which struck.
	Storage []StorageFault `json:"storage,omitempty"`
	Failure *Failure       `json:"failure,omitempty"`
	Replay  string         `json:"replay"`
	// Elapsed is the run's wall time.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Failure is the first invariant a run broke.
type Failure struct {
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
	// Records are the records involved (at most a few).
	Records []string `json:"records,omitempty"`
	// TimedOut is an S4 failure by a run or attempt that did not finish
	// within its time (AttemptTimeout, the clustered form's): what a hang
	// does, and what the forms on real time (kfake's broker and clients,
	// the clustered members) may do on a machine starved of CPU. weir sim
	// --replays tells them apart.
	TimedOut bool `json:"timed_out,omitempty"`
}

// timedOut marks f as a time-out when err is an attempt's that did not
// finish in time, and adds where its goroutines waited to f's records.
func (f *Failure) timedOut(err error) {
	if se := (*stalledError)(nil); errors.As(err, &se) {
		f.TimedOut = true
		f.Records = append(f.Records, se.stacks...)
	}
}

func (f *Failure) Error() string { return f.Invariant + ": " + f.Detail }

// checkpointDir is the checkpoints' directory in the run's in-memory file
// system.
const checkpointDir = "/checkpoints"

// Options of Run. The zero value is usable.
type Options struct {
	Dir string
	// wrap, set by tests, replaces each sink subtask's committer by a
	// planted bug (mutants_test.go).
	wrap func(*sink) weir.TwoPhaseCommitter[string, Txn]
	// timeout, set by tests, replaces AttemptTimeout (a planted bug can
	// make a job hang: S4).
	timeout time.Duration
	// onlyKafka, set by tests, skips the scripted job of a seed with a
	// Kafka form, and the clustered form; onlyCluster runs the
	// clustered form alone.
	onlyKafka, onlyCluster bool
	// SkipKafka skips the Kafka form of every seed (`weir sim
	// --kafka=false`). SkipAgent leaves the agent branch out of the
	// scripted job (`--agent=false`).
	SkipKafka, SkipAgent bool
	// Cluster runs the clustered form of the seeds that have one (`weir
	// sim` does unless --cluster=false; the package's fixed-seed tests
	// leave it out but for its own, TestClusterFormKeepsTheInvariants).
	Cluster bool
	// noExpired, set by tests, turns S18 off (to show which planted bugs
	// only it finds).
	noExpired bool
}

// Run generates seed's job, workload and faults, runs the job until it
// completes (restarting it from its latest checkpoint after every injected
// failure) and checks the invariants. Checkpoints go to an in-memory file
// system. The error is for the simulator's own failures (none yet).
func Run(ctx context.Context, seed uint64, o Options) (*Result, error) {
	start := time.Now()
	spec := Generate(seed)
	replay := fmt.Sprintf("weir sim --seed %d", seed)
	if o.SkipAgent {
		spec.Agent = nil // drawn from a stream of its own: the rest stays
		replay += " --agent=false"
	}
	if o.SkipKafka {
		spec.Kafka = nil
		replay += " --kafka=false"
	}
	if !o.Cluster && !o.onlyCluster && spec.Cluster != nil {
		spec.Cluster = nil
		replay += " --cluster=false"
	}
	res := &Result{Seed: seed, Shape: spec.Shape(), Replay: replay}
	st := newStore()
	var aw *agentWorld
	if spec.Agent != nil {
		aw = newAgentWorld(spec.Agent)
		aw.setInputs(spec)
	}
	kafka := spec.Kafka != nil && !o.onlyCluster
	clustered := spec.Cluster != nil && !o.onlyKafka
	id := labelled(ctx, func(ctx context.Context) {
		if (!o.onlyKafka || spec.Kafka == nil) && !o.onlyCluster {
			if aw != nil && spec.Agent.Store == StoreKafka {
				k, err := startAgentKafka(spec.Agent)
				if err != nil {
					res.Failure = &Failure{Invariant: InvCompletes, Detail: err.Error()}
					return
				}
				aw.kafka = k
				defer k.close()
			}
			res.Failure = run(ctx, spec, st, vfs.NewCrashableMem(), aw, o, res)
			if res.Failure == nil && aw != nil {
				res.Failure = aw.failure()
			}
			if res.Failure == nil {
				res.Failure = checkOutput(spec, aw, st.committed())
			}
		}
		if res.Failure == nil && kafka {
			res.Failure = runKafka(ctx, spec, o, res)
		}
		if res.Failure == nil && clustered {
			res.Failure = runCluster(ctx, spec, o, res)
		}
	})
	if res.Failure == nil {
		res.Failure = checkLeaks(id)
	}
	res.Faults = spec.Faults
	if spec.Agent != nil {
		res.Faults = append(slices.Clip(res.Faults), spec.Agent.StoreFaults...)
	}
	if kafka {
		res.Faults = append(append(res.Faults, spec.Kafka.Faults...), spec.Kafka.Background...)
	}
	if clustered {
		res.Faults = append(res.Faults, spec.Cluster.Faults...)
	}
	res.Storage = spec.Storage
	res.Elapsed = time.Since(start)
	return res, nil
}

// world is what outlives a run's attempts besides the store and the file
// system: processing time (a manual clock, with Spec.ProcDelayMS), and the
// count of barriers reached, which picks the clock's next step.
type world struct {
	clk *clock.Manual
	// wall is the job's clock: clk, stepped back by Spec.ClockBackMS
	// (clockback.go).
	wall     *wallClock
	barriers int
}

func run(ctx context.Context, spec *Spec, st *store, fs *vfs.MemFS, aw *agentWorld, o Options, res *Result) *Failure {
	w := &world{clk: clock.NewManual(time.UnixMilli(1_000_000_000_000))}
	w.wall = newWallClock(w.clk)
	if aw != nil {
		aw.time.setClock(w.clk)
	}
	for res.Attempts < MaxAttempts {
		res.Attempts++
		var fault *Fault
		if i := res.Attempts - 1; i < len(spec.Faults) {
			fault = &spec.Faults[i]
		}
		var cfs vfs.FS = fs
		for i := range spec.Storage {
			if sf := &spec.Storage[i]; sf.Attempt == res.Attempts {
				cfs = errorfs.Wrap(fs, &storageInjector{f: sf})
			}
		}
		obs, restored, err := attempt(ctx, spec, st, fs, cfs, fault, w, aw, res.Attempts, o)
		if restored {
			res.Restores++
		}
		if f := checkObserved(spec, obs); f != nil {
			return f
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrInjected):
			if fault != nil && fault.Machine {
				// The job has stopped (Wait returned): nothing writes
				// to fs any more. The next attempt sees only what was
				// synced.
				// With TornPercent, some of what was written but not
				// synced survives too, block by block: torn writes.
				fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: spec.TornPercent,
					RNG: rand.New(rand.NewPCG(spec.Seed, uint64(res.Attempts)))})
			}
			continue
		default:
			f := &Failure{Invariant: InvCompletes, Detail: fmt.Sprintf("attempt %d: %v", res.Attempts, err)}
			f.timedOut(err)
			return f
		}
	}
	return &Failure{Invariant: InvCompletes, Detail: fmt.Sprintf("still failing after %d attempts", MaxAttempts)}
}

// countSum is the windows' aggregate (the tumbling window, the sessions,
// the Kafka form's window): the count and the sum of the ids of a window's
// records, which the oracle computes on its own.
var countSum = window.AggregateFuncs[event, acc, acc]{
	AddFn:    func(e event, a acc) acc { return acc{N: a.N + 1, Sum: a.Sum + e.ID} },
	ResultFn: func(a acc) acc { return a },
	MergeFn:  func(a, b acc) acc { return acc{N: a.N + b.N, Sum: a.Sum + b.Sum} },
}

// attempt runs the job once, restored from the latest checkpoint in fs
// if there is one, with fault armed, and returns what the observer saw.
// The job writes its checkpoints through cfs: fs, or fs with a storage
// fault armed.
func attempt(ctx context.Context, spec *Spec, st *store, fs, cfs vfs.FS, fault *Fault, w *world, aw *agentWorld, n int, o Options) (obs observed, restored bool, err error) {
	timeout := AttemptTimeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	ctx, stalled, cancel := timeLimit(ctx, timeout, aw)
	defer cancel()
	defer func() { err = stalled(err) }()
	cfg := weir.Config{Parallelism: spec.Parallelism, MaxParallelism: 128, // key groups 0-127 (agentdisk.go)
		// Failed checkpoints are expected here (storage faults): the
		// invariants judge the job, not its log lines.
		Logger: slog.New(slog.DiscardHandler),
		// The interval is never reached: checkpoints are triggered at the
		// script's barriers. It is set because a job with periodic
		// checkpoints ends its bounded input with a final checkpoint,
		// which commits the sinks' last transactions exactly once (without
		// it they commit at the end of input, and a failure then repeats
		// what other subtasks committed already).
		Checkpoint: runtime.CheckpointConfig{Dir: checkpointDir, Retain: 2, Interval: time.Hour,
			Storage: checkpoint.Storage{FS: cfs}}}
	if spec.ProcDelayMS > 0 || aw != nil {
		cfg.Clock = w.wall // the agent's time-outs are virtual too (agenttime.go)
	}
	if latest, _, err := (checkpoint.Storage{FS: fs}).Latest(checkpointDir); err == nil {
		cfg.Checkpoint.RestoreFrom, restored = latest, true
	}
	env := weir.NewEnvironment(cfg)
	b := &barriers{reached: make(chan chan struct{}, spec.Barriers+1), restore: make(chan chan struct{}, 1)}
	src := weir.FromSource(env, "src", source(spec, b), watermark.NoWatermarks[event]()).UID("src").Parallelism(1)
	var seen int64 // the source's subtask is the only caller
	passed := weir.MapErr(src, "fail-injector", func(e event) (event, error) {
		seen++
		if fault != nil && fault.Kind == FaultRecord && fault.At == seen {
			fault.Struck = true
			aw.strike(fault)
			return e, fmt.Errorf("%w: record %d of the attempt (id %d)", ErrInjected, seen, e.ID)
		}
		return e, nil
	}).UID("fail-injector").Parallelism(1)
	late := weir.NewOutputTag[event]("late")
	opts := []window.Option{window.LateOutput(late)}
	if spec.LatenessMS > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(spec.LatenessMS)*time.Millisecond))
	}
	windowed := window.AggregateKeyed(weir.KeyBy(passed, func(e event) string { return e.Key }), "window",
		window.Tumbling(time.Duration(spec.WindowMS)*time.Millisecond), countSum, opts...).UID("window")
	lines := weir.Map(windowed, "window-lines", func(r window.Result[string, acc]) string {
		return windowLine(r.Key, r.Window.Start, r.Window.End, r.Value.N, r.Value.Sum)
	}).UID("window-lines")
	obs.window = weirtest.ObserveWith(lines, weirtest.Options{Name: "observe-window"})
	lates := weir.Map(weir.SideOutput(windowed, late), "late-lines", func(e event) string {
		return lateLine(e.Key, e.TS, e.ID)
	}).UID("late-lines")
	parts := []weir.Stream[string]{lines, lates}
	if spec.Sort {
		// The event-time sort per key, on a branch beside the window: its
		// output observed right behind it (S5), its records and
		// violations committed by the same sink (S1).
		viol := weir.NewOutputTag[event]("violations")
		sorted := ordering.Sort(weir.KeyBy(passed, func(e event) string { return e.Key }), "sort",
			ordering.SortOptions[event]{Violations: viol}).UID("sort")
		obs.sort = weirtest.ObserveWith(sorted, weirtest.Options{Name: "observe-sort"})
		sortLines := weir.Map(sorted, "sort-lines", func(e event) string { return sortLine(e.Key, e.TS, e.ID) }).UID("sort-lines")
		violLines := weir.Map(weir.SideOutput(sorted, viol), "violation-lines", func(e event) string {
			return violationLine(e.Key, e.TS, e.ID)
		}).UID("violation-lines")
		parts = append(parts, sortLines, violLines)
	}
	if spec.Timers {
		parts = append(parts, timerBranch(spec, passed, w.wall.reached, &obs.timers))
	}
	if spec.Session != nil {
		parts = append(parts, sessionBranch(spec, passed, &obs.session))
	}
	if aw != nil {
		parts = append(parts, agentBranch(aw, n, aw.begin(n), passed, &obs.agent)...)
	}
	weir.TwoPhaseCommit(weir.Union(parts[0], parts[1:]...), "sink", func(ctx *runtime.Context) (weir.TwoPhaseCommitter[string, Txn], error) {
		k := &sink{st: st, subtask: ctx.Subtask, aw: aw}
		if fault != nil && fault.Kind != FaultRecord && fault.Subtask == ctx.Subtask {
			k.fault = fault
		}
		if o.wrap != nil {
			return o.wrap(k), nil
		}
		return k, nil
	}).UID("sink")

	job, err := env.Start(ctx)
	if err != nil {
		return obs, restored, err
	}
	for {
		select {
		case ch := <-b.restore:
			// The restore barrier (S19): processing time does not move,
			// it is no barrier of the script.
			_, loc, err := job.TriggerCheckpoint(ctx)
			if err == nil && obs.expired == nil && !o.noExpired {
				obs.expired = checkExpired(spec, fs, loc) // S18
			}
			if err == nil && obs.restore == nil {
				obs.restore = checkRestore(spec, fs, cfg.Checkpoint.RestoreFrom, loc) // S19
			}
			close(ch)
		case ch := <-b.reached:
			// A checkpoint that fails (a fault struck during it) fails
			// the job too; either way the source goes on, and the job's
			// end says what happened.
			if _, loc, err := job.TriggerCheckpoint(ctx); err == nil && obs.expired == nil && !o.noExpired {
				obs.expired = checkExpired(spec, fs, loc) // S18
			}
			if spec.ProcDelayMS > 0 {
				// Every record before the barrier has been processed
				// (the checkpoint is aligned) and none after it is
				// out yet: processing time moves while the job holds
				// no record, so what each timer holds is fixed.
				i := w.barriers % len(spec.ClockSteps)
				w.clk.Advance(time.Duration(spec.ClockSteps[i]) * time.Millisecond)
				if i < len(spec.ClockBackMS) && spec.ClockBackMS[i] > 0 {
					w.wall.stepBack(time.Duration(spec.ClockBackMS[i]) * time.Millisecond)
				}
				w.barriers++
			}
			close(ch)
		case <-job.Done():
			err := job.Wait()
			if latest, _, lerr := (checkpoint.Storage{FS: fs}).Latest(checkpointDir); err == nil && lerr == nil && obs.expired == nil && !o.noExpired {
				obs.expired = checkExpired(spec, fs, latest) // S18, the final checkpoint
			}
			return obs, restored, err
		}
	}
}

type acc struct{ N, Sum int64 }

// timeLimit returns ctx, cancelled after timeout, and stalled, which
// returns an attempt's error, or once the time has run out a
// *stalledError naming where the run's goroutines waited then, and what
// aw's state says (if aw is not nil): taken before the job is cancelled,
// while they still wait there (S4).
func timeLimit(ctx context.Context, timeout time.Duration, aw *agentWorld) (context.Context, func(error) error, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan []string, 1)
	timer := time.AfterFunc(timeout, func() {
		var stacks []string
		if id, ok := pprof.Label(ctx, leakLabel); ok {
			_, stacks = goroutinesWith(leakLabel, id)
		}
		stacks = append(stacks, aw.stallReport()...)
		if os.Getenv("WEIR_SIM_DEBUG") != "" {
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2) // every stack, whole
		}
		ch <- stacks
		cancel()
	})
	stalled := func(err error) error {
		if err == nil {
			return nil // it finished, if only just
		}
		select {
		case stacks := <-ch:
			return &stalledError{timeout: timeout, stacks: stacks, err: err}
		default:
			return err
		}
	}
	return ctx, stalled, func() { timer.Stop(); cancel() }
}

// stalledError is an attempt that did not finish in time: the job's
// error after it was cancelled, and where its goroutines waited before.
type stalledError struct {
	timeout time.Duration
	stacks  []string // the innermost frames of each distinct stack
	err     error
}

func (e *stalledError) Error() string {
	return fmt.Sprintf("did not finish within %v (then cancelled: %v)", e.timeout, e.err)
}

func (e *stalledError) Unwrap() error { return e.err }

// observed is what one attempt's observers received: behind the window
// (S2, S3) and, with Spec.Sort, behind the sort (S5).
type observed struct {
	window *weirtest.Observation[string]
	sort   *weirtest.Observation[event]
	timers *weirtest.Observation[string]
	// session is behind the session operator (Spec.Session).
	session *weirtest.Observation[string]
	agent   agentObserved
	// expired is the first checkpoint that kept what had expired (S18).
	expired *Failure
	// restore is the restore barrier's checkpoint whose keyed state was
	// not the restored one's (S19).
	restore *Failure
}

// checkOutput checks S1: the committed lines against the reference, S9 on
// the processing-time firings and, with the agent branch, S10 on its
// lines.
func checkOutput(spec *Spec, aw *agentWorld, got []string) *Failure {
	got, f := checkProcTimers(got)
	if f != nil {
		return f
	}
	got, agentLines := splitAgentLines(got)
	if aw != nil {
		if f := checkAgentOutput(spec, aw, agentLines); f != nil {
			return f
		}
	}
	return compareLines(Reference(spec), got)
}

// compareLines compares the committed lines got with the sorted reference
// want, as multisets.
func compareLines(want, got []string) *Failure {
	slices.Sort(got)
	missing, extra := diff(want, got)
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	f := &Failure{Invariant: InvExactlyOnce, Detail: fmt.Sprintf("committed %d lines, the reference %d: %d missing, %d extra", len(got), len(want), len(missing), len(extra))}
	for i, l := range missing {
		if i == 4 {
			break
		}
		f.Records = append(f.Records, "missing: "+l)
	}
	for i, l := range extra {
		if i == 4 {
			break
		}
		f.Records = append(f.Records, "extra:   "+l)
	}
	return f
}

// diff returns the lines of sorted want not in sorted got and those of got
// not in want, counting repeats.
func diff(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}
