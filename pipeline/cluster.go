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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/health"
	"github.com/weirproject/weir/keygroup"
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

// CheckCluster reports whether spec can run in group mode with o, before
// any work: a bad option is an error naming the ClusterOptions field; a
// file that group mode cannot run is an Errors, one line per problem,
// naming file:line:column, what is wrong and what is accepted. Group mode
// runs:
//
//   - a Kafka source (kafka.brokers, not kafka.embedded: every process
//     would start its own broker) with exactly one topic, starting at the
//     earliest offsets (each task then goes on from its checkpoints);
//   - exactly one keyBy, with only filter, map and tee steps before it;
//     sort, window or agent after it (an agent's store, if any, is per
//     keyed task: docs/agents.md, "Agents in a clustered job");
//   - a main sink to Kafka with delivery exactly-once;
//   - named outputs whose steps are filter, map and tee, and whose sink
//     is Kafka (exactly-once sinks get transactional ids of their own per
//     task) or stdout (each process prints what its tasks send);
//   - a checkpoint location (job.checkpoint.dir or o.CheckpointBase), in
//     exactly-once mode, with keyed state in memory; no job.restoreFrom
//     or job.autoWatermarkInterval. job.parallelism is
//     ignored: each task runs at parallelism 1, and the tasks spread over
//     the processes.
func CheckCluster(spec *Spec, o ClusterOptions) error {
	var oerrs []error
	if o.Group == "" || strings.ContainsAny(o.Group, " /\\") {
		oerrs = append(oerrs, fmt.Errorf("pipeline: ClusterOptions.Group %q: want a non-empty name without spaces or slashes", o.Group))
	}
	if o.KeyedTasks < 0 {
		oerrs = append(oerrs, fmt.Errorf("pipeline: ClusterOptions.KeyedTasks %d: want 0 (meaning 4) or more", o.KeyedTasks))
	}
	if o.SessionTimeout < 0 || o.HeartbeatInterval < 0 {
		oerrs = append(oerrs, fmt.Errorf("pipeline: ClusterOptions.SessionTimeout %v, HeartbeatInterval %v: want 0 (the default) or more", o.SessionTimeout, o.HeartbeatInterval))
	}
	if o.StaticMembership && o.Member == "" {
		oerrs = append(oerrs, errors.New("pipeline: ClusterOptions.StaticMembership needs ClusterOptions.Member, a name that stays the same across restarts (the default, <hostname>-<pid>, changes at every start)"))
	}
	if o.LeaveOnStop && !o.StaticMembership {
		oerrs = append(oerrs, errors.New("pipeline: ClusterOptions.LeaveOnStop is only for a static member (ClusterOptions.StaticMembership); a dynamic member always leaves"))
	}
	if o.CheckpointBase != "" {
		if err := checkpoint.CheckLocation(o.CheckpointBase); err != nil {
			oerrs = append(oerrs, fmt.Errorf("pipeline: ClusterOptions.CheckpointBase: %w", err))
		}
	}
	if o.RestoreFrom != "" {
		if err := checkRestore(o); err != nil {
			oerrs = append(oerrs, err)
		}
	}
	if len(oerrs) > 0 {
		return errors.Join(oerrs...)
	}

	var errs Errors
	at := func(p Pos) Pos {
		if p.Line == 0 {
			return Pos{File: spec.File, Line: 1, Col: 1}
		}
		return p
	}
	add := func(p Pos, format string, args ...any) {
		errs = append(errs, &Error{Pos: at(p), Msg: "group mode: " + fmt.Sprintf(format, args...)})
	}

	// The cluster and the source.
	if ks := spec.Kafka; ks != nil && ks.Embedded != nil {
		add(ks.Embedded.Pos, "kafka.embedded: every process would start a broker of its own; run one broker (weir broker) "+
			"and give its address in kafka.brokers (such as [\"${KAFKA_BROKERS}\"])")
	}
	src := &spec.Source
	switch k := src.Kafka; {
	case k == nil && src.HTTP != nil:
		add(src.HTTP.Pos, "source.http: a webhook endpoint listens in one process and answers its clients there, but the clustered job's source tasks move between processes; "+
			"run the webhook pipeline with weir run (one process) writing to a Kafka topic, and read that topic here")
	case k == nil:
		what := "file"
		if src.Generate != nil {
			what = "generate"
		}
		if src.Postgres != nil {
			what = "postgres" // one replication stream: not spread over processes
		}
		add(src.Pos, "source.%s: the processes share the partitions of one Kafka topic; want source.kafka with one topic", what)
	case k.TopicPattern != "":
		add(k.Pos, "source.kafka.topicPattern: the source tasks are the partitions of one topic; want topics with exactly one topic")
	case len(k.Topics) != 1:
		add(k.Pos, "source.kafka.topics: %d topics; the source tasks are the partitions of one topic: want exactly one", len(k.Topics))
	}
	if k := src.Kafka; k != nil {
		if k.Start != "" && k.Start != "earliest" {
			add(k.Pos, "source.kafka.start %q: each source task starts at its partition's earliest offset, then goes on from its checkpoints; remove start", k.Start)
		}
		if k.Group != "" {
			add(k.Pos, "source.kafka.group %q: offsets are not committed to a group in group mode (the processes' consumer group is the job's); remove group", k.Group)
		}
	}

	// The steps: one keyBy, stateless steps before it.
	var keyBys []int
	for i, st := range spec.Steps {
		if st.Kind == "keyBy" {
			keyBys = append(keyBys, i)
		}
	}
	switch {
	case len(keyBys) == 0:
		p := src.Pos
		if len(spec.Steps) > 0 {
			p = spec.Steps[0].Pos
		}
		add(p, "steps: no keyBy; the processes split the pipeline at its keyBy: want exactly one (followed by window, sort or agent)")
	case len(keyBys) > 1:
		add(spec.Steps[keyBys[1]].Pos, "steps[%d].keyBy: a second keyBy; the processes split the pipeline at its keyBy: want exactly one", keyBys[1])
	}
	for i, st := range spec.Steps {
		switch {
		case len(keyBys) > 0 && i < keyBys[0] && !stateless(st.Kind):
			add(st.Pos, "steps[%d].%s: before the keyBy only filter, map and tee run (in the source tasks, which keep no state)", i, st.Kind)
		}
	}
	for i, st := range spec.Steps {
		if st.Agent != nil && st.Agent.Approvals != nil {
			add(st.Agent.Approvals.Pos, "steps[%d].agent.approvals: approvals do not run in a clustered job yet (the answers topic is not split by keyed task); run the pipeline without --group", i)
		}
	}
	if spec.Job.ApprovalsAddr != "" {
		add(spec.Job.ApprovalsAddrPos, "job.approvals: approvals do not run in a clustered job yet; run the pipeline without --group")
	}
	checkOutputSink := func(name string, s *SinkSpec) {
		if s.File != nil || s.Parquet != nil {
			add(s.Pos, "outputs.%s: a file sink cannot be shared by tasks that move between processes; want a Kafka sink (or stdout)", name)
		}
	}
	for _, name := range sortedKeys(spec.Outputs) {
		o := spec.Outputs[name]
		for i, st := range o.Steps {
			if !stateless(st.Kind) {
				add(st.Pos, "outputs.%s.steps[%d].%s: an output's steps run in the task that feeds it: want filter, map or tee", name, i, st.Kind)
			}
		}
		checkOutputSink(name, o.Sink)
	}

	// The main sink.
	switch k := spec.Sink.Kafka; {
	case k == nil:
		add(spec.Sink.Pos, "sink: the clustered job writes its output to Kafka exactly once; want sink.kafka with delivery: exactly-once")
	case k.Delivery != "exactly-once":
		add(spec.Sink.Pos, "sink.kafka.delivery %s: the clustered job writes its output exactly once (a transaction per task checkpoint); set delivery: exactly-once", orDefault(k.Delivery, "at-least-once"))
	}

	// The job section.
	j := spec.Job
	if j.CheckpointDir == "" && o.CheckpointBase == "" {
		add(j.Pos, "job.checkpoint.dir: none; every task checkpoints to a location all processes reach: set job.checkpoint.dir "+
			"(s3://bucket/path, gs://, azblob://, or a shared directory) or give one (weir run --checkpoint-dir)")
	} else if o.CheckpointBase == "" {
		if err := checkpoint.CheckLocation(j.CheckpointDir); err != nil {
			add(j.Pos, "job.checkpoint.dir: %v", err)
		}
	}
	if j.CheckpointMode == "at-least-once" {
		add(j.Pos, "job.checkpoint.mode at-least-once: tasks checkpoint exactly once (the exchange between them relies on it); remove mode")
	}
	if j.StateBackend != "" && j.StateBackend != "memory" {
		add(j.Pos, "job.stateBackend %s: tasks keep keyed state in memory in group mode; remove stateBackend", j.StateBackend)
	}
	if j.RestoreFrom != "" {
		add(j.Pos, "job.restoreFrom: a local job's savepoint; in group mode each task restores from its own checkpoints, or from a group savepoint given with weir run --restore DIR; remove restoreFrom")
	}
	if j.AutoWatermarkInterval != 0 {
		add(j.Pos, "job.autoWatermarkInterval: tasks use the default (200ms); remove it, or use source.watermark.emit: every-record")
	}
	maxPar := j.MaxParallelism
	if maxPar == 0 {
		maxPar = 128
	}
	keyed := o.KeyedTasks
	if keyed == 0 {
		keyed = 4
	}
	if err := keygroup.Validate(maxPar, keyed); err != nil {
		add(j.Pos, "%d keyed tasks with job.maxParallelism %d: %v", keyed, maxPar, err)
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return errs
}

// checkRestore checks a group savepoint before any work: a location
// package checkpoint takes and, when it is a directory, one holding a
// complete checkpoint of every keyed task (the source tasks, one per
// partition of the source topic, are checked as they start).
func checkRestore(o ClusterOptions) error {
	if err := checkpoint.CheckLocation(o.RestoreFrom); err != nil {
		return fmt.Errorf("pipeline: ClusterOptions.RestoreFrom: %w", err)
	}
	dir, local := checkpoint.LocalPath(o.RestoreFrom)
	if !local {
		return nil
	}
	keyed := o.KeyedTasks
	if keyed == 0 {
		keyed = 4
	}
	for q := range keyed {
		task := filepath.Join(dir, "tasks", fmt.Sprintf("keyed-%d", q))
		if _, _, err := checkpoint.Latest(task); err != nil {
			return fmt.Errorf("pipeline: group savepoint %s (--restore, ClusterOptions.RestoreFrom): not one of %d keyed tasks: no complete checkpoint in %s (want the checkpoint location of this job, stopped on every process, or a copy of it)", o.RestoreFrom, keyed, task)
		}
	}
	return nil
}

func stateless(kind string) bool { return kind == "filter" || kind == "map" || kind == "tee" }

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
	stdout  *lockedWriter
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

// taskBuild is one build of a task's job in this process.
type taskBuild struct {
	task string
	env  *weir.Environment
	// countOp counts the source's records (source tasks only).
	countOp string
	sinks   []SinkInfo
	// failing and windows are the builder's (dead letters and late
	// records dropped, for the summary).
	failing, windows []string
	rejecting        []string
	sourceOp         string
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
func RunCluster(ctx context.Context, spec *Spec, opts ClusterOptions, log io.Writer) (Summary, error) {
	if log == nil {
		log = io.Discard
	}
	s := Summary{Pipeline: spec.Name, Outputs: map[string]int64{}, Group: opts.Group}
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
	r := &clusterRun{ctx: ctx, spec: spec, opts: opts, plan: plan, brokers: brokers, stdout: &lockedWriter{w: stdout}, log: log, formats: formats}
	r.mu.started = map[string]int{}
	r.mu.running = map[string]*weir.Environment{}
	r.mu.closers = map[string][]func() error{}
	defer r.closeAll()
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
		HeartbeatInterval: opts.HeartbeatInterval, Member: opts.Member, StaticMembership: opts.StaticMembership, LeaveOnStop: opts.LeaveOnStop,
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
	err := cluster.Run(ctx, cfg, r.job())
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

// job is the pipeline as a cluster.Job.
func (r *clusterRun) job() cluster.Job[Record, Record, string, *kgo.Record] {
	k := r.spec.Sink.Kafka
	name := r.spec.Sink.Name
	if name == "" {
		name = "sink"
	}
	prefix := k.TransactionalIDPrefix
	if prefix == "" {
		prefix = "weir-" + (&builder{j: &Job{Spec: r.spec}}).jobName() + "-" + name
	}
	return cluster.Job[Record, Record, string, *kgo.Record]{
		Source:     r.formats.source,
		Watermarks: kafkaWatermarks(&r.spec.Source),
		Upstream: func(in weir.Stream[Record]) weir.Stream[Record] {
			out, b, err := r.buildUpstream(in)
			r.built(b, err)
			return out
		},
		Key: recordKey(r.plan.key),
		Keyed: func(ks weir.KeyedStream[string, Record]) weir.Stream[*kgo.Record] {
			out, b, err := r.buildKeyed(ks)
			r.built(b, err)
			return out
		},
		// The records come encoded (kafkaEncode in buildKeyed).
		Sink: kafka.SinkOptions[*kgo.Record]{Topic: k.Topic, Serialize: produceEncoded, TransactionalIDPrefix: prefix},
	}
}

// taskBuilder is a builder for one task's part of the pipeline in env: its
// operator names avoid those package cluster gives its own operators, and
// its exactly-once sinks have the task's transactional ids.
func (r *clusterRun) taskBuilder(env *weir.Environment) *builder {
	task, ok := cluster.TaskName(env)
	if !ok {
		task = "check" // the dry build
	}
	b := &builder{j: &Job{Spec: r.spec, Env: env, Brokers: r.brokers, Security: r.spec.Kafka.Security}, env: env, stdout: r.stdout,
		sourceDone: true, txnSuffix: r.opts.Group + "-" + task}
	b.names = map[string]int{"source": 1, "exchange-out": 1, "exchange-sink": 1, "exchange-in": 1, "sink": 1}
	return b
}

// buildUpstream adds the source task's steps: the source's dead letters,
// the steps before the keyBy, and the outputs they feed.
func (r *clusterRun) buildUpstream(in weir.Stream[Record]) (weir.Stream[Record], *builder, error) {
	b := r.taskBuilder(in.Env())
	b.sourceDeadLetters("source", in)
	out, err := b.steps(r.ctx, "", r.plan.before, in)
	if err == nil {
		err = b.buildOutputs(r.ctx)
	}
	if err != nil {
		return in, b, err
	}
	return out, b, nil
}

// buildKeyed adds the keyed task's steps: the keyed step, the steps after
// it, the main sink's encoder (its dead letters as a local job's), and the
// outputs they feed.
func (r *clusterRun) buildKeyed(ks weir.KeyedStream[string, Record]) (weir.Stream[*kgo.Record], *builder, error) {
	b := r.taskBuilder(ks.Env())
	out, err := b.keyedStep(r.ctx, "", r.plan.keyed, r.plan.key, ks)
	if err == nil {
		out, err = b.steps(r.ctx, "", r.plan.after, out)
	}
	if err != nil {
		out = ks.Stream
	}
	enc := b.kafkaEncode("sink", "sink", r.spec.Sink.Kafka.Topic, r.formats.sink, out)
	if err == nil {
		err = b.buildOutputs(r.ctx)
	}
	return enc, b, err
}

// dryBuild builds both halves once into a scratch environment, so that a
// problem (none is expected of a file CheckCluster accepts: P2) is
// reported before the process joins the group rather than by a task.
func (r *clusterRun) dryBuild() error {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := kafka.NewSource(kafka.Options{Brokers: r.brokers, Security: r.spec.Kafka.Security, Topics: r.spec.Source.Kafka.Topics}, r.formats.source)
	in := weir.FromSource(env, "source", src, kafkaWatermarks(&r.spec.Source))
	mid, ub, err := r.buildUpstream(in)
	closeAll(ub.j.closers)
	if err != nil {
		return err
	}
	_, kb, err := r.buildKeyed(weir.KeyBy(mid, recordKey(r.plan.key)))
	closeAll(kb.j.closers)
	return err
}

// built keeps a task build's environment and sinks for the summary.
func (r *clusterRun) built(b *builder, err error) {
	if err != nil {
		// Not expected once dryBuild has passed: the task runs without
		// the steps that failed to build, and the log says so.
		fmt.Fprintf(r.log, "weir run: building a task: %v\n", err)
	}
	task, _ := cluster.TaskName(b.env)
	tb := taskBuild{task: task, env: b.env, sinks: b.j.Sinks, failing: b.j.failing, rejecting: b.j.rejecting, windows: b.j.windows, sourceOp: b.j.sourceOp}
	if strings.HasPrefix(task, "source-") {
		tb.countOp = b.j.firstOp
		if tb.countOp == "" {
			tb.countOp = "exchange-out"
		}
	}
	r.mu.Lock()
	r.mu.builds = append(r.mu.builds, tb)
	r.mu.running[task] = b.env
	prev := r.mu.closers[task]
	r.mu.closers[task] = b.j.closers
	r.mu.Unlock()
	closeAll(prev)
}

// closeAll closes what every task's latest build opened.
func (r *clusterRun) closeAll() {
	r.mu.Lock()
	all := r.mu.closers
	r.mu.closers = map[string][]func() error{}
	r.mu.Unlock()
	for _, cs := range all {
		closeAll(cs)
	}
}

func closeAll(cs []func() error) {
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
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
