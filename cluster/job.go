package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Job is a keyed job that Run splits at its key-by: Upstream runs in the
// source tasks, Keyed (with the exactly-once sink after it) in the keyed
// tasks. IN is the source topic's record type, MID the type that crosses
// the exchange topic, K the key, OUT what the sink writes. Source, Key,
// Keyed and Sink are required.
type Job[IN, MID any, K comparable, OUT any] struct {
	// Source decodes the records of Config.SourceTopic.
	Source kafka.Deserializer[IN]
	// Watermarks assigns event time to the source records and generates
	// watermarks, per source partition as in a local job.
	Watermarks watermark.Strategy[IN]
	// Upstream adds the steps before the key-by: stateless ones (Map,
	// Filter, FlatMap), whose state a source task would not carry across
	// a repartition anyway. Nil: the identity (then IN must be MID).
	Upstream func(weir.Stream[IN]) weir.Stream[MID]
	// Key is the key-by. K must be a key type weir.KeyBy accepts.
	Key func(MID) K
	// Codec encodes MID in the exchange topic. Nil means the binary
	// codec (batch version 2: MID's values cross with their types, as the
	// local job would see them), or JSON if MID holds a type the binary
	// codec does not encode (one with its own JSON or text form, such as
	// time.Time; see docs/scale-out.md). Keyed tasks read both, and the
	// batches of a build before the binary codec.
	Codec Codec[MID]
	// Keyed adds the keyed steps (windows, KeyedProcessFunctions) on the
	// keyed stream, and returns what the sink writes.
	Keyed func(weir.KeyedStream[K, MID]) weir.Stream[OUT]
	// Sink configures the exactly-once Kafka sink of every keyed task:
	// Topic and Serialize are required; Brokers defaults to
	// Config.Brokers (and Security then to Config.Security); TransactionalIDPrefix, if set, is prefixed to the
	// task's own ("<Group>-<task>"), so ids are unique to the task.
	Sink kafka.SinkOptions[OUT]
}

func (j Job[IN, MID, K, OUT]) validate() error {
	var errs []error
	if j.Source == nil {
		errs = append(errs, errors.New("cluster: Job.Source is nil; give the source topic's Deserializer (kafka.JSON, ...)"))
	}
	if j.Key == nil {
		errs = append(errs, errors.New("cluster: Job.Key is nil; give the key-by function"))
	}
	if j.Keyed == nil {
		errs = append(errs, errors.New("cluster: Job.Keyed is nil; give the keyed steps"))
	}
	if j.Sink.Serialize == nil {
		errs = append(errs, errors.New("cluster: Job.Sink.Serialize is nil; say how the output is written"))
	}
	if j.Upstream == nil {
		var in IN
		if _, ok := any(in).(MID); !ok {
			errs = append(errs, fmt.Errorf("cluster: Job.Upstream is nil, but the source's type %T is not the key-by's %T; give the steps in between", in, *new(MID)))
		}
	}
	return errors.Join(errs...)
}

func (j Job[IN, MID, K, OUT]) codec() Codec[MID] {
	if j.Codec != nil {
		return j.Codec
	}
	return JSON[MID]()
}

// binCodec is the binary codec the source tasks write with (batch
// version 2): nil if Job.Codec is set, if cfg.ExchangeVersion is 1, or if
// MID does not compile (then JSON, version 1).
func (j Job[IN, MID, K, OUT]) binCodec(cfg Config) *binCodec[MID] {
	if j.Codec != nil || cfg.ExchangeVersion == int(batchVersion) {
		return nil
	}
	return newBinCodec[MID]()
}

func (j Job[IN, MID, K, OUT]) upstream(in weir.Stream[IN]) weir.Stream[MID] {
	if j.Upstream != nil {
		return j.Upstream(in)
	}
	return any(in).(weir.Stream[MID])
}

// sinkOptions are Job.Sink for a task: its brokers (and, when they are
// the job's, the job's Security) and its own transactional ids.
func (j Job[IN, MID, K, OUT]) sinkOptions(cfg Config, task string) kafka.SinkOptions[OUT] {
	o := j.Sink
	if len(o.Brokers) == 0 {
		o.Brokers = cfg.Brokers
		if !o.Security.Enabled() {
			o.Security = cfg.Security // the same cluster, the same credentials
		}
	}
	prefix := cfg.Group + "-" + task
	if o.TransactionalIDPrefix != "" {
		prefix = o.TransactionalIDPrefix + "-" + prefix
	}
	o.TransactionalIDPrefix = prefix
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = cfg.TransactionTimeout
	}
	return o
}

// A task is named "source-<p>" (source partition p) or "keyed-<q>"
// (exchange partition q).
func sourceTaskID(p int) string { return fmt.Sprintf("source-%d", p) }
func keyedTaskID(q int) string  { return fmt.Sprintf("keyed-%d", q) }

// taskDir is where a task's checkpoints live.
func taskDir(cfg Config, task string) string {
	return checkpoint.Join(checkpoint.Join(cfg.CheckpointBase, "tasks"), task)
}

// keyedTaskIndex returns q of keyed task "keyed-<q>".
func keyedTaskIndex(task string) (int, bool) {
	s, ok := strings.CutPrefix(task, "keyed-")
	if !ok {
		return 0, false
	}
	q, err := strconv.Atoi(s)
	return q, err == nil
}

// taskEnv returns the environment of one task: parallelism 1, its own
// checkpoints, restored from the latest of them if there is one. Keyed
// task q is slice q of KeyedTasks (runtime.Config.Slice), which tells its
// operators the key groups it owns (W1), so that what they keep outside
// the task's checkpoints (an agent's action-state store: K1) is that
// task's alone.
//
// The task's checkpoint location is claimed (checkpoint.ClaimLatest, C4)
// here, before the job starts and so before its first transaction: the
// checkpoint it restores is the newest that no newer claim voided, and a
// process that ran the task before and still runs it (it lost its
// session) completes no checkpoint of the task from now on.
func taskEnv(cfg Config, task string) (*weir.Environment, string, error) {
	dir := taskDir(cfg, task)
	fence, restore, _, err := checkpoint.Storage{}.ClaimLatest(dir)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: task %s: claim its checkpoints in %s: %w", task, dir, err)
	}
	if mutant.On(mutant.ClusterStartWithoutCheckpoint) {
		restore = ""
	}
	if restore == "" && cfg.RestoreFrom != "" {
		d, err := savepointPart(cfg, task)
		if err != nil {
			return nil, "", err
		}
		restore = d
	}
	var slice runtime.Slice
	if q, ok := keyedTaskIndex(task); ok {
		slice = runtime.Slice{Index: q, Count: cfg.KeyedTasks}
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: cfg.MaxParallelism, Slice: slice, Task: task,
		Logger: cfg.Logger.With("task", task),
		Checkpoint: runtime.CheckpointConfig{Interval: cfg.CheckpointInterval, Dir: dir, Retain: cfg.Retain,
			RestoreFrom: restore, Storage: checkpoint.Storage{Fence: fence}}})
	return env, restore, nil
}

// TaskName returns the name of the task ("source-3", "keyed-0") whose
// environment env is: Run names each task's environment so
// (weir.Config.Task); false for any other environment (BuildLocal's
// included). The Job's callbacks (Upstream, Keyed) call it with their
// stream's Env() to name what must be unique per task and the same in
// every process that runs the task: the transactional ids of further
// exactly-once sinks (side outputs), for instance
// "<prefix>-<Group>-<task>", as Run does for Job.Sink.
func TaskName(env *weir.Environment) (string, bool) {
	task := env.Config().Task
	return task, task != ""
}

// buildSourceTask adds source task p to env: the source topic's partition
// p, the upstream steps, the exchange operator and the transactional sink
// to the exchange topic.
func (j Job[IN, MID, K, OUT]) buildSourceTask(env *weir.Environment, cfg Config, p int, stop <-chan struct{}) {
	task := sourceTaskID(p)
	src := kafka.NewSource(kafka.Options{Brokers: cfg.Brokers, Topics: []string{cfg.SourceTopic}, Partitions: []int32{int32(p)},
		ReadCommitted: cfg.SourceReadCommitted, Stop: stop, Security: cfg.Security, ClientOptions: cfg.ClientOptions}, j.Source)
	in := weir.FromSource(env, "source", src, j.Watermarks).UID("source")
	mid := j.upstream(in)
	ks := weir.KeyBy(mid, j.Key)
	routed := weir.Transform(mid, "exchange-out", newExchangeOut(ks, j.codec(), j.binCodec(cfg), cfg.MaxParallelism, cfg.KeyedTasks, cfg.ControlInterval, src.CaughtUp, sourcePosition(src))).UID("exchange-out")
	kafka.ExactlyOnceSink(routed, "exchange-sink", exchangeSinkOptions(cfg, j.codec(), cfg.ExchangeTopic(), int32(p), cfg.Group+"-"+task)).UID("exchange-sink")
}

// sourcePosition reports the position (the next offset it emits) of a
// source task's Kafka source in its one partition, -1 before it is known.
func sourcePosition[T any](src *kafka.Source[T]) func() int64 {
	return func() int64 {
		for _, st := range src.Status() {
			return st.Position
		}
		return -1
	}
}

// buildKeyedTask adds keyed task q to env: exchange partition q, the keyed
// steps, and the exactly-once sink.
func (j Job[IN, MID, K, OUT]) buildKeyedTask(env *weir.Environment, cfg Config, q, producers int) {
	task := keyedTaskID(q)
	in := weir.FromSource(env, "exchange-in", newExchangeSource(cfg, j.codec(), cfg.ExchangeTopic(), int32(q), producers),
		watermark.NoWatermarks[MID]()).UID("exchange-in")
	out := j.Keyed(weir.KeyBy(in, j.Key))
	kafka.ExactlyOnceSink(out, "sink", j.sinkOptions(cfg, task)).UID("sink")
}

// BuildLocal adds the same job to env as one ordinary local job, without
// the exchange topic: the whole source topic, the upstream steps, the
// key-by, the keyed steps and the exactly-once sink (transactional ids
// prefixed "<Group>-local"). A clustered run's committed output equals
// this job's (the package's guarantee C1); tests and the scale-out
// experiment compare the two. With stop closed the source reads up to the
// end offsets it finds at start.
func BuildLocal[IN, MID any, K comparable, OUT any](env *weir.Environment, cfg Config, j Job[IN, MID, K, OUT], stop <-chan struct{}) error {
	if err := j.validate(); err != nil {
		return err
	}
	src := kafka.NewSource(kafka.Options{Brokers: cfg.Brokers, Topics: []string{cfg.SourceTopic},
		ReadCommitted: cfg.SourceReadCommitted, Stop: stop, Security: cfg.Security, ClientOptions: cfg.ClientOptions}, j.Source)
	in := weir.FromSource(env, "source", src, j.Watermarks).UID("source")
	out := j.Keyed(weir.KeyBy(j.upstream(in), j.Key))
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	kafka.ExactlyOnceSink(out, "sink", j.sinkOptions(cfg, "local")).UID("sink")
	return nil
}
