package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/health"
	"github.com/weirproject/weir/internal/lockedwriter"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/window"
)

// ClusterOptions configure RunCluster: a pipeline run as one clustered job
// (package cluster) over every process started with the same file and the
// same Group, KeyedTasks and checkpoint location. Group is required; every
// other field has a default.
type ClusterOptions struct {
	// Group names the job: the Kafka consumer group the processes join,
	// and the prefix of the job's internal topics ("<Group>-exchange",
	// "<Group>-tasks") and transactional ids. Two jobs need two groups.
	Group string
	// KeyedTasks is the number of keyed tasks: the most processes that
	// share the keyed work; fixed for the life of the job's checkpoints.
	// Default 4.
	KeyedTasks int
	// CheckpointBase, if set, overrides job.checkpoint.dir: where every
	// task's checkpoints go, a URL (s3://, gs://, azblob://) or a
	// directory that every process reaches.
	CheckpointBase string
	// Member names this process in the group and in task events; default
	// "<hostname>-<pid>".
	Member string
	// StaticMembership makes this process a static member of the group,
	// its group.instance.id Member (cluster.Config.StaticMembership): a
	// restart within SessionTimeout gets its tasks back and moves no
	// other process's; a stop leaves its tasks unowned until then, unless
	// LeaveOnStop. Needs Member. Default false (weir run --group turns it
	// on when --member is given).
	StaticMembership bool
	// LeaveOnStop makes a static member leave the group when it is
	// stopped, so that its tasks move at once: for a stop for good
	// (cluster.Config.LeaveOnStop). Only with StaticMembership.
	LeaveOnStop bool
	// SessionTimeout is the group's session timeout: how long after a
	// process dies its tasks move. The brokers must allow it
	// (group.min.session.timeout.ms). Default 3s.
	SessionTimeout time.Duration
	// HeartbeatInterval is the group's heartbeat interval; default 300ms.
	HeartbeatInterval time.Duration
	// ExchangeVersion is the batch version this process's source tasks
	// write to the exchange topic (cluster.Config.ExchangeVersion): 0
	// the newest, 1 the JSON batches every build reads, for a group
	// upgraded process by process from a build before version 2.
	ExchangeVersion int
	// Stdout receives the records of stdout outputs; nil means os.Stdout.
	Stdout io.Writer
	// Logger receives the tasks' and the group's logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// OnTask, if set, is called (one call at a time) when a task of this
	// process starts, stops, fails or finishes.
	OnTask func(cluster.TaskEvent)
	// Advertise, if set, is the URL of this process's dashboard, shown to
	// the other members (cluster.Config.Advertise).
	Advertise string
	// OnGroup, if set, receives a function that describes the group: its
	// members, their tasks and Advertise URLs (cluster.Config.OnGroup).
	OnGroup func(describe func(context.Context) ([]cluster.GroupMember, error))
	// MetricsAddr, when set, overrides job.metricsAddr: this process
	// serves the metrics of the tasks it runs there (Prometheus, package
	// metrics), each series with a label task naming its task; a task
	// handed over leaves this process's series.
	MetricsAddr string
	// HealthAddr, when set, overrides job.healthAddr: /healthz and
	// /readyz on an address of their own (they are also served beside
	// /metrics). Ready once this process is in the group and every task
	// the group gave it runs (package health).
	HealthAddr string
	// RestoreFrom, if set, is a group savepoint every task restores from
	// while it has no checkpoint of its own under the checkpoint location
	// (cluster.Config.RestoreFrom): the checkpoint location of this job
	// (the same Group and KeyedTasks) after every process stopped, or a
	// copy of it. Give every process the same one.
	RestoreFrom string
}

// clusterPlan is a pipeline split at its keyBy (the only one, CheckCluster
// makes sure): the steps before it run in the source tasks, the keyed step
// and the steps after it in the keyed tasks.
type clusterPlan struct {
	before []StepSpec
	key    fieldPath
	keyed  *StepSpec
	after  []StepSpec
}

func planOf(s *Spec) (clusterPlan, bool) {
	for i := range s.Steps {
		if s.Steps[i].Kind == "keyBy" && i+1 < len(s.Steps) {
			kp, _ := parseFieldPath(s.Steps[i].KeyBy) // checked by Parse
			return clusterPlan{before: s.Steps[:i], key: kp, keyed: &s.Steps[i+1], after: s.Steps[i+2:]}, true
		}
	}
	return clusterPlan{}, false
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// clusterRun is one process's part in a pipeline run in group mode: it
// builds the tasks' jobs when package cluster asks (Upstream and Keyed
// run on the goroutines that start tasks, several at a time) and keeps
// what each build made, to sum their metrics at the end.
type clusterRun struct {
	ctx     context.Context
	spec    *Spec
	opts    ClusterOptions
	plan    clusterPlan
	brokers []string
	stdout  *lockedwriter.Writer
	log     io.Writer
	formats clusterFormat // source.kafka.format and sink.kafka.format (pipeline/format.go)
	mu      struct {
		sync.Mutex
		builds  []taskBuild
		started map[string]int
		// running is the latest build of each task running in this
		// process (its metrics are served).
		running map[string]*weir.Environment
		// closers are the latest build's of each task (MCP servers an
		// agent step connected), closed when the task is built again
		// (its previous job has ended) and when RunCluster returns.
		closers map[string][]func() error
		// synced is set at the group's first assignment; owned are the
		// tasks it gave this process, each with its latest event
		// ("" until it starts): the readiness probe's input.
		synced bool
		owned  map[string]cluster.TaskEventKind
	}
}

// onAssignment records the tasks the group gave this process.
func (r *clusterRun) onAssignment(tasks []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.synced = true
	owned := make(map[string]cluster.TaskEventKind, len(tasks))
	for _, t := range tasks {
		owned[t] = r.mu.owned[t]
	}
	r.mu.owned = owned
}

// status is the readiness of this process: in the group, and every task
// it owns running (or finished).
func (r *clusterRun) status() health.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.synced {
		return health.Status{Alive: true, Reason: "joining group " + r.opts.Group}
	}
	if len(r.mu.owned) == 0 {
		return health.Status{Alive: true, Ready: true, Reason: "in group " + r.opts.Group + ", no task assigned (the group has more members than tasks)"}
	}
	for _, t := range sortedKeys(r.mu.owned) {
		switch k := r.mu.owned[t]; k {
		case cluster.TaskStarted, cluster.TaskFinished:
		case "":
			return health.Status{Alive: true, Reason: "task " + t + " is starting (restoring its state)"}
		default:
			return health.Status{Alive: true, Reason: "task " + t + " " + string(k)}
		}
	}
	return health.Status{Alive: true, Ready: true, Reason: fmt.Sprintf("in group %s, running %d tasks", r.opts.Group, len(r.mu.owned))}
}

// RunCluster runs spec as one clustered job (package cluster) over every
// process that runs it with the same file and options (Group, KeyedTasks,
// checkpoint location), and returns when this process leaves the job:
// with a bounded source, once every task of the job has finished (in
// whichever process); otherwise when ctx is cancelled, which checkpoints
// this process's tasks, hands them over and leaves the group (not an
// error: the summary says stopped).
//
// The pipeline is split at its keyBy: the source and the steps before the
// keyBy run in one source task per partition of the source topic, which
// sends each record (as JSON) to the keyed task owning its key group
// through the exchange topic "<Group>-exchange"; the keyed step and what
// follows run in the keyed tasks, which write the main sink through the
// exactly-once Kafka sink. The committed output equals that of the same
// pipeline run by Run, provided no record is late in either (cluster
// guarantee C1). Each exactly-once Kafka sink of a task has transactional
// ids of its own: the sink's prefix (transactionalIdPrefix, default
// weir-NAME-SINK), then "-<Group>-<task>".
//
// CheckCluster's problems come back before any work; then, as Build,
// topics the cluster lacks (an Errors). log receives a line when the
// process joins, one per task event, and the summary; nil means none. The
// summary counts what this process's tasks did, replays after restores
// included; Tasks lists them.
func RunCluster(ctx context.Context, spec *Spec, opts ClusterOptions, log io.Writer) (s Summary, err error) {
	if log == nil {
		log = io.Discard
	}
	s = Summary{Pipeline: spec.Name, Outputs: map[string]int64{}, Group: opts.Group}
	if s.Pipeline == "" {
		s.Pipeline = spec.File
	}
	if err := CheckCluster(spec, opts); err != nil {
		return s, err
	}
	plan, _ := planOf(spec)
	brokers := spec.Kafka.Brokers
	sec := spec.Kafka.Security
	sec.Logger = opts.Logger
	if err := sec.Validate(); err != nil {
		return s, securityError(spec.Kafka, err)
	}
	if err := checkTopics(ctx, spec, brokers, sec); err != nil {
		return s, err
	}
	formats, ferr := clusterFormats(ctx, spec)
	if ferr != nil {
		return s, ferr
	}
	stdout := opts.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	r := &clusterRun{ctx: ctx, spec: spec, opts: opts, plan: plan, brokers: brokers, stdout: lockedwriter.New(stdout), log: log, formats: formats}
	r.mu.started = map[string]int{}
	r.mu.running = map[string]*weir.Environment{}
	r.mu.closers = map[string][]func() error{}
	defer func() {
		if cerr := r.closeAll(); cerr != nil && err == nil {
			err = fmt.Errorf("pipeline: %s: closing: %w", s.Pipeline, cerr)
		}
	}()
	if err := r.dryBuild(); err != nil {
		return s, err
	}
	if opts.Member == "" {
		host, _ := os.Hostname()
		opts.Member = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	s.Member = opts.Member
	base := spec.Job.CheckpointDir
	if opts.CheckpointBase != "" {
		base = opts.CheckpointBase
	}
	k := spec.Source.Kafka
	cfg := cluster.Config{Brokers: brokers, Security: sec, Group: opts.Group, SourceTopic: k.Topics[0], SourceReadCommitted: k.ReadCommitted,
		KeyedTasks: opts.KeyedTasks, MaxParallelism: spec.Job.MaxParallelism, CheckpointBase: base,
		CheckpointInterval: spec.Job.CheckpointInterval, Bounded: k.Bounded, SessionTimeout: opts.SessionTimeout,
		HeartbeatInterval: opts.HeartbeatInterval, ExchangeVersion: opts.ExchangeVersion, Member: opts.Member, StaticMembership: opts.StaticMembership, LeaveOnStop: opts.LeaveOnStop,
		Logger: opts.Logger, OnTask: r.onTask,
		RestoreFrom: opts.RestoreFrom, Advertise: opts.Advertise, OnGroup: opts.OnGroup, OnAssignment: r.onAssignment}
	keyedTasks := opts.KeyedTasks
	if keyedTasks == 0 {
		keyedTasks = 4
	}
	addr := spec.Job.MetricsAddr
	if opts.MetricsAddr != "" {
		addr = opts.MetricsAddr
	}
	served := ""
	var probe health.Probe
	probe.Watch(r.status)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return s, fmt.Errorf("pipeline: metrics: %w", err)
		}
		srv := &http.Server{Handler: health.Mux(&probe, metrics.HandlerOf(r.metrics)), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		served = "; metrics on http://" + ln.Addr().String() + "/metrics (and /healthz, /readyz)"
	}
	haddr := spec.Job.HealthAddr
	if opts.HealthAddr != "" {
		haddr = opts.HealthAddr
	}
	if haddr != "" {
		ln, err := net.Listen("tcp", haddr)
		if err != nil {
			return s, fmt.Errorf("pipeline: health: %w", err)
		}
		srv := &http.Server{Handler: health.Mux(&probe, nil), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		served += "; health on http://" + ln.Addr().String() + "/healthz and /readyz"
	}
	static := ""
	if opts.StaticMembership {
		static = " (static)"
	}
	fmt.Fprintf(log, "weir run: %s: group %s, member %s%s: %s; %d keyed tasks, checkpoints in %s%s\n",
		s.Pipeline, opts.Group, opts.Member, static, Describe(spec), keyedTasks, base, served)
	start := time.Now()
	err = cluster.Run(ctx, cfg, r.job())
	s.Elapsed = time.Since(start)
	if err != nil {
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			return s, err
		}
		s.Stopped = true
	}
	infos := r.summarize(&s)
	s.addDropped(spec)
	fmt.Fprintf(log, "weir run: %s %s after %v (group %s, member %s): %d records from the source in this process\n", s.Pipeline,
		map[bool]string{false: "finished", true: "stopped"}[s.Stopped], s.Elapsed.Round(time.Millisecond), s.Group, s.Member, s.SourceRecords)
	for _, si := range infos {
		fmt.Fprintf(log, "  %-20s %8d records to %s\n", si.Output, s.Outputs[si.Output], si.Describe)
	}
	var tasks []string
	for _, t := range sortedKeys(s.Tasks) {
		if n := s.Tasks[t]; n > 1 {
			t = fmt.Sprintf("%s (%d starts)", t, n)
		}
		tasks = append(tasks, t)
	}
	fmt.Fprintf(log, "  %-20s %s\n", "tasks run here", listOrNone(tasks))
	s.report(log)
	if s.CheckpointsCompleted > 0 {
		fmt.Fprintf(log, "  checkpoints          %8d completed\n", s.CheckpointsCompleted)
	}
	return s, nil
}

// metrics returns the metrics of the tasks running in this process, each
// with a first label task.
func (r *clusterRun) metrics() []runtime.Metric {
	r.mu.Lock()
	envs := maps.Clone(r.mu.running)
	r.mu.Unlock()
	var out []runtime.Metric
	for _, task := range sortedKeys(envs) {
		for _, m := range envs[task].Metrics().Snapshot() {
			m.Labels = append([]runtime.Label{{Name: "task", Value: task}}, m.Labels...)
			out = append(out, m)
		}
	}
	return out
}

// onTask prints a task event and counts the starts.
func (r *clusterRun) onTask(ev cluster.TaskEvent) {
	line := "weir run: task " + ev.Task + " " + string(ev.Kind)
	switch {
	case ev.Kind == cluster.TaskStarted && ev.Restored != "":
		line += ", restored from " + ev.Restored
	case ev.Kind == cluster.TaskStarted:
		line += ", fresh"
	case ev.Err != "":
		line += ": " + ev.Err
	}
	fmt.Fprintln(r.log, line)
	r.mu.Lock()
	if _, ok := r.mu.owned[ev.Task]; ok {
		r.mu.owned[ev.Task] = ev.Kind
		if ev.Kind == cluster.TaskRevoked {
			delete(r.mu.owned, ev.Task) // the group took it
		}
	}
	r.mu.Unlock()
	switch ev.Kind {
	case cluster.TaskStarted:
		r.mu.Lock()
		r.mu.started[ev.Task]++
		r.mu.Unlock()
	case cluster.TaskStopped:
		// Handed over: its new owner reports it from now on.
		r.mu.Lock()
		delete(r.mu.running, ev.Task)
		r.mu.Unlock()
	}
	if r.opts.OnTask != nil {
		r.opts.OnTask(ev)
	}
}

// summarize sums the metrics of every task build of this process into s
// and returns the outputs, the main sink first.
func (r *clusterRun) summarize(s *Summary) []SinkInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	infos := []SinkInfo{{Output: "sink", Operator: "sink", Describe: "Kafka topic " + r.spec.Sink.Kafka.Topic + " (exactly once)"}}
	for _, name := range sortedKeys(r.spec.Outputs) {
		infos = append(infos, SinkInfo{Output: name, Describe: describeSink(r.spec.Outputs[name].Sink)})
	}
	s.Tasks = map[string]int{}
	for t, n := range r.mu.started {
		s.Tasks[t] = n
	}
	for _, si := range infos {
		s.Outputs[si.Output] = 0
	}
	for _, tb := range r.mu.builds {
		m := tb.env.Metrics()
		if tb.countOp != "" {
			s.SourceRecords += m.Sum(tb.countOp, "recordsIn")
		}
		s.CheckpointsCompleted += m.Sum("job", "checkpointsCompleted")
		if strings.HasPrefix(tb.task, "keyed-") {
			s.Outputs["sink"] += m.Sum("sink", "recordsIn")
		}
		for _, si := range tb.sinks {
			s.Outputs[si.Output] += m.Sum(si.Operator, "recordsIn")
		}
		for _, op := range tb.failing {
			s.DeadLetters += m.Sum(op, "deadLetters")
			s.DeadLettersDropped += m.Sum(op, "deadLettersDropped")
		}
		s.subtractRejected(m, tb.sinks, tb.rejecting)
		if tb.sourceOp != "" {
			s.SourceDeadLetters += m.Sum(tb.sourceOp, "deadLetters")
		}
		for _, op := range tb.windows {
			s.LateDropped += m.Sum(op, window.CounterLateDropped) - m.Sum(op, window.CounterLateOutput)
		}
	}
	return infos
}

// describeSink says where a sink's records go.
func describeSink(s *SinkSpec) string {
	switch {
	case s.Stdout:
		return "stdout"
	case s.Kafka != nil && s.Kafka.Delivery == "exactly-once":
		return "Kafka topic " + s.Kafka.Topic + " (exactly once)"
	case s.Kafka != nil:
		return "Kafka topic " + s.Kafka.Topic + " (at least once)"
	case s.File != nil && s.File.Dir != "":
		return "files in " + s.File.Dir
	case s.File != nil:
		return s.File.Path
	case s.Parquet != nil:
		return describeParquet(s.Parquet)
	case s.Postgres != nil:
		return describePostgres(s.Postgres)
	case s.HTTP != nil:
		return "HTTP " + s.HTTP.URL
	}
	return "?"
}
