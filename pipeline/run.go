package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/window"
)

// Summary is what a run of a pipeline did.
type Summary struct {
	// Pipeline is the pipeline's name (its file's when it has none).
	Pipeline string `json:"pipeline"`
	// SourceRecords are the records the source emitted (decoded, with a
	// timestamp); dead letters are counted by their output.
	SourceRecords int64 `json:"sourceRecords"`
	// Outputs are the records written per output: "sink" and each named
	// output.
	Outputs map[string]int64 `json:"outputs"`
	// Elapsed is the running time of the job.
	Elapsed time.Duration `json:"elapsedNs"`
	// DeadLetters counts the records steps and Kafka sinks failed on (P7,
	// pipeline/kafkasink.go), sent to a
	// dead-letter output or, DeadLettersDropped of them, dropped for want
	// of one. The source's dead letters are counted by their output.
	DeadLetters        int64 `json:"deadLetters,omitempty"`
	DeadLettersDropped int64 `json:"deadLettersDropped,omitempty"`
	// SourceDeadLetters counts the records the source could not decode
	// or timestamp: sent to source.deadLetters or, without it, dropped.
	SourceDeadLetters int64 `json:"sourceDeadLetters,omitempty"`
	// Dropped counts the records lost for want of a dead-letter output:
	// DeadLettersDropped, and SourceDeadLetters when the source has no
	// deadLetters output. `weir run` exits with status 3 when it is not
	// 0 (docs/pipelines.md).
	Dropped int64 `json:"dropped,omitempty"`
	// LateDropped counts the records window steps dropped as too late
	// for every window they belonged to, for want of a late output
	// (window.late): event-time semantics, not a failure.
	LateDropped int64 `json:"lateDropped,omitempty"`
	// CheckpointsCompleted counts the job's completed checkpoints.
	CheckpointsCompleted int64 `json:"checkpointsCompleted"`
	// Stopped is set when the run was stopped before its sources ended.
	Stopped bool `json:"stopped,omitempty"`
	// Group and Member are set in group mode (RunCluster): the job's group
	// and this process's name in it. There, the counts above are what this
	// process's tasks did (replays after restores included), and Tasks
	// lists those tasks with the number of times this process started each
	// (a restart, or a task coming back, starts it again).
	Group  string         `json:"group,omitempty"`
	Member string         `json:"member,omitempty"`
	Tasks  map[string]int `json:"tasks,omitempty"`
	// Restarts counts the times the job was started again after a failure
	// (job.restart); the counts above then include the records read again.
	Restarts int64 `json:"restarts"`
}

// Run builds the job of spec, starts it, waits for it to end (a bounded
// source ends; an unbounded job runs until ctx is cancelled, which stops it
// and is not an error) and reports. log receives a line when the job
// starts, one when a Kafka source has caught up, and the summary; nil
// means none. An error closing what the job opened (the embedded broker
// saving its data, an MCP server, an HTTP server) is returned when the
// run itself succeeded. Run is what `weir run` does.
func Run(ctx context.Context, spec *Spec, opts Options, log io.Writer) (s Summary, err error) {
	if log == nil {
		log = io.Discard
	}
	s = Summary{Pipeline: spec.Name, Outputs: map[string]int64{}}
	if s.Pipeline == "" {
		s.Pipeline = spec.File
	}
	if err := CheckStart(spec, opts); err != nil {
		return s, err
	}
	j, err := Build(ctx, spec, opts)
	if err != nil {
		return s, err
	}
	defer func() {
		if cerr := j.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("pipeline: %s: closing: %w", s.Pipeline, cerr)
		}
	}()
	start := time.Now()
	job, err := j.Start(ctx)
	if err != nil {
		return s, err
	}
	if opts.OnStart != nil {
		opts.OnStart(j, job)
	}
	fmt.Fprintf(log, "weir run: %s: %s", s.Pipeline, j.describe())
	if a := j.MetricsAddr(); a != "" {
		fmt.Fprintf(log, "; metrics on http://%s/metrics (and /healthz, /readyz)", a)
	}
	if a := j.ApprovalsAddr(); a != "" {
		fmt.Fprintf(log, "; approvals on http://%s/answers (GET /approvals lists the pending ones)", a)
	}
	if a := j.HealthAddr(); a != "" {
		fmt.Fprintf(log, "; health on http://%s/healthz and /readyz", a)
	}
	fmt.Fprintln(log)
	if j.brokerRecovery != "" {
		fmt.Fprintln(log, "weir run: "+j.brokerRecovery)
	}
	fmt.Fprintln(log, "weir run: "+startedFrom(job.Restored(), spec, opts))
	if j.kafkaSource != nil {
		go func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for !j.CaughtUp() {
				select {
				case <-t.C:
				case <-job.Done():
					return
				}
			}
			fmt.Fprintf(log, "weir run: the Kafka source caught up with its end offsets after %v\n", time.Since(start).Round(time.Millisecond))
		}()
	}
	err = job.Wait()
	s.Elapsed = time.Since(start)
	if err != nil {
		// Cancelled by ctx, or by an OnStart hook (after a savepoint).
		if !errors.Is(err, context.Canceled) {
			return s, err
		}
		s.Stopped = true
	}
	m := job.Metrics()
	s.SourceRecords = m.Sum(j.firstOp, "recordsIn")
	for _, si := range j.Sinks {
		s.Outputs[si.Output] = m.Sum(si.Operator, "recordsIn")
	}
	for _, op := range j.failing {
		s.DeadLetters += m.Sum(op, "deadLetters")
		s.DeadLettersDropped += m.Sum(op, "deadLettersDropped")
	}
	s.subtractRejected(m, j.Sinks, j.rejecting)
	for _, op := range j.windows {
		s.LateDropped += m.Sum(op, window.CounterLateDropped) - m.Sum(op, window.CounterLateOutput)
	}
	s.SourceDeadLetters = m.Sum(j.sourceOp, "deadLetters")
	s.addDropped(spec)
	s.CheckpointsCompleted = m.Sum("job", "checkpointsCompleted")
	s.Restarts = m.Sum("job", runtime.MetricRestarts)
	fmt.Fprintf(log, "weir run: %s %s after %v: %d records from the source\n", s.Pipeline,
		map[bool]string{false: "finished", true: "stopped"}[s.Stopped], s.Elapsed.Round(time.Millisecond), s.SourceRecords)
	for _, si := range j.Sinks {
		fmt.Fprintf(log, "  %-20s %8d records to %s\n", si.Output, s.Outputs[si.Output], si.Describe)
	}
	s.report(log)
	if s.CheckpointsCompleted > 0 {
		fmt.Fprintf(log, "  checkpoints          %8d completed\n", s.CheckpointsCompleted)
	}
	if s.Restarts > 0 {
		fmt.Fprintf(log, "  restarts             %8d after failures (records after the checkpoint restored were read again)\n", s.Restarts)
	}
	return s, nil
}

// addDropped sets Dropped from the dead-letter counts.
func (s *Summary) addDropped(spec *Spec) {
	s.Dropped = s.DeadLettersDropped
	if spec.Source.DeadLetters == "" {
		s.Dropped += s.SourceDeadLetters
	}
}

// report writes the summary's lines on records that did not reach a sink
// the normal way: dead letters (routed, or dropped for want of a
// dead-letter output, which is data loss and said loudly) and late
// records dropped by windows.
func (s *Summary) report(log io.Writer) {
	if s.SourceDeadLetters > 0 && s.Dropped > s.DeadLettersDropped {
		fmt.Fprintf(log, "  DROPPED              %8d records the source could not decode or timestamp, LOST: set source.deadLetters to keep them\n", s.SourceDeadLetters)
	} else if s.SourceDeadLetters > 0 {
		fmt.Fprintf(log, "  source dead letters  %8d records the source could not decode or timestamp, sent to %s\n", s.SourceDeadLetters, "its dead-letter output")
	}
	if routed := s.DeadLetters - s.DeadLettersDropped; routed > 0 {
		fmt.Fprintf(log, "  steps' dead letters  %8d records a step failed on, sent to dead-letter outputs\n", routed)
	}
	if s.DeadLettersDropped > 0 {
		fmt.Fprintf(log, "  DROPPED              %8d records a step failed on, LOST: the step has no deadLetters output (set deadLetters on the step or the source)\n", s.DeadLettersDropped)
	}
	if s.LateDropped > 0 {
		fmt.Fprintf(log, "  late, dropped        %8d records too late for their windows (a window's late output keeps them)\n", s.LateDropped)
	}
}

// describe is one line on the job's shape.
func (j *Job) describe() string {
	s := j.Spec
	src := "generator"
	switch {
	case s.Source.Kafka != nil:
		src = "Kafka"
		if s.Kafka != nil && s.Kafka.Embedded != nil {
			src += " (embedded broker " + j.Brokers[0] + ")"
		}
		if j.Security.Enabled() {
			src += " over " + j.Security.String() // names, never secrets
		}
	case s.Source.File != nil:
		src = "JSON-lines files"
	case s.Source.Postgres != nil:
		src = "PostgreSQL changes"
	case s.Source.HTTP != nil:
		src = "webhook " + s.Source.HTTP.Listen + s.Source.HTTP.Path
	}
	out := src
	for _, st := range s.Steps {
		if st.Kind != "keyBy" {
			out += " -> " + st.Kind
		} else {
			out += " -> keyBy " + st.KeyBy
		}
	}
	return out + " -> " + j.Sinks[0].Describe
}

// Describe is one line on a parsed pipeline's shape: source, steps, sink.
func Describe(s *Spec) string {
	src := "generator"
	switch {
	case s.Source.Kafka != nil:
		src = "Kafka " + strings.Join(s.Source.Kafka.Topics, ",")
	case s.Source.File != nil:
		src = "JSON-lines files"
	case s.Source.Postgres != nil:
		src = "PostgreSQL changes"
	case s.Source.HTTP != nil:
		src = "webhook " + s.Source.HTTP.Listen + s.Source.HTTP.Path
	}
	out := src
	for _, st := range s.Steps {
		out += " -> " + st.Kind
	}
	sink := "stdout"
	switch {
	case s.Sink.Kafka != nil:
		sink = "Kafka " + s.Sink.Kafka.Topic + " (" + s.Sink.Kafka.Delivery + ")"
	case s.Sink.File != nil && s.Sink.File.Dir != "":
		sink = "files in " + s.Sink.File.Dir
	case s.Sink.File != nil:
		sink = s.Sink.File.Path
	case s.Sink.Parquet != nil:
		sink = describeParquet(s.Sink.Parquet)
	case s.Sink.Postgres != nil, s.Sink.HTTP != nil:
		sink = describeSink(s.Sink)
	}
	out += " -> " + sink
	if s.Kafka != nil && s.Kafka.Security.Enabled() {
		out += "; Kafka over " + s.Kafka.Security.String() // names, never secrets
	}
	if n := len(s.Outputs); n > 0 {
		out += fmt.Sprintf("; %d named outputs", n)
	}
	return out
}

// startedFrom is one line on what the job started from.
func startedFrom(r runtime.RestoredFrom, spec *Spec, opts Options) string {
	dir := spec.Job.CheckpointDir
	switch {
	case r.Resumed:
		return fmt.Sprintf("resumed from %s %d (%s)", r.Kind, r.ID, r.Path)
	case r.Path != "":
		return fmt.Sprintf("restored from %s %d (%s)", r.Kind, r.ID, r.Path)
	case dir == "":
		return "started fresh (no job.checkpoint.dir: a restart starts over)"
	case inMemoryBroker(spec):
		return "started fresh (the embedded broker is in memory: its topics are new, so is the job; set kafka.embedded.dir to resume)"
	case opts.Fresh:
		return "started fresh (--fresh): the checkpoints in " + dir + " are ignored"
	default:
		return "started fresh: no complete checkpoint in " + dir
	}
}

// subtractRejected takes the records the rejecting sink operators
// rejected (their dead letters, counted as the steps') out of their
// outputs' counts.
func (s *Summary) subtractRejected(m *runtime.Metrics, sinks []SinkInfo, rejecting []string) {
	for _, op := range rejecting {
		n := m.Sum(op, weir.CounterRejected)
		for _, si := range sinks {
			if si.Operator == op {
				s.Outputs[si.Output] -= n
			}
		}
	}
}
