// Package scaleout is the scale-out experiment (issue 13's proof): one
// clustered weir job (package cluster) over N worker processes on the
// embedded broker, one of them killed with SIGKILL mid-run and a new one
// added, with its committed output compared to a single-process run of
// the same job over the same input; and the job's throughput with 1, 2 and
// 4 processes.
//
// The job (WindowJob) counts and sums events per key in one-second
// tumbling event-time windows and writes the totals through the
// exactly-once Kafka sink. The input's disorder within a partition is
// below the watermark bound, so no record is late in any run and the
// totals of every run must be equal.
package scaleout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/cputime"
)

// Config describes an experiment. Zero fields take the defaults in
// parentheses.
type Config struct {
	// Processes at the start of the kill run (3); one is killed, then
	// one is added.
	Processes int
	// Partitions of the input topic (8) = source tasks; KeyedTasks (4).
	Partitions, KeyedTasks int
	// Records of input (200000) over Keys keys (256).
	Records, Keys int
	// Seed of the input (1).
	Seed uint64
	// CheckpointInterval of every task (500ms).
	CheckpointInterval time.Duration
	// KillAfter is the share of the input that must have reached the
	// exchange topic before the kill (0.3).
	KillAfter float64
	// Throughput lists the process counts of the throughput runs
	// ([1 2 4]); none: -1 in the list alone, or NoThroughput.
	Throughput []int
	// NoThroughput skips the throughput runs.
	NoThroughput bool
	// ThroughputOnly skips the kill run (and the restart runs): the
	// local job and the throughput runs alone, to measure CPU per record.
	ThroughputOnly bool
	// Pace bounds the records per second of each source task in the kill
	// run (0: no bound), so that it lasts long enough for the kill and
	// the addition to happen mid-run.
	Pace int
	// Timeout bounds each run (5m).
	Timeout time.Duration
	// Program and Args start a worker: a program that calls
	// MaybeRunWorker first (os.Args[0] with no arguments).
	Program string
	Args    []string
	// Log, if set, receives progress lines and the workers' warnings.
	Log io.Writer
	// Dir holds the checkpoints (a temporary directory, removed after).
	Dir string
	// Agent lists the action-state stores ("kafka", "wal") of the agent
	// kill runs (RunAgent), one per store after the others; none by
	// default.
	Agent []string
	// AgentInputs (2000) over AgentKeys keys (64) are the agent runs'
	// inputs; CallDelay (5ms) is the side-effect service's time per call;
	// AgentPace (0: Pace) bounds each source task's inputs per second.
	AgentInputs, AgentKeys int
	CallDelay              time.Duration
	AgentPace              int
	// OrderRecords (200000) is the big partition's history in the
	// ordering run (RunOrdering); LoadFor (2s) how long its loader writes
	// to the small partition after the start; OrderPace bounds each
	// source subtask's records per second in it (0: the big partition's
	// history over three times LoadFor, so that it still replays while
	// the loader writes).
	OrderRecords int
	LoadFor      time.Duration
	OrderPace    int
	// RestartMember adds the restart runs after the kill run (Result.Restart,
	// RestartResult): one worker stopped with RestartSignal ("TERM", the
	// default, or "KILL") and started again with the same member name,
	// once with static members and once with dynamic ones, whose group
	// session timeout is RestartSessionTimeout (10s). The worker is
	// started again RestartDelay (2s) after it has exited, as an
	// orchestrator's restart takes a while (a pod's deletion and
	// creation). RestartOnly runs them alone (after the single-process
	// run they are compared with).
	RestartMember         bool
	RestartOnly           bool
	RestartSignal         string
	RestartSessionTimeout time.Duration
	RestartDelay          time.Duration
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 1 {
			return fmt.Errorf("scaleout: %s %d: want an integer >= 1", name, *v)
		}
		return nil
	}
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{{&c.Processes, 3, "processes"}, {&c.Partitions, 8, "partitions"}, {&c.KeyedTasks, 4, "keyed tasks"},
		{&c.Records, 200_000, "records"}, {&c.Keys, 256, "keys"}} {
		if err := def(f.v, f.d, f.name); err != nil {
			return c, err
		}
	}
	if c.Processes < 2 {
		return c, fmt.Errorf("scaleout: processes %d: want at least 2 (one is killed)", c.Processes)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 500 * time.Millisecond
	}
	if c.KillAfter == 0 {
		c.KillAfter = 0.3
	}
	if c.KillAfter < 0 || c.KillAfter >= 1 {
		return c, fmt.Errorf("scaleout: kill after %v of the input: want a share in (0, 1)", c.KillAfter)
	}
	if c.Throughput == nil && !c.NoThroughput {
		c.Throughput = []int{1, 2, 4}
	}
	for _, n := range c.Throughput {
		if n < 1 {
			return c, fmt.Errorf("scaleout: throughput run with %d processes: want at least 1", n)
		}
	}
	if c.ThroughputOnly && len(c.Throughput) == 0 {
		return c, fmt.Errorf("scaleout: throughput only, with no throughput run: want at least one process count")
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Program == "" {
		c.Program = os.Args[0]
	}
	for _, st := range c.Agent {
		if st != "kafka" && st != "wal" {
			return c, fmt.Errorf("scaleout: agent store %q: want kafka or wal", st)
		}
	}
	if err := def(&c.AgentInputs, 2000, "agent inputs"); err != nil {
		return c, err
	}
	if err := def(&c.AgentKeys, 64, "agent keys"); err != nil {
		return c, err
	}
	if c.CallDelay == 0 {
		c.CallDelay = 5 * time.Millisecond
	}
	if c.CallDelay < 0 {
		return c, fmt.Errorf("scaleout: call delay %v: want 0 (meaning 5ms) or a positive duration", c.CallDelay)
	}
	if c.AgentPace == 0 {
		c.AgentPace = c.Pace
	}
	if err := def(&c.OrderRecords, 200_000, "ordering run records"); err != nil {
		return c, err
	}
	if c.LoadFor == 0 {
		c.LoadFor = 2 * time.Second
	}
	if c.LoadFor < 0 {
		return c, fmt.Errorf("scaleout: load for %v: want 0 (meaning 2s) or a positive duration", c.LoadFor)
	}
	switch c.RestartSignal {
	case "":
		c.RestartSignal = "TERM"
	case "TERM", "KILL":
	default:
		return c, fmt.Errorf("scaleout: restart signal %q: want TERM or KILL", c.RestartSignal)
	}
	if c.RestartSessionTimeout == 0 {
		c.RestartSessionTimeout = 10 * time.Second
	}
	if c.RestartSessionTimeout < 0 {
		return c, fmt.Errorf("scaleout: restart session timeout %v: want 0 (meaning 10s) or a positive duration", c.RestartSessionTimeout)
	}
	if c.RestartDelay == 0 {
		c.RestartDelay = 2 * time.Second
	}
	if c.RestartDelay < 0 {
		return c, fmt.Errorf("scaleout: restart delay %v: want 0 (meaning 2s) or a positive duration", c.RestartDelay)
	}
	if c.RestartOnly {
		c.RestartMember = true
	}
	if c.AgentPace < 0 {
		return c, fmt.Errorf("scaleout: agent pace %d: want 0 (the pace of the kill run) or a positive number of inputs per second", c.AgentPace)
	}
	return c, nil
}

// Result is what the experiment measured.
type Result struct {
	// Processes at the start of the kill run; Killed and Added during it.
	Processes int `json:"processes"`
	Killed    int `json:"killed"`
	Added     int `json:"added"`
	// Records of input; Totals the distinct (key, window) totals the
	// single-process run wrote.
	Records int `json:"records"`
	Totals  int `json:"totals"`
	// LostOutputs and DuplicateOutputs compare the kill run's committed
	// totals with the single-process run's.
	LostOutputs               int  `json:"lostOutputs"`
	DuplicateOutputs          int  `json:"duplicateOutputs"`
	ResultsMatchSingleProcess bool `json:"resultsMatchSingleProcess"`
	// KilledTasks is how many unfinished tasks the killed process owned;
	// RebalanceSeconds runs from the kill to the moment every one of them
	// was started by another process.
	KilledTasks      int     `json:"killedTasks"`
	RebalanceSeconds float64 `json:"rebalanceSeconds"`
	// KillRunSeconds is the kill run's duration.
	KillRunSeconds float64 `json:"killRunSeconds"`
	// SingleProcessRecordsPerSec is the local job's (one process, no
	// exchange topic, parallelism 2).
	SingleProcessRecordsPerSec float64 `json:"singleProcessRecordsPerSec"`
	// SingleProcessCPUMicrosPerRecord is that run's CPU time per record,
	// the broker's included (both run in this process).
	SingleProcessCPUMicrosPerRecord float64 `json:"singleProcessCpuMicrosPerRecord"`
	// RecordsPerSecByProcesses is the clustered job's throughput per
	// process count (start of the workers to the end of the last), and
	// ThroughputRunsMatch whether each of those runs' output matched too.
	RecordsPerSecByProcesses map[string]float64 `json:"recordsPerSecByProcesses,omitempty"`
	ThroughputRunsMatch      bool               `json:"throughputRunsMatch"`
	// WorkerCPUMicrosPerRecord and BrokerCPUMicrosPerRecord split the CPU
	// time of each throughput run (user + system) per input record:
	// summed over the worker processes, and of this process, which runs
	// the embedded broker (and little else meanwhile). They are what the
	// cost model in docs/scale-out.md is checked against.
	WorkerCPUMicrosPerRecord map[string]float64 `json:"workerCpuMicrosPerRecord,omitempty"`
	BrokerCPUMicrosPerRecord map[string]float64 `json:"brokerCpuMicrosPerRecord,omitempty"`
	// CPURatioByProcesses is each throughput run's CPU per record
	// (workers and broker) over the local job's (broker included): the
	// exchange's cost, issue 31's figure.
	CPURatioByProcesses map[string]float64 `json:"cpuRatioByProcesses,omitempty"`
	// Agent holds the agent kill runs (Config.Agent), one per store.
	Agent []AgentResult `json:"agent,omitempty"`
	// Ordering is the ordering run (RunOrdering), if it ran.
	Ordering *OrderingResult `json:"ordering,omitempty"`
	// RestartOnly: only the restart runs ran (Config.RestartOnly); the
	// kill run's fields are empty.
	RestartOnly bool `json:"restartOnly,omitempty"`
	// ThroughputOnly: the kill run did not run (Config.ThroughputOnly);
	// its fields are empty.
	ThroughputOnly bool `json:"throughputOnly,omitempty"`
	// Restart holds the restart runs (Config.RestartMember): static
	// members, then dynamic ones.
	Restart []RestartResult `json:"restart,omitempty"`
}

// OK reports whether the run kept exactly-once, the agent runs included.
func (r Result) OK() bool {
	for _, a := range r.Agent {
		if !a.OK() {
			return false
		}
	}
	if r.Ordering != nil && !r.Ordering.OK() {
		return false
	}
	for _, rr := range r.Restart {
		if !rr.OK() {
			return false
		}
	}
	if r.RestartOnly {
		return true
	}
	if r.ThroughputOnly {
		return r.ThroughputRunsMatch
	}
	return r.LostOutputs == 0 && r.DuplicateOutputs == 0 && r.ResultsMatchSingleProcess && r.ThroughputRunsMatch
}

// Run runs the experiment.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "scaleout: "+format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-scaleout-"); err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
	}
	b, err := broker.Start(broker.Options{Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	brokers := b.Addrs()
	const input = "scaleout-in"
	if err := createTopic(ctx, brokers, input, cfg.Partitions); err != nil {
		return Result{}, err
	}
	in := Input{Partitions: cfg.Partitions, Records: cfg.Records, Keys: cfg.Keys, Seed: cfg.Seed, StepMillis: 2}
	logf("producing %d records over %d partitions", cfg.Records, cfg.Partitions)
	if err := Produce(ctx, brokers, input, in); err != nil {
		return Result{}, err
	}
	res := Result{Processes: cfg.Processes, Records: cfg.Records, ThroughputRunsMatch: true}

	// The single-process run: the same job as one local job.
	cpu0 := cputime.Process()
	want, secs, err := runLocal(ctx, cfg, brokers, input)
	if err != nil {
		return res, err
	}
	res.SingleProcessCPUMicrosPerRecord = float64((cputime.Process() - cpu0).Microseconds()) / float64(cfg.Records)
	res.Totals = len(want)
	res.SingleProcessRecordsPerSec = float64(cfg.Records) / secs
	logf("single process: %d totals in %.1fs", len(want), secs)

	spec := func(group string) WorkerSpec {
		return WorkerSpec{Brokers: brokers, Group: group, SourceTopic: input, OutTopic: group + "-out", KeyedTasks: cfg.KeyedTasks,
			CheckpointBase: filepath.Join(dir, group), CheckpointInterval: cfg.CheckpointInterval}
	}
	check := func(s WorkerSpec) (lost, dup int, match bool, err error) {
		got, err := ReadTotals(ctx, brokers, s.OutTopic)
		if err != nil {
			return 0, 0, false, err
		}
		lost, dup = Compare(want, got)
		if lost+dup > 0 {
			logDiff(logf, want, got)
			exchange := cluster.Config{Group: s.Group}.ExchangeTopic()
			d, c, err := exchangeCounts(ctx, brokers, exchange, true)
			logf("exchange topic, committed: data records by producer %v, control records %v (err %v)", d, c, err)
			d, c, err = exchangeCounts(ctx, brokers, exchange, false)
			logf("exchange topic, all: data records by producer %v, control records %v (err %v)", d, c, err)
		}
		return lost, dup, maps.Equal(want, got), nil
	}

	if cfg.RestartOnly {
		res.RestartOnly = true
		res.Restart, err = runRestarts(ctx, cfg, spec, check, logf)
		return res, err
	}

	res.ThroughputOnly = cfg.ThroughputOnly
	if !cfg.ThroughputOnly {
		if err := killAndRestart(ctx, cfg, brokers, &res, spec, check, logf); err != nil {
			return res, err
		}
	}

	// Throughput with 1, 2, 4 processes.
	for _, n := range cfg.Throughput {
		s := spec("tp" + strconv.Itoa(n))
		if err := createTopic(ctx, brokers, s.OutTopic, 2); err != nil {
			return res, err
		}
		start := time.Now()
		selfBefore := cputime.Process()
		g := newGang(ctx, cfg, s)
		for range n {
			g.start()
		}
		if err := g.waitAll(cfg.Timeout); err != nil {
			return res, fmt.Errorf("scaleout: throughput run with %d processes: %w", n, err)
		}
		secs := time.Since(start).Seconds()
		brokerCPU := cputime.Process() - selfBefore
		if res.RecordsPerSecByProcesses == nil {
			res.RecordsPerSecByProcesses = map[string]float64{}
			res.WorkerCPUMicrosPerRecord = map[string]float64{}
			res.BrokerCPUMicrosPerRecord = map[string]float64{}
		}
		key := strconv.Itoa(n)
		res.RecordsPerSecByProcesses[key] = float64(cfg.Records) / secs
		res.WorkerCPUMicrosPerRecord[key] = float64(g.cpu().Microseconds()) / float64(cfg.Records)
		res.BrokerCPUMicrosPerRecord[key] = float64(brokerCPU.Microseconds()) / float64(cfg.Records)
		if res.SingleProcessCPUMicrosPerRecord > 0 {
			if res.CPURatioByProcesses == nil {
				res.CPURatioByProcesses = map[string]float64{}
			}
			res.CPURatioByProcesses[key] = (res.WorkerCPUMicrosPerRecord[key] + res.BrokerCPUMicrosPerRecord[key]) / res.SingleProcessCPUMicrosPerRecord
		}
		lost, dup, match, err := check(s)
		if err != nil {
			return res, err
		}
		res.ThroughputRunsMatch = res.ThroughputRunsMatch && match
		logf("%d processes: %.1fs, %.0f records/s; %d lost, %d duplicated", n, secs, float64(cfg.Records)/secs, lost, dup)
	}

	// The agent kill runs, each on a broker of its own.
	for _, store := range cfg.Agent {
		acfg := cfg
		acfg.Dir = filepath.Join(dir, "agent-"+store)
		ar, err := RunAgent(ctx, acfg, store)
		if err != nil {
			return res, err
		}
		res.Agent = append(res.Agent, ar)
	}
	return res, nil
}

// killAndRestart is the kill run, and the restart runs if asked for.
func killAndRestart(ctx context.Context, cfg Config, brokers []string, res *Result, spec func(string) WorkerSpec,
	check func(WorkerSpec) (int, int, bool, error), logf func(string, ...any)) error {
	s := spec("kill")
	s.Pace = cfg.Pace
	if err := createTopic(ctx, brokers, s.OutTopic, 2); err != nil {
		return err
	}
	kr, err := killRun(ctx, cfg, s, logf, nil)
	if err != nil {
		return err
	}
	res.Killed, res.Added, res.KilledTasks, res.RebalanceSeconds, res.KillRunSeconds = kr.killed, kr.added, kr.killedTasks, kr.rebalance, kr.seconds
	if res.LostOutputs, res.DuplicateOutputs, res.ResultsMatchSingleProcess, err = check(s); err != nil {
		return err
	}
	logf("kill run: %d lost, %d duplicated, match %v", res.LostOutputs, res.DuplicateOutputs, res.ResultsMatchSingleProcess)

	if cfg.RestartMember {
		if res.Restart, err = runRestarts(ctx, cfg, spec, check, logf); err != nil {
			return err
		}
	}
	return nil
}

// runLocal runs the job as one local job and returns its totals and its
// duration.
func runLocal(ctx context.Context, cfg Config, brokers []string, input string) (map[Total]int, float64, error) {
	const out = "scaleout-local-out"
	if err := createTopic(ctx, brokers, out, 2); err != nil {
		return nil, 0, err
	}
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: slog.New(slog.DiscardHandler)})
	ccfg := cluster.Config{Brokers: brokers, Group: "scaleout-local", SourceTopic: input}
	if err := cluster.BuildLocal(env, ccfg, WindowJob(out, 0), stop); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := env.Execute(ctx); err != nil {
		return nil, 0, fmt.Errorf("scaleout: single-process run: %w", err)
	}
	secs := time.Since(start).Seconds()
	want, err := ReadTotals(ctx, brokers, out)
	if err != nil {
		return nil, 0, err
	}
	if len(want) == 0 {
		return nil, 0, errors.New("scaleout: the single-process run wrote nothing")
	}
	return want, secs, nil
}

type killResult struct {
	killed, added, killedTasks int
	killedKeyed                int // keyed tasks among killedTasks
	rebalance, seconds         float64
	evs                        []cluster.TaskEvent // every task event of the run
}

// killRun starts cfg.Processes workers, kills one with SIGKILL once
// cfg.KillAfter of the input has reached the exchange topic (or, with
// progressed, once it reports true), waits until its tasks run
// elsewhere, adds a worker, and waits for the job to end.
func killRun(ctx context.Context, cfg Config, s WorkerSpec, logf func(string, ...any), progressed func() bool) (killResult, error) {
	var kr killResult
	// Created here (the workers would), so that the progress check sees
	// it from the start.
	exchange := cluster.Config{Group: s.Group}.ExchangeTopic()
	if err := createTopic(ctx, s.Brokers, exchange, s.KeyedTasks); err != nil {
		return kr, err
	}
	start := time.Now()
	g := newGang(ctx, cfg, s)
	for range cfg.Processes {
		g.start()
	}
	deadline := time.Now().Add(cfg.Timeout)
	if err := g.waitProgress(ctx, exchange, deadline, logf, progressed); err != nil {
		return kr, err
	}
	victim, tasks := g.busiest()
	if victim == nil {
		g.killAll()
		own, fin := g.owners()
		return kr, fmt.Errorf("scaleout: no worker owned an unfinished task to kill (owners %v, finished %v, events %+v, ended %v)", own, fin, g.evs, g.errs())
	}
	killAt := time.Now()
	victim.cmd.Process.Signal(syscall.SIGKILL)
	kr.killed, kr.killedTasks = 1, len(tasks)
	for _, t := range tasks {
		if strings.HasPrefix(t, "keyed-") {
			kr.killedKeyed++
		}
	}
	logf("killed %s (pid %d) owning %v", victim.name, victim.cmd.Process.Pid, tasks)
	for {
		at, ok := g.retaken(tasks, victim.name, killAt)
		if ok {
			kr.rebalance = at.Sub(killAt).Seconds()
			break
		}
		if time.Now().After(deadline) {
			g.killAll()
			return kr, fmt.Errorf("scaleout: the killed process's tasks %v were not taken over", tasks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	logf("tasks of the killed process running again after %.2fs; adding a process", kr.rebalance)
	g.start()
	kr.added = 1
	if err := g.waitAll(time.Until(deadline)); err != nil {
		return kr, err
	}
	kr.seconds = time.Since(start).Seconds()
	g.mu.Lock()
	kr.evs = append([]cluster.TaskEvent(nil), g.evs...)
	g.mu.Unlock()
	return kr, nil
}

// waitProgress waits until cfg.KillAfter of the input has reached the
// exchange topic (or, with progressed, until it reports true), or a
// worker has ended (a tiny input).
func (g *gang) waitProgress(ctx context.Context, exchange string, deadline time.Time, logf func(string, ...any), progressed func() bool) error {
	// The values written to the exchange topic, committed or not, counted
	// as they arrive (they travel in batches: its offsets do not say).
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.spec.Brokers...), kgo.ConsumeTopics(exchange),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var values int
	for {
		if time.Now().After(deadline) {
			g.killAll()
			return errors.New("scaleout: the run made no progress")
		}
		if progressed != nil {
			if progressed() {
				return nil
			}
		} else {
			pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { values += cluster.ExchangeValues(r.Headers, r.Value) })
			cancel()
			if float64(values) >= g.cfg.KillAfter*float64(g.cfg.Records) {
				return nil
			}
		}
		if n := g.exited(); n > 0 {
			logf("%d workers ended before the kill: %v", n, g.errs())
			return nil // already done (a tiny input): kill what is left anyway
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gang is the worker processes of one run and the task events they
// printed.
type gang struct {
	ctx  context.Context
	cfg  Config
	spec WorkerSpec
	mu   sync.Mutex
	ws   []*worker
	evs  []cluster.TaskEvent
}

type worker struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	killed bool
}

func newGang(ctx context.Context, cfg Config, s WorkerSpec) *gang {
	return &gang{ctx: ctx, cfg: cfg, spec: s}
}

// start starts one more worker.
func (g *gang) start() {
	g.mu.Lock()
	name := fmt.Sprintf("%s-w%d", g.spec.Group, len(g.ws))
	g.mu.Unlock()
	g.startNamed(name)
}

// startNamed starts a worker with the member name name (a restart: the
// name of a worker that has ended).
func (g *gang) startNamed(name string) {
	s := g.spec
	s.Member = name
	js, _ := json.Marshal(s)
	cmd := exec.Command(g.cfg.Program, g.cfg.Args...)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	if g.cfg.Log != nil {
		cmd.Stderr = g.cfg.Log
	}
	out, err := cmd.StdoutPipe()
	w := &worker{name: name, cmd: cmd, done: make(chan struct{})}
	if err == nil {
		err = cmd.Start()
	}
	g.mu.Lock()
	g.ws = append(g.ws, w)
	g.mu.Unlock()
	if err != nil {
		w.err = err
		close(w.done)
		return
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev cluster.TaskEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				g.mu.Lock()
				g.evs = append(g.evs, ev)
				g.mu.Unlock()
			}
		}
		w.err = cmd.Wait()
		close(w.done)
	}()
}

// owners returns, per task, the worker running it now (by the events),
// and the tasks that have finished.
func (g *gang) owners() (map[string]string, map[string]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	own, fin := map[string]string{}, map[string]bool{}
	for _, ev := range g.evs {
		switch ev.Kind {
		case cluster.TaskStarted:
			own[ev.Task] = ev.Member
		case cluster.TaskStopped, cluster.TaskFailed:
			if own[ev.Task] == ev.Member {
				delete(own, ev.Task)
			}
		case cluster.TaskFinished:
			fin[ev.Task] = true
			delete(own, ev.Task)
		}
	}
	return own, fin
}

// score ranks a worker's tasks for the kill: a worker running tasks of
// both stages first, then one running a keyed task, then the one running
// the most.
func score(tasks []string) int {
	src, keyed := 0, 0
	for _, t := range tasks {
		if strings.HasPrefix(t, "keyed-") {
			keyed++
		} else {
			src++
		}
	}
	n := len(tasks)
	if src > 0 && keyed > 0 {
		n += 1000
	}
	if keyed > 0 {
		n += 500
	}
	return n
}

// busiest returns the live worker to kill: the one running tasks of both
// stages, and of those the most unfinished tasks.
func (g *gang) busiest() (*worker, []string) {
	own, _ := g.owners()
	count := map[string][]string{}
	for t, m := range own {
		count[m] = append(count[m], t)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var best *worker
	for _, w := range g.ws {
		select {
		case <-w.done:
			continue
		default:
		}
		if len(count[w.name]) > 0 && (best == nil || score(count[w.name]) > score(count[best.name])) {
			best = w
		}
	}
	if best == nil {
		return nil, nil
	}
	best.killed = true
	return best, count[best.name]
}

// retaken reports when every one of tasks was started (or found finished)
// by a worker other than victim after at.
func (g *gang) retaken(tasks []string, victim string, at time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var last time.Time
	for _, t := range tasks {
		found := false
		for _, ev := range g.evs {
			if ev.Task == t && ev.Member != victim && ev.Time >= at.UnixMilli() &&
				(ev.Kind == cluster.TaskStarted || ev.Kind == cluster.TaskFinished) {
				found = true
				if et := time.UnixMilli(ev.Time); et.After(last) {
					last = et
				}
				break
			}
		}
		if !found {
			return time.Time{}, false
		}
	}
	return last, true
}

// exited counts the workers that have ended.
func (g *gang) exited() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, w := range g.ws {
		select {
		case <-w.done:
			n++
		default:
		}
	}
	return n
}

// errs lists the errors of the workers that have ended.
func (g *gang) errs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, w := range g.ws {
		select {
		case <-w.done:
			out = append(out, fmt.Sprintf("%s: %v", w.name, w.err))
		default:
		}
	}
	return out
}

// waitAll waits for every worker to end; a worker that was not killed
// must end without error.
func (g *gang) waitAll(timeout time.Duration) error {
	g.mu.Lock()
	ws := append([]*worker(nil), g.ws...)
	g.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-timer.C:
			g.killAll()
			return errors.New("scaleout: the workers did not finish in time")
		case <-g.ctx.Done():
			g.killAll()
			return g.ctx.Err()
		}
		if w.err != nil && !w.killed {
			g.killAll()
			return fmt.Errorf("scaleout: worker %s: %w", w.name, w.err)
		}
	}
	return nil
}

// cpu is the CPU time (user + system) of the workers that have ended.
func (g *gang) cpu() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	var d time.Duration
	for _, w := range g.ws {
		if st := w.cmd.ProcessState; st != nil {
			d += st.UserTime() + st.SystemTime()
		}
	}
	return d
}

// terminate asks every worker still running to hand its tasks over and
// leave (SIGTERM); waitAll waits for them.
func (g *gang) terminate() {
	g.mu.Lock()
	ws := append([]*worker(nil), g.ws...)
	g.mu.Unlock()
	for _, w := range ws {
		if w.cmd.Process != nil {
			w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}

// killAll kills every worker still running and waits for them.
func (g *gang) killAll() {
	g.mu.Lock()
	ws := append([]*worker(nil), g.ws...)
	g.mu.Unlock()
	for _, w := range ws {
		if w.cmd.Process != nil {
			w.cmd.Process.Signal(syscall.SIGKILL)
		}
		<-w.done
	}
}

func admin(brokers []string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func createTopic(ctx context.Context, brokers []string, name string, parts int) error {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return err
	}
	defer closeAdm()
	resp, err := adm.CreateTopic(ctx, int32(parts), -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("scaleout: create topic %s: %w", name, err)
	}
	return nil
}

// logDiff logs a few (key, window) pairs whose totals differ.
func logDiff(logf func(string, ...any), want, got map[Total]int) {
	type kw struct {
		key   string
		start int64
	}
	w, g := map[kw][]Total{}, map[kw][]Total{}
	for t, n := range want {
		for range n {
			w[kw{t.Key, t.Start}] = append(w[kw{t.Key, t.Start}], t)
		}
	}
	for t, n := range got {
		for range n {
			g[kw{t.Key, t.Start}] = append(g[kw{t.Key, t.Start}], t)
		}
	}
	shown := 0
	for k, ws := range w {
		if fmt.Sprint(ws) != fmt.Sprint(g[k]) && shown < 10 {
			shown++
			logf("differs: %s window %d: want %v, got %v", k.key, k.start, ws, g[k])
		}
	}
}
