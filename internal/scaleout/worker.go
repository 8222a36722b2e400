package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/cluster"
)

// WorkerEnv is the environment variable that makes a program started by
// the experiment run one worker (MaybeRunWorker) instead of its usual work.
const WorkerEnv = "WEIR_SCALEOUT_WORKER"

// WorkerSpec is what a worker process is told, as JSON in WorkerEnv.
type WorkerSpec struct {
	Brokers            []string      `json:"brokers"`
	Group              string        `json:"group"`
	SourceTopic        string        `json:"sourceTopic"`
	OutTopic           string        `json:"outTopic"`
	KeyedTasks         int           `json:"keyedTasks"`
	CheckpointBase     string        `json:"checkpointBase"`
	CheckpointInterval time.Duration `json:"checkpointInterval"`
	Member             string        `json:"member"`
	// Static makes the worker a static member of the group (its Member
	// the group instance id; cluster.Config.StaticMembership).
	Static bool `json:"static,omitempty"`
	// SessionTimeout is the group session timeout (0: SessionTimeout).
	SessionTimeout time.Duration `json:"sessionTimeout,omitempty"`
	// Pace bounds each source task's records per second (0: no bound).
	Pace int `json:"pace,omitempty"`
	// Agent, if set, makes the worker run AgentJob instead of WindowJob.
	Agent *AgentSpec `json:"agent,omitempty"`
	// Ordering makes the worker run OrderingJob, unbounded (until
	// SIGTERM), instead of WindowJob.
	Ordering bool `json:"ordering,omitempty"`
}

// config is the cluster configuration of a worker (and of the reference
// run, which uses its Brokers, Group and SourceTopic).
func (s WorkerSpec) config() cluster.Config {
	cfg := cluster.Config{Brokers: s.Brokers, Group: s.Group, SourceTopic: s.SourceTopic, KeyedTasks: s.KeyedTasks,
		CheckpointBase: s.CheckpointBase, CheckpointInterval: s.CheckpointInterval, Bounded: true,
		SessionTimeout: SessionTimeout, HeartbeatInterval: 300 * time.Millisecond, Member: s.Member,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if s.Ordering {
		cfg.Bounded = false
	}
	cfg.StaticMembership = s.Static
	if s.SessionTimeout > 0 {
		cfg.SessionTimeout = s.SessionTimeout
	}
	if os.Getenv("WEIR_SCALEOUT_DEBUG") != "" {
		cfg.ClientOptions = []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return s.Member + " " }))}
	}
	return cfg
}

// SessionTimeout is the workers' group session timeout.
const SessionTimeout = 3 * time.Second

// MaybeRunWorker runs a worker and exits if the process was started as one
// (WorkerEnv set); otherwise it returns at once. A worker runs its share of
// the clustered WindowJob (or AgentJob) until every task has finished, printing each
// task event to stdout as a JSON line; SIGTERM makes it hand its tasks over
// and leave.
func MaybeRunWorker() {
	spec := os.Getenv(WorkerEnv)
	if spec == "" {
		return
	}
	var s WorkerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "scaleout: %s: %v\n", WorkerEnv, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg := s.config()
	stopProfile := func() {}
	if dir := os.Getenv(ProfileEnv); dir != "" {
		var err error
		if stopProfile, err = startProfile(dir, s.Member); err != nil {
			fmt.Fprintf(os.Stderr, "scaleout: %s: %v\n", ProfileEnv, err)
			stopProfile = func() {}
		}
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	cfg.OnTask = func(ev cluster.TaskEvent) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(ev)
	}
	var err error
	switch {
	case s.Agent != nil:
		err = cluster.Run(ctx, cfg, AgentJob(s.OutTopic, *s.Agent))
	case s.Ordering:
		err = cluster.Run(ctx, cfg, OrderingJob(s.OutTopic, s.Pace))
	default:
		err = cluster.Run(ctx, cfg, WindowJob(s.OutTopic, s.Pace))
	}
	stopProfile()
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "scaleout worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ProfileEnv, set to a directory in the experiment's environment, makes
// each worker write a CPU profile (MEMBER.cpu.pprof) and an allocation
// profile (MEMBER.allocs.pprof) of its run there, for issue 31's
// investigation of the exchange's cost.
const ProfileEnv = "WEIR_SCALEOUT_PROFILE"

func startProfile(dir, member string) (func(), error) {
	f, err := os.Create(filepath.Join(dir, member+".cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if a, err := os.Create(filepath.Join(dir, member+".allocs.pprof")); err == nil {
			pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}, nil
}
