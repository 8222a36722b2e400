package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/health"
	"github.com/weirproject/weir/internal/lockedwriter"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/runtime"
)

// Options configure Build. The zero value is usable.
type Options struct {
	// Stdout receives the records of stdout sinks; nil means os.Stdout.
	Stdout io.Writer
	// Logger receives the job's logs; nil means slog.Default().
	Logger *slog.Logger
	// MetricsAddr, when set, overrides job.metricsAddr.
	MetricsAddr string
	// HealthAddr, when set, overrides job.healthAddr.
	HealthAddr string
	// ApprovalsAddr, when set, overrides job.approvals.httpAddr (the
	// HTTP endpoint taking answers to the agent steps' approvals).
	ApprovalsAddr string
	// RestoreFrom, when set, overrides job.restoreFrom.
	RestoreFrom string
	// Parallelism, when > 0, overrides job.parallelism.
	Parallelism int
	// Fresh starts the job without state although its checkpoint
	// directory holds checkpoints: they are left where they are, ignored,
	// and the job's checkpoints are numbered after them (retention then
	// retires them as the new ones complete). Without it a job with a
	// checkpoint directory resumes from the newest complete checkpoint
	// there (runtime.CheckpointConfig.Resume). Not with RestoreFrom.
	Fresh bool
	// AllowNonRestoredState, when set, overrides job.allowNonRestoredState
	// to true.
	AllowNonRestoredState bool
	// Restart overrides job.restart field by field: a Strategy other than
	// "" replaces the file's, Attempts > 0, Delay > 0 and MaxDelay > 0
	// replace its values.
	Restart RestartSpec
	// OnStart, if set, is called by Run with the running job as soon as it
	// has started (to attach a dashboard, or to stop it with a savepoint
	// on a signal: StopWithSavepoint, then Cancel). Run's ctx cancels the
	// job without a savepoint.
	OnStart func(j *Job, running *runtime.Job)
}

// Job is a built pipeline: the weir environment holding its graph, the
// embedded broker and the connections it opened. Start it once; Close it
// after the running job has ended (Run does both).
type Job struct {
	// Spec is the pipeline the job was built from.
	Spec *Spec
	// Env is the job's environment: its graph, configuration and metrics.
	Env *weir.Environment
	// Brokers are the bootstrap servers of the pipeline's Kafka cluster
	// (the embedded broker's address when it runs one); nil without one.
	Brokers []string
	// Security is kafka.tls and kafka.sasl, applied to every Kafka client
	// of the job (zero: plaintext).
	Security kafkasec.Security
	// brokerRecovery is what the embedded broker repaired in its data
	// directory at start, "" when nothing (broker.Recovery).
	brokerRecovery string
	// Sinks names the sink operators, the main sink first, then the
	// named outputs in name order (their records are counted by the
	// runtime metric recordsIn of that operator).
	Sinks []SinkInfo

	kafkaSource interface{ CaughtUp() bool }
	// webhook is the source.http source, if the source is one.
	webhook *webhook.Source[Record]
	// failing names the operators that make dead letters of records they
	// fail on (P7).
	failing []string
	// rejecting names the sink operators whose rejected records go to a
	// dead-letter output (pipeline/sinkdead.go).
	rejecting []string
	// windows names the window operators (their late records dropped
	// are counted in the summary).
	windows []string
	// sourceOp is the source operator's name (its dead letters are
	// counted in the summary).
	sourceOp    string
	firstOp     string
	closers     []func() error
	metricsAddr string
	srv         *http.Server
	healthAddr  string
	healthSrv   *http.Server
	probe       health.Probe
	closeOnce   sync.Once
	closeErr    error // Close's result
	// tracer is job.tracing's provider (tracing.go), made by the first
	// agent step; nil without job.tracing.
	tracer *sdktrace.TracerProvider
	// agentOps names the agent operators; approvals is the endpoint of
	// job.approvals.httpAddr (approval.go), listening on approvalsAddr.
	agentOps      []string
	approvalsAddr string
	approvals     *approvalsServer
}

// SinkInfo names one sink of a job.
type SinkInfo struct {
	// Output is "sink" or the name of the output.
	Output string
	// Operator is the sink operator's name.
	Operator string
	// Describe says where the records go.
	Describe string
}

// Build builds the job of spec: it starts the embedded broker (if any),
// checks that every Kafka topic the pipeline names exists (an unknown one
// is an Errors at the topic's position), connects MCP servers, and adds
// every operator to a new environment. Nothing runs until Start.
//
// The parts, one concern a file: the Kafka cluster and its topics
// (kafka.go), the source (buildsource.go), the steps (buildsteps.go), the
// sinks (below, and the connectors' files), the stdout operator
// (stdout.go); Start, the HTTP servers and Close (lifecycle.go).
func Build(ctx context.Context, spec *Spec, opts Options) (j *Job, err error) {
	j = &Job{Spec: spec}
	defer func() {
		if err != nil {
			j.Close()
			j = nil
		}
	}()
	cfg := jobConfig(spec, opts)
	j.metricsAddr = orDefault(opts.MetricsAddr, spec.Job.MetricsAddr)
	j.approvalsAddr = orDefault(opts.ApprovalsAddr, spec.Job.ApprovalsAddr)
	j.healthAddr = orDefault(opts.HealthAddr, spec.Job.HealthAddr)
	stdout := opts.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}

	if err := j.startKafka(ctx); err != nil {
		return j, err
	}
	env := weir.NewEnvironment(cfg)
	j.Env = env
	b := &builder{j: j, env: env, stdout: lockedwriter.New(stdout), started: time.Now()}
	main, err := b.source(ctx)
	if err != nil {
		return j, err
	}
	if main, err = b.steps(ctx, "", spec.Steps, main); err != nil {
		return j, err
	}
	if err := b.sink("sink", spec.Sink, main); err != nil {
		return j, err
	}
	if err := b.buildOutputs(ctx); err != nil {
		return j, err
	}
	return j, nil
}

// jobConfig is the runtime configuration of spec's job, with the options
// that override the file.
func jobConfig(spec *Spec, opts Options) weir.Config {
	cfg := weir.Config{
		Parallelism:           spec.Job.Parallelism,
		MaxParallelism:        spec.Job.MaxParallelism,
		AutoWatermarkInterval: spec.Job.AutoWatermarkInterval,
		Logger:                opts.Logger,
	}
	if opts.Parallelism > 0 {
		cfg.Parallelism = opts.Parallelism
	}
	cfg.Checkpoint = runtime.CheckpointConfig{
		Interval:              spec.Job.CheckpointInterval,
		Dir:                   spec.Job.CheckpointDir,
		RestoreFrom:           orDefault(opts.RestoreFrom, spec.Job.RestoreFrom),
		Resume:                resumes(spec, opts),
		JobName:               JobName(spec),
		AllowNonRestoredState: spec.Job.AllowNonRestoredState || opts.AllowNonRestoredState,
	}
	if spec.Job.CheckpointMode == "at-least-once" {
		cfg.Checkpoint.Mode = runtime.AtLeastOnce
	}
	cfg.Restart = restartStrategy(spec, opts)
	cfg.StateBackend = runtime.StateBackendConfig{Kind: spec.Job.StateBackend, Dir: spec.Job.StateDir, CacheBytes: spec.Job.StateCacheBytes}
	return cfg
}

// buildOutputs adds the steps and sink of every output fed so far, each
// once every step feeding it is: an output may be fed by steps of other
// outputs, and dead letters of several steps may share one (Parse refuses
// cycles). A clustered job builds each half's outputs in its own tasks.
func (b *builder) buildOutputs(ctx context.Context) error {
	order, _ := outputOrder(b.j.Spec)
	for _, name := range order {
		in, fed := b.outputs[name]
		if !fed {
			continue
		}
		o := b.j.Spec.Outputs[name]
		out, err := b.steps(ctx, name, o.Steps, in)
		if err != nil {
			return err
		}
		if err := b.sink(name, o.Sink, out); err != nil {
			return err
		}
	}
	return nil
}

type builder struct {
	j       *Job
	env     *weir.Environment
	stdout  *lockedwriter.Writer
	outputs map[string]weir.Stream[Record]
	names   map[string]int
	// sourceDone is set once the source is added.
	sourceDone bool
	// started is when the job was built: a fresh job reads the answers
	// of approvals written from then on (approval.go).
	started time.Time
	// txnSuffix, in group mode, is "<group>-<task>": added to the
	// transactional ids of exactly-once Kafka sinks, so that each task has
	// its own, the same in every process (RunCluster).
	txnSuffix string
}

// output adds s to the streams feeding output name.
func (b *builder) output(name string, s weir.Stream[Record]) {
	if b.outputs == nil {
		b.outputs = map[string]weir.Stream[Record]{}
	}
	if prev, ok := b.outputs[name]; ok {
		s = weir.Union(prev, s)
	}
	b.outputs[name] = s
}

// deadLetters returns the side-output tag for the dead letters of step st
// of output from, after registering its stream on the step's dead-letter
// output once the operator exists (nil: no output, they are dropped).
func (b *builder) deadLetters(from string, st *StepSpec, name string) (*weir.OutputTag[Record], func(weir.Stream[Record])) {
	b.j.failing = append(b.j.failing, name)
	to := DeadLettersOf(b.j.Spec, from, st)
	if to == "" {
		return nil, func(weir.Stream[Record]) {}
	}
	tag := weir.NewOutputTag[Record](name + "-dead-letters")
	return tag, func(s weir.Stream[Record]) { b.output(to, weir.SideOutput(s, tag)) }
}

// agentDeadLetters makes dead letters of the inputs an agent step named
// name failed on (failed: its side output of agent.FailedInput) and sends
// them to the step's dead-letter output, if it has one.
func (b *builder) agentDeadLetters(from string, st *StepSpec, name, at string, failed weir.Stream[agent.FailedInput]) {
	op := name + "-failed"
	b.j.failing = append(b.j.failing, op)
	to := DeadLettersOf(b.j.Spec, from, st)
	dl := weir.Transform(failed, op, func() runtime.OneInputOperator[agent.FailedInput, Record] {
		return &agentFailedOp{step: name, at: at, routed: to != ""}
	})
	if to != "" {
		b.output(to, dl)
	}
}

// opName returns a unique operator name: the given one, or kind-index.
func (b *builder) opName(given, def string) string {
	if b.names == nil {
		b.names = map[string]int{}
	}
	n := given
	if n == "" {
		n = def
	}
	b.names[n]++
	if c := b.names[n]; c > 1 {
		n = fmt.Sprintf("%s-%d", n, c)
	}
	if b.sourceDone && b.j.firstOp == "" {
		// The first operator after the source counts the source's records
		// (recordsOut is counted on exchanges only, not on chained edges).
		b.j.firstOp = n
	}
	return n
}

func (b *builder) sink(output string, s *SinkSpec, in weir.Stream[Record]) error {
	def := output
	if output != "sink" {
		def = "output-" + output
	}
	name := b.opName(s.Name, def)
	info := SinkInfo{Output: output, Operator: name}
	switch {
	case s.Stdout:
		info.Describe = "stdout"
		w := b.stdout
		weir.Transform(in, name, func() runtime.OneInputOperator[Record, struct{}] { return &stdoutOp{w: w} })
	case s.File != nil && s.File.Dir != "":
		info.Describe = "files in " + s.File.Dir + " (exactly once)"
		weir.TwoPhaseCommit(in, name, file.ExactlyOnce[Record](s.File.Dir, func(r Record) ([]byte, error) { return gojson.Marshal(r) })).UID(name)
	case s.File != nil:
		info.Describe = jsonl.PartPaths(s.File.Path, b.env.Config().Parallelism) + " (exactly once; cut back to the checkpoint on resume)"
		weir.ToSink(in, name, jsonl.Sink[Record](s.File.Path))
	case s.Parquet != nil:
		info.Describe = b.parquetSink(name, output, s.Parquet, in)
	case s.Postgres != nil:
		info.Describe = b.postgresSink(s.Postgres, name, output, in)
	case s.Kafka != nil:
		k := s.Kafka
		ser, err := kafkaSinkSerialize(context.Background(), b.j.Spec, k)
		if err != nil {
			return err
		}
		enc := b.kafkaEncode(name, output, k.Topic, ser, in) // pipeline/kafkasink.go
		o := kafka.SinkOptions[*kgo.Record]{Brokers: b.j.Brokers, Security: b.j.Security, Topic: k.Topic, Serialize: produceEncoded}
		if k.Delivery == "exactly-once" {
			o.TransactionalIDPrefix = k.TransactionalIDPrefix
			if o.TransactionalIDPrefix == "" {
				o.TransactionalIDPrefix = "weir-" + b.jobName() + "-" + name
			}
			if b.txnSuffix != "" {
				o.TransactionalIDPrefix += "-" + b.txnSuffix
			}
			info.Describe = "Kafka topic " + k.Topic + " (exactly once)"
			kafka.ExactlyOnceSink(enc, name, o).UID(name)
		} else {
			info.Describe = "Kafka topic " + k.Topic + " (at least once)"
			kafka.Sink(enc, name, o).UID(name)
		}
	case s.HTTP != nil:
		d, err := b.httpSink(name, s, in)
		if err != nil {
			return err
		}
		info.Describe = d
	}
	b.j.Sinks = append(b.j.Sinks, info)
	return nil
}

func (b *builder) jobName() string {
	if b.j.Spec.Name != "" {
		return b.j.Spec.Name
	}
	return "pipeline"
}
