package dashboard

import (
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/internal/buildinfo"
	"github.com/weirproject/weir/runtime"
)

// Frame is one sample of a job: every figure of the page at one moment.
// Counters are totals since the job started; rates are per second over the
// interval since the previous frame (0 in the first).
type Frame struct {
	// Seq numbers the frames from 1.
	Seq int64 `json:"seq"`
	// AtMs is when the frame was taken (Unix milliseconds, wall clock),
	// IntervalMs the time since the previous frame (0 in the first).
	AtMs       int64 `json:"atMs"`
	IntervalMs int64 `json:"intervalMs"`
	// Done is set once the job has ended (the figures stay as they were).
	Done bool `json:"done,omitempty"`
	// Weir is the weir binary serving the page: version, commit, Go
	// version, platform and build tags, the object `weir version --json`
	// prints and `weir run --json` summaries carry under "weir".
	Weir buildinfo.Info `json:"weir"`

	Operators   []OperatorFrame  `json:"operators"`
	Watermarks  []WatermarkFrame `json:"watermarks"`
	Kafka       []PartitionFrame `json:"kafka"`
	KafkaTopics []TopicFrame     `json:"kafkaTopics"`
	Held        []HeldFrame      `json:"held"`
	Checkpoints CheckpointsFrame `json:"checkpoints"`
	Agents      []AgentFrame     `json:"agents"`
	DeadLetters DeadLettersFrame `json:"deadLetters"`
	Late        []LateFrame      `json:"late"`
	// counters are the frame's counters by metricID, for the next
	// frame's rates.
	counters map[string]int64
}

// OperatorFrame is one operator of the job graph with its throughput.
type OperatorFrame struct {
	runtime.OperatorInfo
	// RecordsIn counts the records the operator received (a source: the
	// records it read); RecordsOut the records it sent over channels plus
	// those its chained successors received (operators whose output goes
	// nowhere show 0).
	RecordsIn  int64   `json:"recordsIn"`
	RecordsOut int64   `json:"recordsOut"`
	InPerSec   float64 `json:"inPerSec"`
	OutPerSec  float64 `json:"outPerSec"`
	// BackPressure is the share of the interval (0 to 1) that the task
	// the operator runs in spent blocked on a full output, the highest
	// over its subtasks (runtime.MetricBackPressuredMicros).
	BackPressure float64 `json:"backPressure"`
	// Watermark is the lowest watermark over the operator's subtasks
	// (runtime.MetricWatermark; watermark.Min before the first).
	Watermark int64 `json:"watermark"`
	// SharedName is set when other operators of the job have the same
	// name: metrics are kept by name, so their figures are added up.
	SharedName bool `json:"sharedName,omitempty"`
}

// WatermarkFrame is the watermark of one operator subtask.
type WatermarkFrame struct {
	Operator  string `json:"operator"`
	Subtask   int    `json:"subtask"`
	Watermark int64  `json:"watermark"`
	// LagMs is how far the watermark is behind the frame's wall-clock
	// time; absent before the first watermark and after the end of input.
	LagMs *int64 `json:"lagMs,omitempty"`
}

// PartitionFrame is the catch-up of one Kafka partition (the gauges of
// package connector/kafka, K15).
type PartitionFrame struct {
	Operator  string `json:"operator"`
	Subtask   int    `json:"subtask"`
	Topic     string `json:"topic"`
	Partition string `json:"partition"`
	// End is the end offset taken at start (-1 until taken), Position the
	// next offset the source will emit (-1 until known).
	End      int64 `json:"end"`
	Position int64 `json:"position"`
	CaughtUp bool  `json:"caughtUp"`
	// CatchUpMs is how long after the source's start the partition caught
	// up (-1 until then).
	CatchUpMs int64 `json:"catchUpMs"`
	// Progress is Position against End, 0 to 1 (1 once caught up).
	Progress float64 `json:"progress"`
}

// TopicFrame is the catch-up of one Kafka topic.
type TopicFrame struct {
	Operator  string `json:"operator"`
	Topic     string `json:"topic"`
	CaughtUp  bool   `json:"caughtUp"`
	CatchUpMs int64  `json:"catchUpMs"`
}

// HeldFrame is what one subtask of an agent or async operator holds back.
type HeldFrame struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	// Kind is "agent" or "async".
	Kind string `json:"kind"`
	// Held is the number of watermarks (and idle-status changes) held,
	// OldestAgeMs how long the oldest has waited.
	Held        int64 `json:"held"`
	OldestAgeMs int64 `json:"oldestAgeMs"`
	// Keys are (up to 20 of) the keys holding the oldest, KeyCount how
	// many there are (agents; async operators are not keyed).
	Keys     []agent.HeldKey `json:"keys,omitempty"`
	KeyCount int             `json:"keyCount,omitempty"`
	// InFlight is the number of inputs accepted and not finished.
	InFlight int64 `json:"inFlight"`
}

// CheckpointsFrame is the checkpoint history.
type CheckpointsFrame struct {
	Completed int64                     `json:"completed"`
	Failed    int64                     `json:"failed"`
	History   []runtime.CheckpointStats `json:"history"`
}

// AgentFrame is one agent operator, over its subtasks.
type AgentFrame struct {
	Operator       string  `json:"operator"`
	InFlight       int64   `json:"inFlight"`
	RunningKeys    int64   `json:"runningKeys"`
	ActionsRun     int64   `json:"actionsRun"`
	ActionsPerSec  float64 `json:"actionsPerSec"`
	ActionErrors   int64   `json:"actionErrors"`
	MeanLatencyMs  float64 `json:"meanLatencyMs"`  // over the interval (0 without runs)
	TotalLatencyMs float64 `json:"totalLatencyMs"` // mean since the start
	// P99LatencyMs is the 99th percentile of the action runs since the
	// start, as the upper bound of its histogram bucket (0 without runs).
	P99LatencyMs float64 `json:"p99LatencyMs"`
	Models       []Calls `json:"models"`
	Tools        []Calls `json:"tools"`
	// PendingApprovals are the waits of its actions (agent.Await) not
	// answered yet, from the subtasks that answered agent.Status, soonest
	// deadline first.
	PendingApprovals []PendingApproval `json:"pendingApprovals,omitempty"`
}

// PendingApproval is a pending wait of one subtask of an agent operator.
type PendingApproval struct {
	Subtask int `json:"subtask"`
	agent.PendingWait
}

// Calls counts the calls to one model or tool.
type Calls struct {
	Name   string `json:"name"`
	Calls  int64  `json:"calls"`
	Errors int64  `json:"errors"`
	// Retries made inside the calls (models), RateLimited those that
	// waited out a 429, and the tokens the replies reported.
	Retries      int64 `json:"retries,omitempty"`
	RateLimited  int64 `json:"rateLimited,omitempty"`
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// P99LatencyMs is the 99th percentile of the calls' time since the
	// start (the upper bound of its histogram bucket).
	P99LatencyMs float64 `json:"p99LatencyMs"`
}

// DeadLettersFrame counts dead letters per source and keeps the latest.
type DeadLettersFrame struct {
	Total     int64          `json:"total"`
	PerSource []Count        `json:"perSource"`
	Latest    []runtime.Note `json:"latest"`
}

// Count is a named total.
type Count struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// LateFrame is the late records of one window operator.
type LateFrame struct {
	Operator string `json:"operator"`
	// Dropped counts the late records no window took; ToSideOutput those
	// of them sent to the late side output.
	Dropped      int64 `json:"dropped"`
	ToSideOutput int64 `json:"toSideOutput"`
	// LastTimestamp and LastWatermark are the latest late record's
	// timestamp and the watermark it was late against (over the subtasks,
	// the one with the newest watermark), AllowedLatenessMs the
	// operator's allowed lateness; the reason is
	// LastTimestamp + AllowedLatenessMs <= LastWatermark.
	LastTimestamp     *int64 `json:"lastTimestamp,omitempty"`
	LastWatermark     *int64 `json:"lastWatermark,omitempty"`
	AllowedLatenessMs int64  `json:"allowedLatenessMs"`
}
