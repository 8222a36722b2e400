package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/health"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
	// on a signal: TriggerSavepoint, then Cancel). Run's ctx cancels the
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
func Build(ctx context.Context, spec *Spec, opts Options) (j *Job, err error) {
	j = &Job{Spec: spec}
	defer func() {
		if err != nil {
			j.Close()
			j = nil
		}
	}()
	cfg := weir.Config{
		Parallelism:           spec.Job.Parallelism,
		MaxParallelism:        spec.Job.MaxParallelism,
		AutoWatermarkInterval: spec.Job.AutoWatermarkInterval,
		Logger:                opts.Logger,
	}
	if opts.Parallelism > 0 {
		cfg.Parallelism = opts.Parallelism
	}
	cfg.Checkpoint = runtime.CheckpointConfig{Interval: spec.Job.CheckpointInterval, Dir: spec.Job.CheckpointDir, RestoreFrom: spec.Job.RestoreFrom}
	if spec.Job.CheckpointMode == "at-least-once" {
		cfg.Checkpoint.Mode = runtime.AtLeastOnce
	}
	if opts.RestoreFrom != "" {
		cfg.Checkpoint.RestoreFrom = opts.RestoreFrom
	}
	cfg.Checkpoint.Resume = resumes(spec, opts)
	cfg.Checkpoint.JobName = JobName(spec)
	cfg.Checkpoint.AllowNonRestoredState = spec.Job.AllowNonRestoredState || opts.AllowNonRestoredState
	cfg.Restart = restartStrategy(spec, opts)
	cfg.StateBackend = runtime.StateBackendConfig{Kind: spec.Job.StateBackend, Dir: spec.Job.StateDir, CacheBytes: spec.Job.StateCacheBytes}
	j.metricsAddr = spec.Job.MetricsAddr
	if opts.MetricsAddr != "" {
		j.metricsAddr = opts.MetricsAddr
	}
	j.approvalsAddr = spec.Job.ApprovalsAddr
	if opts.ApprovalsAddr != "" {
		j.approvalsAddr = opts.ApprovalsAddr
	}
	j.healthAddr = spec.Job.HealthAddr
	if opts.HealthAddr != "" {
		j.healthAddr = opts.HealthAddr
	}
	stdout := opts.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}

	if err := j.startKafka(ctx); err != nil {
		return j, err
	}
	env := weir.NewEnvironment(cfg)
	j.Env = env
	b := &builder{j: j, env: env, stdout: &lockedWriter{w: stdout}, started: time.Now()}
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

// startKafka starts the embedded broker, or notes the external brokers,
// and checks the topics the pipeline names.
func (j *Job) startKafka(ctx context.Context) error {
	ks := j.Spec.Kafka
	if ks == nil {
		return nil
	}
	if e := ks.Embedded; e != nil {
		br, err := broker.Start(broker.Options{DataDir: e.Dir, Topics: e.Topics})
		if err != nil {
			return fmt.Errorf("%s: kafka.embedded: %w", e.Pos, err)
		}
		j.closers = append(j.closers, func() error { br.Close(); return nil })
		j.Brokers = br.Addrs()
		reg, err := j.startEmbeddedRegistry(ctx) // pipeline/format.go
		if err != nil {
			return err
		}
		if err := produceFiles(ctx, j.Brokers, e.Produce, reg); err != nil {
			return err
		}
	} else {
		j.Brokers = ks.Brokers
		j.Security = ks.Security
		if err := j.Security.Validate(); err != nil {
			return securityError(ks, err)
		}
	}
	return checkTopics(ctx, j.Spec, j.Brokers, j.Security)
}

// checkTopics checks that every Kafka topic the pipeline names exists on
// the cluster at brokers: an unknown one is an Errors at the topic's
// position.
func checkTopics(ctx context.Context, s *Spec, brokers []string, sec kafkasec.Security) error {
	ks := s.Kafka
	type ref struct {
		topic, what string
		pos         Pos
	}
	var refs []ref
	if k := s.Source.Kafka; k != nil {
		for i, t := range k.Topics {
			refs = append(refs, ref{t, "source.kafka.topics", k.TopicPos[i]})
		}
	}
	sinks := map[string]*SinkSpec{"sink": s.Sink}
	for name, o := range s.Outputs {
		sinks["outputs."+name] = o.Sink
	}
	for _, what := range sortedKeys(sinks) {
		if k := sinks[what].Kafka; k != nil {
			refs = append(refs, ref{k.Topic, what + ".kafka.topic", k.TopicPos})
		}
	}
	for _, a := range approvalsOf(s) {
		refs = append(refs, ref{a.Topic, "approvals.topic", a.TopicPos})
		if a.Requests != "" {
			refs = append(refs, ref{a.Requests, "approvals.requests", a.RequestsPos})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	secOpts, err := sec.Opts()
	if err != nil {
		return securityError(ks, err)
	}
	// Few retries: this is the job's first contact with the cluster, and
	// a refused authentication or a TLS mismatch should fail fast.
	cl, err := kgo.NewClient(append(secOpts, kgo.SeedBrokers(brokers...), kgo.RequestRetries(3))...)
	if err != nil {
		return fmt.Errorf("%s: kafka: %w", ks.Pos, err)
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(lctx)
	if err != nil {
		return fmt.Errorf("%s: kafka: listing topics: %w", ks.Pos, sec.Explain(err))
	}
	var errs Errors
	for _, r := range refs {
		if !topics.Has(r.topic) {
			errs = append(errs, &Error{Pos: r.pos, Msg: fmt.Sprintf("%s: unknown topic %q: the cluster has %s", r.what, r.topic, listOrNone(topics.Names()))})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// lockedWriter serializes the writes of stdout sink subtasks (each writes
// whole buffers of lines).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

type builder struct {
	j       *Job
	env     *weir.Environment
	stdout  *lockedWriter
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

func (b *builder) source(ctx context.Context) (weir.Stream[Record], error) {
	s := &b.j.Spec.Source
	name := b.opName(s.Name, "source")
	strategy := watermarks(s)
	ts := timestampPath(s)
	var out weir.Stream[Record]
	switch {
	case s.Kafka != nil:
		k := s.Kafka
		o := kafka.Options{Brokers: b.j.Brokers, Security: b.j.Security, Topics: k.Topics, TopicPattern: k.TopicPattern, Group: k.Group, ReadCommitted: k.ReadCommitted}
		switch k.Start {
		case "earliest", "":
			o.Start = kafka.StartEarliest()
		case "latest":
			o.Start = kafka.StartLatest()
		case "committed":
			o.Start = kafka.StartCommitted(kafka.StartEarliest())
		default:
			t, _ := time.Parse(time.RFC3339Nano, k.Start) // checked by Parse
			o.Start = kafka.StartAt(t)
		}
		if k.Bounded {
			stop := make(chan struct{})
			close(stop)
			o.Stop = stop
		}
		deser, err := kafkaSourceRecords(ctx, b.j.Spec)
		if err != nil {
			return out, err
		}
		src := kafka.NewSource(o, deser)
		if err := src.Validate(); err != nil {
			return out, fmt.Errorf("%s: %w", k.Pos, err)
		}
		b.j.kafkaSource = src
		out = weir.FromSource(b.env, name, src, kafkaWatermarks(s))
	case s.File != nil:
		src := jsonl.SourceWith(jsonl.Options[Record]{Ordered: s.File.Ordered,
			Timestamp: func(r Record) (int64, bool) { return timestampOf(r, ts) }}, s.File.Paths...)
		for _, p := range s.File.Paths {
			if _, err := os.Stat(p); err != nil {
				return out, Errors{{Pos: s.File.Pos, Msg: fmt.Sprintf("source.file.paths: %v; want existing JSON-lines files (relative paths are relative to the pipeline file)", err)}}
			}
		}
		out = weir.FromSource(b.env, name, src, strategy)
	case s.Postgres != nil:
		var err error
		if out, err = b.postgresSource(ctx, name, s); err != nil {
			return out, err
		}
	case s.Generate != nil:
		g := s.Generate
		type field struct {
			name string
			prog *progRef
		}
		var fields []field
		for _, f := range sortedKeys(g.Fields) {
			p, err := compileExpr(g.Fields[f], exprAny)
			if err != nil {
				return out, fmt.Errorf("%s: %v", g.FieldPos[f], err) // checked by Parse
			}
			fields = append(fields, field{f, &progRef{&vmProgram{prog: p}}})
		}
		strategy = strategy.WithTimestamp(func(r Record, _ int64) (int64, bool) { return timestampOf(r, ts) })
		out = weir.Generate(b.env, name, g.Count, func(i int64) runtime.Record[Record] {
			env := map[string]any{"i": i}
			rec := make(Record, len(fields))
			for _, f := range fields {
				v, err := f.prog.run(env)
				if err != nil {
					// No timestamp: the record becomes a dead letter that says why.
					return runtime.Record[Record]{Value: Record{"error": fmt.Sprintf("field %s: %v", f.name, exprMessage(err)), "i": i},
						Timestamp: runtime.NoTimestamp}
				}
				rec[f.name] = v
			}
			return runtime.Record[Record]{Value: rec, Timestamp: runtime.NoTimestamp}
		}, strategy)
	case s.HTTP != nil:
		var err error
		if out, err = b.httpSource(name, s, strategy, ts); err != nil {
			return out, err
		}
	}
	out = out.UID(name)
	b.sourceDone = true
	b.sourceDeadLetters(name, out)
	return out, nil
}

// sourceDeadLetters feeds the source's dead letters to
// source.deadLetters, if named; name is the source operator's.
func (b *builder) sourceDeadLetters(name string, src weir.Stream[Record]) {
	b.j.sourceOp = name
	if s := &b.j.Spec.Source; s.DeadLetters != "" {
		dl := weir.Map(weir.DeadLetters(src), name+"-dead-letters", deadLetterRecord)
		b.output(s.DeadLetters, dl)
	}
}

// watermarks is the source's watermark strategy, without its timestamps
// (the Kafka record's timestamp, unless set by the caller).
func watermarks(s *SourceSpec) watermark.Strategy[Record] {
	strategy := watermark.ForBoundedOutOfOrderness[Record](s.OutOfOrderness).WithIdleness(s.Idleness)
	if s.EveryRecord {
		bound := s.OutOfOrderness.Milliseconds()
		strategy = watermark.ForGenerator(func() watermark.Generator[Record] {
			maxTs := int64(math.MinInt64)
			return watermark.Punctuated(func(_ Record, ts int64) (int64, bool) {
				if ts <= maxTs {
					return 0, false
				}
				maxTs = ts
				return ts - bound - 1, true
			})
		}).WithIdleness(s.Idleness)
	}
	return strategy
}

// timestampPath is source.timestamp parsed (nil without one).
func timestampPath(s *SourceSpec) fieldPath {
	if s.Timestamp == "" {
		return nil
	}
	ts, _ := parseFieldPath(s.Timestamp) // checked by Parse
	return ts
}

// kafkaWatermarks is a Kafka source's strategy: event time from
// source.timestamp, or the Kafka record's timestamp without one.
func kafkaWatermarks(s *SourceSpec) watermark.Strategy[Record] {
	strategy := watermarks(s)
	if ts := timestampPath(s); ts != nil {
		strategy = strategy.WithTimestamp(func(r Record, _ int64) (int64, bool) { return timestampOf(r, ts) })
	}
	return strategy
}

// kafkaRecords decodes a Kafka source's records: JSON objects, with the
// record's metadata in the field source.kafka.metadata if named.
func kafkaRecords(k *KafkaSourceSpec) kafka.Deserializer[Record] {
	meta := k.Metadata
	return kafka.DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		var rec Record
		if err := gojson.Unmarshal(r.Value, &rec); err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, errors.New("not a JSON object (null)")
		}
		if meta != "" {
			rec[meta] = recordMetadata(r)
		}
		return rec, nil
	})
}

// recordMetadata is the value of source.kafka.metadata's field: the
// record's topic, partition, offset and timestamp, and its W3C trace
// context headers (traceparent, tracestate) when it has them, which an
// agent step's trace continues (agent.Options.TraceContextOf).
func recordMetadata(r *kgo.Record) map[string]any {
	m := map[string]any{"topic": r.Topic, "partition": float64(r.Partition),
		"offset": float64(r.Offset), "timestamp": float64(r.Timestamp.UnixMilli())}
	for _, h := range r.Headers {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			m[h.Key] = string(h.Value)
		}
	}
	return m
}

// traceContextIn returns agent.Options.TraceContextOf for records whose
// field meta holds recordMetadata.
func traceContextIn(meta string) func(any) (string, string) {
	return func(v any) (string, string) {
		rec, _ := v.(Record)
		m, _ := rec[meta].(map[string]any)
		tp, _ := m["traceparent"].(string)
		ts, _ := m["tracestate"].(string)
		return tp, ts
	}
}

// deadLetterRecord turns a dead letter into a record: source, split,
// position, reason, and raw (the input as a string) or value.
func deadLetterRecord(d weir.DeadLetter) Record {
	r := Record{"source": d.Source, "split": float64(d.Split), "position": float64(d.Position), "reason": d.Reason}
	if d.Raw != nil {
		r["raw"] = string(d.Raw)
	}
	if d.Value != nil {
		r["value"] = d.Value
	}
	return r
}

// steps builds the steps of output from ("" for the main steps) on in.
func (b *builder) steps(ctx context.Context, from string, steps []StepSpec, in weir.Stream[Record]) (weir.Stream[Record], error) {
	var err error
	for i := range steps {
		if in, err = b.step(ctx, from, steps, i, in); err != nil {
			return in, err
		}
	}
	return in, nil
}

func (b *builder) step(ctx context.Context, from string, steps []StepSpec, i int, in weir.Stream[Record]) (weir.Stream[Record], error) {
	st := &steps[i]
	at := st.Pos.String()
	switch st.Kind {
	case "tee":
		b.output(st.Tee, in)
		return in, nil
	case "filter":
		prog, err := compileExpr(st.Filter, exprBool)
		if err != nil {
			return in, fmt.Errorf("%s: %v", st.FilterPos, err)
		}
		name := b.opName(st.Name, "filter")
		tag, route := b.deadLetters(from, st, name)
		src := st.Filter
		out := weir.Transform(in, name, func() runtime.OneInputOperator[Record, Record] {
			return &filterOp{prog: prog, src: src, at: at, tag: tag}
		})
		route(out)
		return out, nil
	case "map":
		var fields []mapField
		for _, f := range sortedKeys(st.Map.Set) {
			prog, err := compileExpr(st.Map.Set[f], exprAny)
			if err != nil {
				return in, fmt.Errorf("%s: %v", st.Map.SetPos[f], err)
			}
			fields = append(fields, mapField{f, prog})
		}
		drop := st.Map.Drop
		name := b.opName(st.Name, "map")
		tag, route := b.deadLetters(from, st, name)
		out := weir.Transform(in, name, func() runtime.OneInputOperator[Record, Record] {
			return &mapOp{fields: fields, drop: drop, at: at, tag: tag}
		})
		route(out)
		return out, nil
	case "keyBy":
		return in, nil // the keyed step that follows keys the stream
	}
	// A keyed step: the step before it is its keyBy (checked by Parse).
	kp, _ := parseFieldPath(steps[i-1].KeyBy)
	return b.keyedStep(ctx, from, st, kp, weir.KeyBy(in, recordKey(kp)))
}

// recordKey is the key of a keyBy on the field path kp.
func recordKey(kp fieldPath) func(Record) string {
	return func(r Record) string { return keyString(kp.get(r)) }
}

// keyedStep adds a keyed step (sort, window, agent) on ks, the stream keyed
// by the field path kp.
func (b *builder) keyedStep(ctx context.Context, from string, st *StepSpec, kp fieldPath, ks weir.KeyedStream[string, Record]) (weir.Stream[Record], error) {
	in := ks.Stream
	at := st.Pos.String()
	switch st.Kind {
	case "sort":
		name := b.opName(st.Name, "sort")
		opts := ordering.SortOptions[Record]{}
		var tag *weir.OutputTag[Record]
		if st.Sort.Violations != "" {
			tag = weir.NewOutputTag[Record](st.Sort.Violations)
			opts.Violations = tag
		}
		if len(st.Sort.Tiebreak) > 0 {
			var progs []*progRef
			for j, e := range st.Sort.Tiebreak {
				p, err := compileExpr(e, exprAny)
				if err != nil {
					return in, fmt.Errorf("%s: %v", st.Sort.TiebreakPos[j], err)
				}
				progs = append(progs, &progRef{&vmProgram{prog: p}})
			}
			opts.Tiebreak = func(r Record) (int64, int64) {
				var t [2]int64
				for j, p := range progs {
					v, err := p.run(r)
					if err == nil {
						f, _ := number(v)
						t[j] = int64(f)
					}
				}
				return t[0], t[1]
			}
		}
		out := ordering.Sort(ks, name, opts).UID(name)
		if tag != nil {
			b.output(st.Sort.Violations, weir.SideOutput(out, tag))
		}
		return out, nil
	case "window":
		w := st.Window
		name := b.opName(st.Name, "window")
		var a window.Assigner
		switch w.Type {
		case "tumbling":
			a = window.TumblingWithOffset(w.Size, w.Offset)
		case "sliding":
			a = window.SlidingWithOffset(w.Size, w.Slide, w.Offset)
		case "session":
			a = window.Session(w.Gap)
		}
		var wopts []window.Option
		if w.AllowedLateness > 0 {
			wopts = append(wopts, window.AllowedLateness(w.AllowedLateness))
		}
		var tag *weir.OutputTag[Record]
		if w.Late != "" {
			tag = weir.NewOutputTag[Record](w.Late)
			wopts = append(wopts, window.LateOutput(tag))
		}
		keyField := kp.last()
		b.j.windows = append(b.j.windows, name)
		res := window.AggregateKeyed(ks, name, a, window.AggregateFunction[Record, *aggAcc, Record](newAggregator(w.Aggregates)), wopts...).UID(name)
		out := weir.Map(res, name+"-result", func(r window.Result[string, Record]) Record {
			rec := r.Value
			rec[keyField] = r.Key
			rec["windowStart"] = r.Window.Start
			rec["windowEnd"] = r.Window.End
			return rec
		})
		if tag != nil {
			b.output(w.Late, weir.SideOutput(res, tag))
		}
		return out, nil
	case "agent":
		name := b.opName(st.Name, "agent")
		b.j.agentOps = append(b.j.agentOps, name)
		ap, apClose, err := b.approvalRuntimeOf(name, st.Agent)
		if err != nil {
			return in, err
		}
		if apClose != nil {
			b.j.closers = append(b.j.closers, apClose)
		}
		a, tmpl, closers, err := buildAgent(ctx, st.Agent, ap)
		b.j.closers = append(b.j.closers, closers...)
		if err != nil {
			return in, err
		}
		// The prompt is rendered once before the keyBy: a record it does
		// not render for is a dead letter there, and never reaches the
		// agent (whose action renders it again, and then cannot fail).
		tag, route := b.deadLetters(from, st, name+"-prompt")
		checked := weir.Transform(in, name+"-prompt", func() runtime.OneInputOperator[Record, Record] {
			return &promptCheckOp{tmpl: tmpl, at: at, tag: tag}
		})
		route(checked)
		ks = weir.KeyBy(checked, ks.Key())
		o := agent.Options{MaxConcurrentKeys: st.Agent.MaxConcurrent, ActionTimeout: st.Agent.ActionTimeout, ContinueOnError: st.Agent.ContinueOnError,
			Budgets: agentBudgets(st.Agent), Pricing: st.Agent.Pricing}
		if l := st.Agent.EventLog; l != nil {
			w, closer, err := b.agentEventLog(l)
			if err != nil {
				return in, err
			}
			b.j.closers = append(b.j.closers, closer)
			o.Listeners = []agent.Listener{w}
		}
		if err := b.traceAgent(ctx, &o); err != nil {
			return in, err
		}
		if k := b.j.Spec.Source.Kafka; k != nil && k.Metadata != "" && o.TracerProvider != nil {
			o.TraceContextOf = traceContextIn(k.Metadata)
		}
		if s := st.Agent.Store; s != nil {
			if s.WALDir != "" {
				o.Store = wal.Factory(s.WALDir, wal.Options{NoSync: s.NoSync})
			} else {
				o.Store = kafkastore.Factory(kafkastore.Options{Brokers: b.j.Brokers, Security: b.j.Security, Topic: s.Topic})
			}
		}
		var failed *weir.OutputTag[agent.FailedInput]
		if o.ContinueOnError {
			// Every input an action fails on becomes a dead letter of the
			// step (or is dropped and counted): none is lost silently.
			failed = weir.NewOutputTag[agent.FailedInput](name + "-failed")
			o.FailedInputs = failed
		}
		var out weir.Stream[Record]
		if ap != nil {
			// The answers: a second input, keyed like the agent's by the
			// answer's key; stopped once the input and its waits have
			// ended, so that a bounded source ends the job.
			stop := make(chan struct{})
			var once sync.Once
			o.EndAnswers = func() { once.Do(func() { close(stop) }) }
			answersIn, err := b.answersStream(b.opName("", name+"-answers-source"), st.Agent.Approvals, stop)
			if err != nil {
				return in, err
			}
			out = agent.ApplyWithAnswers[string, Record, Record](ks, answersIn, func(a agent.Answer) string { return a.Key }, name, a, o).UID(name)
		} else {
			out = agent.Apply[string, Record, Record](ks, name, a, o).UID(name)
		}
		if failed != nil {
			b.agentDeadLetters(from, st, name, at, weir.SideOutput(out, failed))
		}
		return out, nil
	}
	return in, fmt.Errorf("%s: unknown step kind %q", st.Pos, st.Kind)
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
		info.Describe = s.File.Path + " (at least once)"
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

// progRef runs a compiled program from several goroutines (generator and
// sort tiebreak functions are shared by subtasks): each run takes a VM
// from a pool, so no VM is allocated per record once the pool is warm.
type progRef struct{ p *vmProgram }

// stdoutOp writes records as JSON lines to the shared stdout, a buffer at
// a time (the lock is taken per buffer, not per record): when the buffer
// is full, and at every watermark, idleness change and the end, so a slow
// live stream shows its records as its watermark moves.
type stdoutOp struct {
	runtime.Base[struct{}]
	w   *lockedWriter
	buf []byte
}

func (o *stdoutOp) ProcessRecord(r runtime.Record[Record]) error {
	b, err := gojson.Marshal(r.Value)
	if err != nil {
		return fmt.Errorf("pipeline: stdout: %w", err)
	}
	o.buf = append(append(o.buf, b...), '\n')
	if len(o.buf) >= 32<<10 {
		return o.flush()
	}
	return nil
}

func (o *stdoutOp) flush() error {
	if len(o.buf) == 0 {
		return nil
	}
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	return err
}

func (o *stdoutOp) ProcessWatermark(ts int64) error {
	o.Out.EmitWatermark(ts)
	return o.flush()
}

func (o *stdoutOp) ProcessIdle(idle bool) error {
	o.Out.EmitIdle(idle)
	return o.flush()
}

func (o *stdoutOp) EndInput() error { return o.flush() }
func (o *stdoutOp) Close() error    { return o.flush() }

// Start starts the job (and the metrics server, if an address is set) and
// returns the running job: the caller may trigger savepoints, cancel it,
// read its metrics, attach a dashboard, and must Wait for it and then
// Close the Job.
func (j *Job) Start(ctx context.Context) (*runtime.Job, error) {
	j.probe.Set(health.Status{Alive: true, Reason: "restoring"})
	if j.metricsAddr != "" {
		ln, err := net.Listen("tcp", j.metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("pipeline: metrics: %w", err)
		}
		j.srv = &http.Server{Handler: health.Mux(&j.probe, metrics.Handler(j.Env.Metrics())), ReadHeaderTimeout: 10 * time.Second}
		go j.srv.Serve(ln)
		j.metricsAddr = ln.Addr().String()
	}
	if j.approvalsAddr != "" && j.approvals == nil {
		if err := j.startApprovals(j.approvalsAddr); err != nil {
			return nil, err
		}
	}
	if j.healthAddr != "" {
		ln, err := net.Listen("tcp", j.healthAddr)
		if err != nil {
			return nil, fmt.Errorf("pipeline: health: %w", err)
		}
		j.healthSrv = &http.Server{Handler: health.Mux(&j.probe, nil), ReadHeaderTimeout: 10 * time.Second}
		go j.healthSrv.Serve(ln)
		j.healthAddr = ln.Addr().String()
	}
	job, err := j.Env.Start(ctx)
	if err != nil {
		j.probe.Set(health.Status{Reason: "failed: " + err.Error()})
		return nil, err
	}
	j.probe.Watch(func() health.Status { return jobStatus(job) })
	return job, nil
}

// jobStatus is the health of a running job: ready while it runs, not
// while it restarts after a failure or after it has ended; not alive once
// it has failed.
func jobStatus(job *runtime.Job) health.Status {
	select {
	case <-job.Done():
		if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			return health.Status{Reason: "failed: " + err.Error()}
		}
		return health.Status{Alive: true, Reason: "the job has ended"}
	default:
	}
	if err := job.Restarting(); err != nil {
		return health.Status{Alive: true, Reason: "restarting after a failure: " + err.Error()}
	}
	why := "running, started fresh"
	if r := job.Restored(); r.Path != "" {
		why = "running, restored from " + r.Path
	}
	return health.Status{Alive: true, Ready: true, Reason: why}
}

// HealthAddr is the address of the dedicated health server, once started
// ("" without one).
func (j *Job) HealthAddr() string {
	if j.healthSrv == nil {
		return ""
	}
	return j.healthAddr
}

// Health is the job's probe, served as /healthz and /readyz.
func (j *Job) Health() *health.Probe { return &j.probe }

// MetricsAddr is the address the metrics server listens on, once started
// ("" without one).
func (j *Job) MetricsAddr() string {
	if j.srv == nil {
		return ""
	}
	return j.metricsAddr
}

// CaughtUp reports whether the Kafka source has caught up with the end
// offsets it listed at start (false without a Kafka source).
func (j *Job) CaughtUp() bool { return j.kafkaSource != nil && j.kafkaSource.CaughtUp() }

// Close stops the metrics server, disconnects MCP servers and stops the
// embedded broker. Call it after the running job's Wait has returned.
func (j *Job) Close() error {
	j.closeOnce.Do(func() {
		if j.srv != nil {
			j.srv.Close()
		}
		if j.healthSrv != nil {
			j.healthSrv.Close()
		}
		if j.approvals != nil {
			j.approvals.close()
		}
		for i := len(j.closers) - 1; i >= 0; i-- {
			j.closers[i]()
		}
	})
	return nil
}
