package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
)

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
	if err = errors.Join(err, closeAll(ub.j.closers)); err != nil {
		return err
	}
	_, kb, err := r.buildKeyed(weir.KeyBy(mid, recordKey(r.plan.key)))
	return errors.Join(err, closeAll(kb.j.closers))
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
	if err := closeAll(prev); err != nil {
		fmt.Fprintf(r.log, "weir run: task %s: closing its previous build: %v\n", task, err)
	}
}

// closeAll closes what every task's latest build opened and returns their
// errors, joined.
func (r *clusterRun) closeAll() error {
	r.mu.Lock()
	all := r.mu.closers
	r.mu.closers = map[string][]func() error{}
	r.mu.Unlock()
	var errs []error
	for task, cs := range all {
		if err := closeAll(cs); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", task, err))
		}
	}
	return errors.Join(errs...)
}

// closeAll runs the closers cs, the last opened first, every one even
// when one fails, and returns their errors joined (as Job.Close).
func closeAll(cs []func() error) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i]())
	}
	return errors.Join(errs...)
}
