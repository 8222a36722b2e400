package weir

import (
	"context"

	"github.com/weirproject/weir/runtime"
)

// Config is how a job runs; see runtime.Config for every field and its
// default. The zero value is usable.
type Config = runtime.Config

// Record is a value with its event time (Unix milliseconds).
type Record[T any] = runtime.Record[T]

// OutputTag names a side output.
type OutputTag[T any] = runtime.OutputTag[T]

// NewOutputTag returns a new side-output tag.
func NewOutputTag[T any](name string) *OutputTag[T] { return runtime.NewOutputTag[T](name) }

// DeadLetter is input a source could not turn into a record.
type DeadLetter = runtime.DeadLetter

// CheckpointConfig is Config.Checkpoint: interval, directory, mode,
// retention, restore; see runtime.CheckpointConfig for every field.
type CheckpointConfig = runtime.CheckpointConfig

// RestartStrategy is Config.Restart: whether and when a job whose task
// failed is started again from its newest checkpoint; see
// runtime.RestartStrategy.
type RestartStrategy = runtime.RestartStrategy

// The restart strategies (RestartStrategy.Kind).
const (
	// RestartNone ends the job at its first failure (the default).
	RestartNone = runtime.RestartNone
	// RestartFixedDelay restarts after a fixed pause, a bounded number of
	// times.
	RestartFixedDelay = runtime.RestartFixedDelay
	// RestartExponentialBackoff restarts after growing pauses, a bounded
	// number of times in a row.
	RestartExponentialBackoff = runtime.RestartExponentialBackoff
)

// CheckpointMode is CheckpointConfig.Mode.
type CheckpointMode = runtime.CheckpointMode

// The checkpoint modes.
const (
	// ExactlyOnce aligns barriers: a restore repeats nothing (the default).
	ExactlyOnce = runtime.ExactlyOnce
	// AtLeastOnce does not align barriers: after a restore some records may
	// be processed twice.
	AtLeastOnce = runtime.AtLeastOnce
)

// StateBackendConfig is Config.StateBackend: where keyed state lives (in
// memory, or Pebble on local disk); see runtime.StateBackendConfig.
type StateBackendConfig = runtime.StateBackendConfig

// Environment builds one job and runs it. Build the job from one goroutine;
// an Environment runs its job once.
type Environment struct {
	graph   runtime.Graph
	cfg     Config
	metrics *runtime.Metrics
}

// NewEnvironment returns an environment for a job run with cfg.
func NewEnvironment(cfg Config) *Environment {
	if cfg.Metrics == nil {
		cfg.Metrics = &runtime.Metrics{}
	}
	return &Environment{cfg: cfg, metrics: cfg.Metrics}
}

// Execute runs the job until its bounded sources end and all data has
// drained, until ctx is cancelled (it then returns ctx's error), or until an
// operator fails (it then returns a *runtime.OperatorError: the operator,
// subtask and phase, wrapping the operator's error; match it with
// errors.As and errors.Is).
func (e *Environment) Execute(ctx context.Context) error {
	return runtime.Execute(ctx, &e.graph, e.cfg)
}

// Start starts the job and returns at once; the returned Job can take
// savepoints and checkpoints on request, be cancelled, and be waited for.
func (e *Environment) Start(ctx context.Context) (*runtime.Job, error) {
	return runtime.Start(ctx, &e.graph, e.cfg)
}

// Metrics returns the job's counters and gauges; they are live while the job
// runs.
func (e *Environment) Metrics() *runtime.Metrics { return e.metrics }

// Graph returns the job's logical plan, for tools that show or inspect it.
func (e *Environment) Graph() *runtime.Graph { return &e.graph }

// Config returns the environment's configuration.
func (e *Environment) Config() Config { return e.cfg }
