package pipeline

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/kafkasec"
)

// Pos is a position in a pipeline file: file name, line and column, both
// counted from 1.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Spec is a parsed pipeline file (the format is in the package
// documentation and docs/pipelines.md). Every part keeps the position of
// its key in the file, so that problems found after parsing (a topic the
// broker does not have) are reported where they were written.
type Spec struct {
	File    string
	Name    string
	Job     JobSpec
	Kafka   *KafkaSpec
	Source  SourceSpec
	Steps   []StepSpec
	Sink    *SinkSpec
	Outputs map[string]*OutputSpec
}

// JobSpec holds the job settings.
type JobSpec struct {
	Pos                   Pos
	Parallelism           int
	MaxParallelism        int
	AutoWatermarkInterval time.Duration
	CheckpointInterval    time.Duration
	CheckpointDir         string
	CheckpointMode        string // exactly-once (default) or at-least-once
	StateBackend          string // memory (default) or pebble
	StateDir              string
	// StateCacheBytes bounds the Pebble backend's write-back cache
	// (runtime.StateBackendConfig.CacheBytes): 0 the default (4 MiB),
	// state.NoCache (-1) off.
	StateCacheBytes int64
	RestoreFrom     string
	MetricsAddr     string
	// HealthAddr serves /healthz and /readyz on an address of their own
	// (they are also served beside /metrics on MetricsAddr).
	HealthAddr string
	// AllowNonRestoredState lets a restore drop the state of operators the
	// pipeline no longer has (runtime.CheckpointConfig.AllowNonRestoredState).
	AllowNonRestoredState bool
	// Restart is job.restart (nil: none given, no restarts).
	Restart *RestartSpec
	// Tracing is job.tracing (nil: none given, no traces; tracing.go).
	Tracing *TracingSpec
	// ApprovalsAddr is job.approvals.httpAddr: where the HTTP endpoint
	// taking approvals listens ("": none; approval.go).
	ApprovalsAddr    string
	ApprovalsAddrPos Pos
	// Positions of job.checkpoint.dir, job.restoreFrom and job.stateDir,
	// for the checks before a run (CheckStart).
	CheckpointDirPos, RestoreFromPos, StateDirPos Pos
}

// KafkaSpec is the Kafka cluster the pipeline's Kafka sources, sinks and
// stores use: external brokers, or the embedded broker (package broker).
type KafkaSpec struct {
	Pos      Pos
	Brokers  []string
	Embedded *EmbeddedSpec
	// Security is kafka.tls and kafka.sasl (zero: plaintext), applied to
	// every Kafka client of the job; TLSPos and SASLPos are their keys'.
	Security        kafkasec.Security
	TLSPos, SASLPos Pos
	// Registry is kafka.schemaRegistry (nil: none; pipeline/format.go).
	Registry *RegistrySpec
}

// EmbeddedSpec starts the in-process broker for the job's life.
type EmbeddedSpec struct {
	Pos Pos
	// Dir persists the broker's data ("" keeps it in memory).
	Dir string
	// Topics to create if missing: name -> partitions.
	Topics map[string]int32
	// Produce loads JSON-lines files into topics that are empty when the
	// job starts (so examples need no producer).
	Produce []ProduceSpec
	// TopicPos are the positions of the topics' keys.
	TopicPos map[string]Pos
}

// SourceSpec is the pipeline's source: exactly one of Kafka, File,
// Generate, Postgres, with the timestamp and watermark settings.
type SourceSpec struct {
	Pos      Pos
	Name     string
	Kafka    *KafkaSourceSpec
	File     *FileSourceSpec
	Generate *GenerateSpec
	Postgres *PostgresSourceSpec // postgres_cdc.go
	HTTP     *HTTPSourceSpec     // pipeline/http.go
	// Timestamp is the field path of the event time ("" uses the source's
	// timestamp: the Kafka record's).
	Timestamp    string
	TimestampPos Pos
	// OutOfOrderness bounds how far behind the newest record a record may
	// be and still be on time (per split); Idleness marks a split idle
	// after that long without records (0: never).
	OutOfOrderness time.Duration
	Idleness       time.Duration
	// EveryRecord emits a watermark whenever a record raises the highest
	// timestamp seen (instead of every job.autoWatermarkInterval), so a
	// bounded input has the same late records however fast it is read.
	EveryRecord bool
	// DeadLetters names the output undecodable records and records without
	// a timestamp go to ("" drops them, counted).
	DeadLetters    string
	DeadLettersPos Pos
}

// KafkaSourceSpec reads topics of the pipeline's Kafka cluster.
type KafkaSourceSpec struct {
	Pos           Pos
	Topics        []string
	TopicPos      []Pos
	TopicPattern  string
	Start         string // earliest (default), latest, committed, or an RFC 3339 time
	Group         string
	ReadCommitted bool
	// Bounded ends the source at the end offsets listed when it starts.
	Bounded bool
	// Metadata names a field that receives {topic, partition, offset,
	// timestamp} of each record ("" adds none).
	Metadata string
	// Format is source.kafka.format (nil: JSON; pipeline/format.go).
	Format *FormatSpec
	// KeyFormat is source.kafka.keyFormat (nil: the key is not read):
	// each record's key is decoded and put in the field KeyField
	// (default "key").
	KeyFormat *FormatSpec
	KeyField  string
}

// FileSourceSpec reads JSON-lines files.
type FileSourceSpec struct {
	Pos     Pos
	Paths   []string
	Ordered bool
}

// GenerateSpec is a data generator: Count records, record i's fields
// computed by expressions over i.
type GenerateSpec struct {
	Pos      Pos
	Count    int64
	Fields   map[string]string
	FieldPos map[string]Pos
}

// StepSpec is one step: exactly one of its kinds is set.
type StepSpec struct {
	Pos  Pos
	Kind string // filter, map, keyBy, sort, window, agent, tee
	Name string
	// Tee names the output that also receives every record.
	Tee    string
	Filter string
	// FilterPos is the position of the expression itself.
	FilterPos Pos
	Map       *MapSpec
	KeyBy     string
	Sort      *SortSpec
	Window    *WindowSpec
	Agent     *AgentSpec
	// DeadLetters names the output receiving the records this step fails
	// on (filter, map and agent steps); "" means the source's deadLetters
	// output, if any (DeadLettersOf).
	DeadLetters    string
	DeadLettersPos Pos
}

// MapSpec sets fields to expressions over the input record and drops
// fields.
type MapSpec struct {
	Set    map[string]string
	SetPos map[string]Pos
	Drop   []string
}

// SortSpec configures an event-time sort per key.
type SortSpec struct {
	Violations    string
	ViolationsPos Pos
	Tiebreak      []string
	TiebreakPos   []Pos
}

// WindowSpec configures a keyed window aggregation.
type WindowSpec struct {
	Type            string // tumbling, sliding, session
	Size, Slide     time.Duration
	Gap             time.Duration
	Offset          time.Duration
	AllowedLateness time.Duration
	Late            string
	LatePos         Pos
	Aggregates      []AggregateSpec
}

// AggregateSpec is one output field of a window: Fn over Field.
type AggregateSpec struct {
	Pos   Pos
	Name  string
	Fn    string // count, sum, min, max, avg, first, last
	Field string // "" for count
}

// AgentSpec configures the agent operator.
type AgentSpec struct {
	Model     ModelSpec
	System    string
	Prompt    string
	PromptPos Pos
	Tools     []ToolSpec
	MaxSteps  int
	// When is a CEL condition over the input (event.value.<field>): the
	// agent runs for the records that meet it; the others pass through
	// unchanged. "" means every record.
	When            string
	WhenPos         Pos
	Output          string
	Store           *StoreSpec
	MaxConcurrent   int
	ActionTimeout   time.Duration
	ContinueOnError bool
	// FallbackModel is a second model (named "fallback" in the agent), the
	// one budgets with onLimit fallback call past their limit; nil: none.
	FallbackModel *ModelSpec
	// Budgets bound the model calls' tokens and requests (agentlimits.go).
	Budgets []BudgetSpec
	// EventLog is where the agent's event log goes; nil: no log.
	EventLog *EventLogSpec
	// Pricing prices the model calls (agent.Options.Pricing): the spend
	// metric, and the cost in `weir agent replay`'s report; nil: none.
	Pricing model.Pricing
	// Approvals is where the answers to the tools' approvals come from
	// (and their requests go); nil: no tool needs approval (approval.go).
	Approvals *ApprovalsSpec
}

// ModelSpec is the agent's model: the offline model (default) or an
// OpenAI-compatible endpoint.
type ModelSpec struct {
	Pos Pos
	// Offline model settings.
	Offline bool
	Seed    int64
	Latency time.Duration
	// Endpoint settings.
	URL       string
	Name      string
	APIKeyEnv string
	Timeout   time.Duration
	// RateLimit, when set, puts the model's calls behind a model.Limiter.
	RateLimit *RateLimitSpec
}

// ToolSpec is an HTTP tool or an MCP server.
type ToolSpec struct {
	Pos         Pos
	Kind        string // http, mcp or retrieval
	Name        string
	Description string
	URL         string
	Method      string
	Parameters  map[string]any
	Command     []string
	// MCP over HTTP: headers of every request (values may name
	// environment variables, $VAR or ${VAR}, expanded when the job is
	// built and never logged), retries of transient failures, and
	// whether to offer the server's resources as a read_resource tool.
	Headers    map[string]string
	HeadersPos Pos
	Retry      *MCPRetrySpec
	Resources  bool
	// Retrieval tool (Kind "retrieval"): the JSON-lines file of documents
	// ({id, text, metadata}) embedded when the job is built, the number of
	// hits returned, and the embedding model (offline, or an
	// OpenAI-compatible endpoint).
	Documents string
	K         int
	Embedding *ModelSpec
	// Approval, when set, makes every call of the entry's tools wait for a
	// human's answer before it runs (approval.go).
	Approval *ApprovalSpec
}

// MCPRetrySpec bounds the retries of an MCP server's requests.
type MCPRetrySpec struct {
	Attempts int
	Initial  time.Duration
	Max      time.Duration
	Timeout  time.Duration
}

// StoreSpec is the agent's action-state store.
type StoreSpec struct {
	Pos      Pos
	WALDir   string
	NoSync   bool
	Topic    string // kafka store
	TopicPos Pos
}

// SinkSpec is where records go: exactly one of Kafka, File, Stdout.
type SinkSpec struct {
	Pos    Pos
	Name   string
	Kafka  *KafkaSinkSpec
	File   *FileSinkSpec
	Stdout bool
	// Parquet: see pipeline/parquet.go.
	Parquet *ParquetSinkSpec
	// Postgres writes to a PostgreSQL table (pipeline/postgres.go).
	Postgres *PostgresSinkSpec
	HTTP     *HTTPSinkSpec // pipeline/http.go
}

// KafkaSinkSpec writes records as JSON to a topic.
type KafkaSinkSpec struct {
	Topic    string
	TopicPos Pos
	// Delivery is at-least-once (default) or exactly-once.
	Delivery string
	// Key names the field whose value is the record key ("": none).
	Key                   string
	TransactionalIDPrefix string
	// Format is the sink's kafka.format (nil: JSON; pipeline/format.go).
	Format *FormatSpec
	// KeyFormat is the sink's kafka.keyFormat (nil: the key field's value
	// as text): the value of Key written in a format, subject
	// "<topic>-key" by default.
	KeyFormat *FormatSpec
}

// FileSinkSpec writes JSON lines: exactly once into files in Dir
// (published when checkpoints complete and at the end of bounded input),
// or at least once to Path.
type FileSinkSpec struct {
	Dir  string
	Path string
}

// OutputSpec is a named output (late records, dead letters, sort
// violations) and its sink.
type OutputSpec struct {
	Pos Pos
	// Steps process the output's records before its sink (the long form,
	// {steps, sink}).
	Steps []StepSpec
	Sink  *SinkSpec
	// used is set when a step or the source sends to the output.
	used bool
}

// ProduceSpec loads a JSON-lines file into a topic of the embedded broker
// before the job starts, if the topic is empty: one record per line, keyed
// by a field (hash-partitioned), with the record timestamp from a field.
type ProduceSpec struct {
	Pos       Pos
	Topic     string
	TopicPos  Pos
	File      string
	Key       string
	Timestamp string
	// Format writes the records in a schema-registry format (nil: JSON
	// lines as they are; pipeline/format.go).
	Format *FormatSpec
}

// RestartSpec is job.restart: whether and when a job whose step failed is
// started again from its newest checkpoint (runtime.RestartStrategy).
type RestartSpec struct {
	Pos Pos
	// Strategy is none, fixed-delay or exponential-backoff.
	Strategy string
	// Attempts, Delay, MaxDelay, Multiplier and ResetAfter are
	// runtime.RestartStrategy's (0: its default; ResetAfter < 0: never).
	Attempts   int
	Delay      time.Duration
	MaxDelay   time.Duration
	Multiplier float64
	ResetAfter time.Duration
}
