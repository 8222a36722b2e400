package pipeline

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/keygroup"
)

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
//     exactly-once mode, with keyed state in memory, and a checkpoint
//     interval the tasks' transactions outlive with a task's move
//     (cluster.CheckTransactionTimeout); no job.restoreFrom
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
	if o.ExchangeVersion < 0 || o.ExchangeVersion > 2 {
		oerrs = append(oerrs, fmt.Errorf("pipeline: ClusterOptions.ExchangeVersion %d: want 0 (the newest), 1 (JSON batches, which every build reads) or 2", o.ExchangeVersion))
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
	if err := cluster.CheckTransactionTimeout(0, j.CheckpointInterval, o.SessionTimeout, 0); err != nil {
		add(j.Pos, "job.checkpoint.interval %v: %v", j.CheckpointInterval, err)
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
