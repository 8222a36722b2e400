package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// StepKind says what a Step of the workload is.
type StepKind int

const (
	// StepRecord emits a record of a split.
	StepRecord StepKind = iota
	// StepWatermark sets a split's watermark.
	StepWatermark
	// StepBarrier is where the source stops until a checkpoint has been
	// taken (or has failed): checkpoints are triggered at these positions
	// of the workload, never by a timer.
	StepBarrier
)

// Step is one element of the source's script.
type Step struct {
	Kind  StepKind
	Split int
	Key   string
	TS    int64 // a record's timestamp, or the watermark
	ID    int64 // a record's identity, unique in the workload
}

// FaultKind says where a Fault strikes.
type FaultKind string

// The faults of this slice: in-process task failures, each ending the
// attempt with ErrInjected; the job then restarts from its latest
// checkpoint.
const (
	// FaultRecord fails the operator behind the source at the At-th record
	// it sees in the attempt.
	FaultRecord FaultKind = "record"
	// FaultWrite fails the sink subtask's At-th Write of the attempt.
	FaultWrite FaultKind = "write"
	// FaultPreCommit fails the sink subtask's At-th PreCommit of the
	// attempt after the transaction was made durable (the checkpoint
	// then fails).
	FaultPreCommit FaultKind = "precommit"
	// FaultCommitBefore fails the sink subtask's At-th Commit before it
	// commits; FaultCommitAfter after it committed.
	FaultCommitBefore FaultKind = "commit-before"
	FaultCommitAfter  FaultKind = "commit-after"
)

// Fault is one injected failure. The n-th attempt of a run is armed with
// the n-th fault of the schedule; attempts after the schedule run clean.
type Fault struct {
	Kind    FaultKind `json:"kind"`
	Subtask int       `json:"subtask"` // of the sink (write, precommit, commit)
	At      int64     `json:"at"`      // 1-based count within the attempt
	// Machine says the failure crashes the machine too: the checkpoint
	// storage keeps only what was synced (Pebble's crashable in-memory
	// file system, CrashClone).
	Machine bool `json:"machine,omitempty"`
	// Struck says whether the fault happened (a fault beyond the end of
	// its attempt's work does not).
	Struck bool `json:"struck"`
	// The broker faults of the Kafka form (kafka.go): the request kind,
	// the error answered, how many requests in a row (retriable), the
	// delay (latency).
	Request string `json:"request,omitempty"`
	Err     string `json:"err,omitempty"`
	Repeat  int    `json:"repeat,omitempty"`
	DelayMS int64  `json:"delay_ms,omitempty"`
	// RiddenOut says that a broker restart of the Kafka form struck in
	// an attempt that went on to complete: the clients rode the outage
	// out without a restore (brokerrestart.go).
	RiddenOut bool `json:"ridden_out,omitempty"`
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s#%d", f.Kind, f.At)
	switch {
	case f.Request != "" && f.DelayMS > 0:
		s = fmt.Sprintf("%s@%s#%d+%dms", f.Kind, f.Request, f.At, f.DelayMS)
	case f.Request != "":
		s = fmt.Sprintf("%s@%s#%d:%s", f.Kind, f.Request, f.At, f.Err)
		if f.Repeat > 1 {
			s += fmt.Sprintf("x%d", f.Repeat)
		}
	case f.Kind == FaultMemberKill || f.Kind == FaultMemberJoin || f.Kind == FaultMemberRestart:
		s = fmt.Sprintf("%s@m%d#%d", f.Kind, f.Subtask, f.At)
	case f.Kind != FaultRecord:
		s = fmt.Sprintf("%s@sink[%d]#%d", f.Kind, f.Subtask, f.At)
	}
	if f.Machine {
		s += "+machine"
	}
	if !f.Struck {
		s += "(missed)"
	}
	if f.RiddenOut {
		s += "(ridden out)"
	}
	return s
}

// Spec is what a seed generates: the job's shape, its workload (the
// source's script) and the fault schedule.
type Spec struct {
	Seed uint64 `json:"seed"`
	// Parallelism of the keyed window operator and the sink; the source
	// has one subtask reading Splits splits (see the package
	// documentation: why one).
	Parallelism int `json:"parallelism"`
	Splits      int `json:"splits"`
	Keys        int `json:"keys"`
	Records     int `json:"records"`
	// WindowMS is the tumbling window's size, LatenessMS its allowed
	// lateness, both in milliseconds of event time.
	WindowMS   int64 `json:"window_ms"`
	LatenessMS int64 `json:"lateness_ms"`
	// Barriers is the number of checkpoint positions in the script.
	Barriers int `json:"barriers"`
	// Sort adds an event-time sort per key (ordering.Sort) on a branch
	// beside the window, with its violations output; its lines go to the
	// same sink (S5).
	Sort bool `json:"sort,omitempty"`
	// Timers adds a KeyedProcessFunction with an event-time timer per
	// record at its timestamp + TimerDelayMS, on a branch beside the
	// window (timers.go; S8).
	Timers       bool  `json:"timers,omitempty"`
	TimerDelayMS int64 `json:"timer_delay_ms,omitempty"`
	// ProcDelayMS, in half the timer seeds, adds a processing-time timer
	// per record at processing time + ProcDelayMS (S9). Processing time is
	// then virtual: a manual clock that moves only after a checkpoint
	// taken at a barrier, by ClockSteps[n] for the run's n-th barrier
	// (cyclically): mostly milliseconds, sometimes a jump of minutes.
	ProcDelayMS int64   `json:"proc_delay_ms,omitempty"`
	ClockSteps  []int64 `json:"clock_steps_ms,omitempty"`
	// ClockBackMS, in half the seeds with ProcDelayMS, steps the wall
	// clock back after ClockSteps[n] by ClockBackMS[n] (0: not at that
	// barrier): milliseconds, or minutes (clockback.go).
	ClockBackMS []int64 `json:"clock_back_ms,omitempty"`
	// Agent, when set (about a third of the seeds), adds the agent branch
	// (agentspec.go, S10-S12).
	Agent *AgentSpec `json:"agent,omitempty"`
	// Kafka, in about a third of the seeds, adds a second run: the Kafka
	// form of the job (kafka.go), after the scripted one.
	Kafka *KafkaSpec `json:"kafka,omitempty"`
	// Cluster, in about one seed in 50, adds a third run: the clustered
	// form (cluster.go), after the Kafka form.
	Cluster *ClusterSpec `json:"cluster,omitempty"`
	// Session, in about a third of the seeds, adds event-time session
	// windows on a branch beside the window (sessionwin.go).
	Session *SessionSpec `json:"session,omitempty"`
	// RestoreCheck, in half the seeds, stops every restored attempt's
	// source at a barrier of its own before its first record, and S19
	// compares the keyed state of the checkpoint taken there with the
	// restored one's (restorecheck.go).
	RestoreCheck bool    `json:"restore_check,omitempty"`
	Faults       []Fault `json:"faults"`
	// Storage are failures of the checkpoint storage's file system, each
	// armed in one attempt beside that attempt's Fault.
	Storage []StorageFault `json:"storage,omitempty"`
	// TornPercent is, for a machine crash, the chance that each block or
	// directory entry written but not synced survives it (Pebble's
	// CrashCloneCfg.UnsyncedDataPercent): 0 keeps exactly what was
	// synced; between 0 and 100 the crash tears writes.
	TornPercent int    `json:"torn_percent,omitempty"`
	Steps       []Step `json:"-"`
}

// StorageOp says which file-system operation of the checkpoint storage a
// StorageFault fails.
type StorageOp string

// The operations a StorageFault can fail.
const (
	StorageSync   StorageOp = "sync"   // an fsync of a file or directory
	StorageWrite  StorageOp = "write"  // a write to a file
	StorageCreate StorageOp = "create" // the creation of a file or directory
	StorageLink   StorageOp = "link"   // a link or rename (publishing a file)
)

// StorageFault fails the At-th operation Op of the checkpoint storage in
// the attempt Attempt (1-based) with Errno (EIO or ENOSPC). It does not end
// the attempt by itself: the checkpoint being written fails, and what the
// job does then is what is tested.
type StorageFault struct {
	Attempt int       `json:"attempt"`
	Op      StorageOp `json:"op"`
	At      int       `json:"at"`
	Errno   string    `json:"errno"`
	Struck  bool      `json:"struck"`
}

func (f StorageFault) String() string {
	s := fmt.Sprintf("storage-%s#%d(%s)@attempt%d", f.Op, f.At, f.Errno, f.Attempt)
	if !f.Struck {
		s += "(missed)"
	}
	return s
}

// Shape describes the job in one line.
func (s *Spec) Shape() string {
	sort := ""
	if s.Sort {
		sort = ", event-time sort"
	}
	if s.Timers {
		sort += fmt.Sprintf(", event-time timers at +%dms", s.TimerDelayMS)
		if s.ProcDelayMS > 0 {
			sort += fmt.Sprintf(", processing-time timers at +%dms (virtual clock)", s.ProcDelayMS)
			sort += clockBackShape(s.ClockBackMS)
		}
	}
	if s.Session != nil {
		sort += ", " + s.Session.String()
	}
	if s.Agent != nil {
		sort += ", " + s.Agent.String()
	}
	if s.Kafka != nil {
		sort += "; " + s.Kafka.shape()
	}
	if s.Cluster != nil {
		sort += "; " + s.Cluster.shape()
	}
	return fmt.Sprintf("parallelism %d, %d splits, %d keys, %d records, tumbling %dms lateness %dms%s, %d checkpoints, torn writes %d%%",
		s.Parallelism, s.Splits, s.Keys, s.Records, s.WindowMS, s.LatenessMS, sort, s.Barriers, s.TornPercent)
}

// FaultSchedule describes faults (a Spec's, or a Result's, which says
// which struck) in one line.
func FaultSchedule(faults []Fault) string {
	if len(faults) == 0 {
		return "none"
	}
	var b []string
	for _, f := range faults {
		b = append(b, f.String())
	}
	return strings.Join(b, ", ")
}

// Generate derives the job, workload and faults of seed. It is a pure
// function of the seed.
func Generate(seed uint64) *Spec {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &Spec{
		Seed:        seed,
		Parallelism: 1 + rng.IntN(3),
		Splits:      1 + rng.IntN(4),
		Keys:        1 + rng.IntN(12),
		Records:     50 + rng.IntN(600),
		WindowMS:    int64(10 * (1 + rng.IntN(10))),
	}
	if rng.IntN(3) > 0 {
		s.LatenessMS = int64(5 * rng.IntN(8))
	}
	// Keys are skewed: Zipf over the key indexes.
	zipf := rand.NewZipf(rng, 1.1+rng.Float64(), 1, uint64(s.Keys-1)) // imax 0: always 0
	keys := make([]string, s.Keys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	// Each split's event time advances by random steps; records are out of
	// order by up to ooo ms, and a few are very late (behind the split's
	// watermark by up to three windows).
	ooo := int64(rng.IntN(30))
	lateP := rng.Float64() * 0.1
	base := make([]int64, s.Splits)
	wm := make([]int64, s.Splits)
	for i := range base {
		base[i] = int64(rng.IntN(50))
		wm[i] = -1 << 62
	}
	every := max(1, s.Records/(2+rng.IntN(10))) // 1 to 10 checkpoints
	wmEvery := 1 + rng.IntN(8)
	for i := range s.Records {
		sp := rng.IntN(s.Splits)
		base[sp] += int64(rng.IntN(6))
		ts := base[sp] - int64(rng.Int64N(ooo+1))
		if rng.Float64() < lateP {
			ts = base[sp] - ooo - 1 - rng.Int64N(3*s.WindowMS+1)
		}
		s.Steps = append(s.Steps, Step{Kind: StepRecord, Split: sp, Key: keys[zipf.Uint64()], TS: ts, ID: int64(i)})
		if rng.IntN(wmEvery) == 0 {
			if w := base[sp] - ooo - 1; w > wm[sp] {
				wm[sp] = w
				s.Steps = append(s.Steps, Step{Kind: StepWatermark, Split: sp, TS: w})
			}
		}
		if (i+1)%every == 0 && i+1 < s.Records {
			s.Steps = append(s.Steps, Step{Kind: StepBarrier})
			s.Barriers++
		}
	}
	// Faults: up to three, each in a later attempt. A sink subtask writes
	// about its share of the reference's lines per attempt.
	lines := int64(len(Reference(s)))
	for range rng.IntN(4) {
		f := Fault{Subtask: rng.IntN(s.Parallelism)}
		switch rng.IntN(5) {
		case 0:
			f.Kind, f.At = FaultRecord, 1+rng.Int64N(int64(s.Records))
		case 1:
			f.Kind, f.At = FaultWrite, 1+rng.Int64N(lines/int64(s.Parallelism)+1)
		case 2:
			f.Kind, f.At = FaultPreCommit, 1+rng.Int64N(int64(s.Barriers+1))
		case 3:
			f.Kind, f.At = FaultCommitBefore, 1+rng.Int64N(int64(s.Barriers+1))
		default:
			f.Kind, f.At = FaultCommitAfter, 1+rng.Int64N(int64(s.Barriers+1))
		}
		s.Faults = append(s.Faults, f)
	}
	// Which failures crash the machine too: drawn from a second stream of
	// the seed, so the schedules above stay those of earlier versions.
	mrng := rand.New(rand.NewPCG(seed, 0x3ac4))
	for i := range s.Faults {
		s.Faults[i].Machine = mrng.IntN(2) == 0
	}
	// Whether the job sorts too (half the seeds): a third stream, drawn
	// after the faults, so workloads and schedules stay those of earlier
	// versions (a write fault's count is drawn from the window's lines).
	srng := rand.New(rand.NewPCG(seed, 0x5027))
	s.Sort = srng.IntN(2) == 0
	// Storage faults and torn writes: a fourth stream. In each attempt
	// (those of the schedule and the clean one after it), one chance in
	// four of a failed file-system operation during a checkpoint.
	frng := rand.New(rand.NewPCG(seed, 0xf5f5))
	ops := []StorageOp{StorageSync, StorageWrite, StorageCreate, StorageLink}
	for a := 1; a <= len(s.Faults)+1; a++ {
		if frng.IntN(4) != 0 {
			continue
		}
		f := StorageFault{Attempt: a, Op: ops[frng.IntN(len(ops))], Errno: "EIO"}
		if f.Op == StorageWrite && frng.IntN(2) == 0 {
			f.Errno = "ENOSPC"
		}
		// A checkpoint does a few operations of each kind per subtask
		// and operator: spread the strike over the attempt's checkpoints.
		f.At = 1 + frng.IntN(4*(s.Barriers+1)*s.Parallelism)
		s.Storage = append(s.Storage, f)
	}
	s.TornPercent = []int{0, 0, 30, 70, 100}[frng.IntN(5)]
	// The timer branch (a third of the seeds): a fifth stream.
	trng := rand.New(rand.NewPCG(seed, 0x7133))
	if trng.IntN(3) == 0 {
		s.Timers, s.TimerDelayMS = true, trng.Int64N(3*s.WindowMS+1)
		if trng.IntN(2) == 0 {
			s.ProcDelayMS = 1 + trng.Int64N(200)
			for range s.Barriers + 1 {
				step := 1 + trng.Int64N(300)
				if trng.IntN(8) == 0 {
					step = (1 + trng.Int64N(5)) * 60_000 // a clock jump
				}
				s.ClockSteps = append(s.ClockSteps, step)
			}
		}
	}
	s.Agent = generateAgent(s) // a stream of its own, too
	// The Kafka form (a third of the seeds): a stream of its own.
	s.Kafka = generateKafka(s)
	// The clustered form (one seed in 50): a stream of its own.
	s.Cluster = generateCluster(s)
	// Steps back of the wall clock (half the seeds with processing-time
	// timers): a stream of its own.
	s.ClockBackMS = generateClockBack(s)
	// The agent's Kafka store (half the agent seeds with the memory
	// store): a stream of its own.
	generateAgentKafka(s)
	// Several calls and actions per input (half the agent seeds):
	// streams of their own.
	generateAgentMore(s)
	// Session windows (a third of the seeds): a stream of its own.
	s.Session = generateSession(s)
	// Await in the agent branch: a stream of its own.
	generateAgentAwait(s)
	// The restore check (half the seeds): a stream of its own, drawn last.
	s.RestoreCheck = generateRestoreCheck(s)
	return s
}

// Schedule describes the run's faults, task and storage, in one line.
func (r *Result) Schedule() string {
	s := FaultSchedule(r.Faults)
	for _, f := range r.Storage {
		s += ", " + f.String()
	}
	if r.ZombieFenced > 0 {
		s += fmt.Sprintf(", %d Kafka attempt(s) fenced by the failed attempt before's requests", r.ZombieFenced)
	}
	return s
}
