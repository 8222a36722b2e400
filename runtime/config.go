package runtime

// The configuration of a job: Config and its parts, and the one place
// their defaults are applied (Config.withDefaults). Config.validate
// (validate.go) checks them before.

import (
	"log/slog"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/keygroup"
)

// DefaultAutoWatermarkInterval is how often sources emit periodic
// watermarks when Config.AutoWatermarkInterval is 0 (Flink's default).
const DefaultAutoWatermarkInterval = 200 * time.Millisecond

// Config is how a job runs. Its zero value is usable: every field documents
// its default.
type Config struct {
	// Parallelism is the default number of subtasks per operator.
	// 0 means 1.
	Parallelism int
	// MaxParallelism is the number of key groups. 0 means Flink's default
	// for the largest parallelism in the job (at least 128). It is fixed
	// for the life of the job's state.
	MaxParallelism int
	// AutoWatermarkInterval is how often sources call their generators'
	// OnPeriodicEmit. 0 means DefaultAutoWatermarkInterval; a negative value disables periodic
	// emission (Flink uses 0 for that; weir keeps 0 for the default).
	AutoWatermarkInterval time.Duration
	// BufferSize is the number of records per batch between subtasks.
	// 0 means 512.
	BufferSize int
	// BuffersPerChannel bounds each channel's in-flight batches (the
	// back-pressure threshold). 0 means 4.
	BuffersPerChannel int
	// BufferTimeout is the longest a partly filled batch waits before it is
	// sent while its producer is busy (a producer that has nothing to do
	// sends at once). 0 means 100ms; negative disables the timer.
	BufferTimeout time.Duration
	// DisableChaining runs every operator in its own goroutines.
	DisableChaining bool
	// Clock is processing time. nil means clock.Real.
	Clock clock.Clock
	// Logger receives the runtime's logs. nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the job's counters and gauges. nil means a new set.
	Metrics *Metrics
	// Checkpoint configures checkpoints, savepoints and restore.
	Checkpoint CheckpointConfig
	// Restart says whether a job whose task failed is started again from
	// its newest checkpoint, and when; the zero value never restarts.
	Restart RestartStrategy
	// StateBackend selects the keyed-state backend (memory by default).
	StateBackend StateBackendConfig
	// Slice, when Slice.Count > 0, declares the job one of Count jobs that
	// split the key groups of one larger keyed job (package cluster runs
	// each keyed task of a clustered job so). MaxParallelism must then be
	// set. The runtime does not route by it; it tells operators through
	// Context.OwnedKeyGroups. Zero: the job is whole.
	Slice Slice
	// Task names the job when it is one task of a larger job that runs
	// as several (package cluster names its tasks "source-<p>" and
	// "keyed-<q>"), so that the code building the job can derive from it
	// what must be unique to the task and the same in every process that
	// runs it (transactional ids). The runtime only carries it; any
	// string is accepted. "" (the default): the job is not such a task.
	Task string
}

// Slice places a job among Count jobs that split the MaxParallelism key
// groups of one keyed job the way the subtasks of one job of parallelism
// Count would: job Index receives only keys of the key groups
// keygroup.RangeFor(MaxParallelism, Count, Index). Whatever the jobs keep
// per key group outside their own checkpoints (an action-state store
// shared by all of them) must be kept for those key groups only, or one
// job would rebuild, or prune, another's.
type Slice struct {
	// Index is the job's slice, in [0, Count).
	Index int
	// Count is the number of slices; 0 means the job is whole.
	Count int
}

// withDefaults returns c with every default applied, the only place they
// are (each field's comment names its default): the job, its builder, its
// coordinator and its restarts read only the result. MaxParallelism's
// default depends on the largest parallelism among g's operators (g may
// be nil: then on Parallelism).
func (c Config) withDefaults(g *Graph) Config {
	if c.Parallelism <= 0 {
		c.Parallelism = 1
	}
	if c.MaxParallelism == 0 {
		maxPar := c.Parallelism // g == nil: every operator's
		if g != nil {
			maxPar = 0
			for _, n := range g.nodes {
				p := n.parallelism
				if p <= 0 {
					p = c.Parallelism
				}
				maxPar = max(maxPar, p)
			}
		}
		c.MaxParallelism = keygroup.DefaultMaxParallelism(maxPar)
	}
	if c.AutoWatermarkInterval == 0 {
		c.AutoWatermarkInterval = DefaultAutoWatermarkInterval
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 512
	}
	if c.BuffersPerChannel <= 0 {
		c.BuffersPerChannel = 4
	}
	if c.BufferTimeout == 0 {
		c.BufferTimeout = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = &Metrics{}
	}
	c.Checkpoint = c.Checkpoint.withDefaults()
	c.Restart = c.Restart.withDefaults()
	return c
}

// CheckpointMode is the guarantee checkpoints give.
type CheckpointMode int

const (
	// ExactlyOnce aligns barriers: state reflects each record exactly once.
	ExactlyOnce CheckpointMode = iota
	// AtLeastOnce does not align: after a restore some records may be
	// processed twice, none is lost. Lower latency under skew.
	AtLeastOnce
)

// CheckpointConfig is how a job checkpoints. The zero value takes no
// checkpoints (savepoints can still be triggered when Dir is set).
type CheckpointConfig struct {
	// Interval between checkpoints; 0 disables periodic checkpoints.
	Interval time.Duration
	// Timeout after which a checkpoint still in progress is aborted;
	// 0 means 10 minutes.
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and
	// the start of the next; 0 means none.
	MinPause time.Duration
	// Mode is ExactlyOnce (default) or AtLeastOnce.
	Mode CheckpointMode
	// Dir is where checkpoints are stored (DIR/chk-<id>): a directory path,
	// or a URL (file:///path, s3://bucket/prefix, gs://bucket/prefix,
	// azblob://container/prefix; see package checkpoint). Required when
	// Interval > 0.
	Dir string
	// Retain is how many completed checkpoints to keep; 0 means 3.
	Retain int
	// RestoreFrom is the location (a directory path or a URL, like Dir) of
	// a checkpoint or savepoint to start from, or of the directory holding
	// checkpoints (chk-N), whose newest complete one is then restored
	// (checkpoint.Resolve). "" restores nothing unless Resume. Flink's
	// execution.savepoint.path.
	RestoreFrom string
	// Resume, when RestoreFrom is "", restores the newest complete
	// snapshot under Dir if there is one (the highest id among the
	// checkpoints chk-N and the savepoints under Dir/SavepointsDir), and
	// starts fresh if there is none; with RestoreFrom, it restores that
	// newest snapshot instead when it continues a run restored from
	// RestoreFrom (its checkpoint.Snapshot.Origin). That is the rule a restarted Kafka
	// Streams application (or a Flink job recovering from its own
	// checkpoints) follows, so that a job started again with the same
	// configuration after a crash continues where it was. The checkpoint must be the same job's: when it records a job
	// name (JobName, written with every snapshot) other than this job's,
	// Start refuses it (a checkpoint without a name, or a job without one,
	// is accepted); its operator state is then matched by uid as for any
	// restore (AllowNonRestoredState). false (the default) starts fresh.
	// Checkpoints are numbered after the newest complete one under Dir
	// either way, so that a fresh start never writes over, nor is retired
	// in favour of, an older run's checkpoints.
	Resume bool
	// JobName names the job in its snapshots (checkpoint.Snapshot.Job),
	// which Resume checks. "" writes none.
	JobName string
	// AllowNonRestoredState lets a restore skip state of operators that
	// are no longer in the job: by default a snapshot with state for an
	// operator uid the job does not have is refused (Flink's
	// --allowNonRestoredState).
	AllowNonRestoredState bool
	// origin, with keepOrigin, is the Origin a restart of the job keeps
	// writing (the supervisor restores its own checkpoint explicitly).
	origin     string
	keepOrigin bool
	// Storage reads and writes the snapshots; the zero value uses the
	// operating system's file system for paths and gocloud.dev/blob for
	// bucket URLs (tests inject faults through Storage.FS).
	Storage checkpoint.Storage
}

func (c CheckpointConfig) withDefaults() CheckpointConfig {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Retain == 0 {
		c.Retain = 3
	}
	return c
}
