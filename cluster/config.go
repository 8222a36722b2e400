package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// DefaultTransactionTimeout is Config.TransactionTimeout's default: the
// exactly-once Kafka sink's own, well over the longest a task's move takes
// with the default timings, and under the brokers' default cap (15m).
const DefaultTransactionTimeout = 10 * time.Minute

// CheckTransactionTimeout reports an error unless the transaction
// time-out txn is longer than checkpointInterval + sessionTimeout +
// rebalanceTimeout, the longest a killed process's task may take to move
// (Config.TransactionTimeout); a zero duration stands for its Config
// default. It is Run's check, for callers that validate earlier.
func CheckTransactionTimeout(txn, checkpointInterval, sessionTimeout, rebalanceTimeout time.Duration) error {
	move := cmp.Or(checkpointInterval, time.Second) + cmp.Or(sessionTimeout, 3*time.Second) + cmp.Or(rebalanceTimeout, time.Minute)
	if txn = cmp.Or(txn, DefaultTransactionTimeout); txn > move {
		return nil
	}
	return fmt.Errorf("the transaction time-out %v must be longer than checkpoint interval + session time-out + rebalance time-out (%v): "+
		"a killed process's pre-committed transactions wait up to that long for its task's next owner to commit them, and the broker aborts them at the time-out "+
		"(that checkpoint's output would be lost); raise it (brokers cap it at transaction.max.timeout.ms, 15m by default) or shorten the others", txn, move)
}

// Config is how a process takes part in a clustered job. Every process of
// the job must be given the same Group, SourceTopic, KeyedTasks,
// MaxParallelism and CheckpointBase (they define the tasks and where their
// state lives); the rest may differ per process. Brokers, Group,
// SourceTopic and CheckpointBase are required; every other field has a
// default.
type Config struct {
	// Brokers are the Kafka bootstrap servers.
	Brokers []string
	// Group names the job: the consumer group whose members are the
	// processes, and the prefix of its internal topics
	// ("<Group>-exchange", "<Group>-tasks") and transactional ids. Two
	// jobs need two groups.
	Group string
	// SourceTopic is the input topic; its partitions are the source
	// tasks (one each), so its partition count must not change while the
	// job's state lives.
	SourceTopic string
	// SourceReadCommitted reads the source topic with read_committed
	// isolation.
	SourceReadCommitted bool
	// KeyedTasks is the number of keyed tasks, hence of the exchange
	// topic's partitions: each owns a fixed range of key groups. It is
	// the largest number of processes that can share the keyed work, and
	// fixed for the life of the job's state. Default 4.
	KeyedTasks int
	// MaxParallelism is the number of key groups. Default 128.
	MaxParallelism int
	// CheckpointBase holds every task's checkpoints, under
	// CheckpointBase/tasks/<task>/: a URL of an object store (s3://,
	// gs://, azblob://, as every checkpoint location of package
	// checkpoint) that every process reaches, or a directory on a file
	// system they share.
	CheckpointBase string
	// CheckpointInterval is each task's checkpoint interval; the
	// exchange topic and the output see a task's records when the
	// checkpoint after them completes. Default 1s.
	CheckpointInterval time.Duration
	// Retain is how many completed checkpoints each task keeps; default 3.
	Retain int
	// RestoreFrom, if set, is a group savepoint (restore.go): a location
	// laid out as a CheckpointBase, RestoreFrom/tasks/<task>/chk-N, such
	// as the CheckpointBase of this job after every process stopped, or a
	// copy of it. A task without a checkpoint of its own under
	// CheckpointBase starts from the newest one of its part (a task whose
	// part is missing fails, and is retried); a task with one, from its
	// own. Give every process the same RestoreFrom, and keep the Group,
	// SourceTopic, KeyedTasks and MaxParallelism of the job that wrote
	// it: the exchange topic "<Group>-exchange" holds the records between
	// the source tasks' and the keyed tasks' checkpoints. Default: none.
	RestoreFrom string
	// Bounded makes the job end: each source task reads its partition up
	// to the end offset it finds when it starts, and Run returns nil once
	// every task has finished. Meant for input that is complete before
	// the job starts. Default: the job runs until ctx is cancelled.
	Bounded bool
	// ControlInterval is the least time between two watermark control
	// records of a source task (the latest watermark is always sent
	// after it). Default 200ms.
	ControlInterval time.Duration
	// ExchangeVersion is the batch version the source tasks of this
	// process write to the exchange topic: 0 (the default) or 2, the
	// binary codec's when Job.Codec is nil (docs/scale-out.md); 1, the
	// JSON batches (or Job.Codec's) that every build's keyed tasks read.
	// Keyed tasks read both whatever it is. Set it to 1 on every process
	// of a group upgraded process by process from a build before version
	// 2, until every process runs the new build; then restart them
	// without it (as Kafka Streams' upgrade.from). Otherwise the old
	// builds' keyed tasks fail on the new builds' batches, and restart,
	// until their process is upgraded.
	ExchangeVersion int
	// SessionTimeout is the consumer group's session timeout: how long
	// after a process dies its tasks are given to others. The broker must
	// allow it (group.min.session.timeout.ms, 6s by default on Kafka).
	// Default 3s.
	SessionTimeout time.Duration
	// HeartbeatInterval is the group heartbeat interval; default 300ms.
	HeartbeatInterval time.Duration
	// RevokeCheckpointTimeout bounds the checkpoint a process takes of a
	// task it hands over (a rebalance, a shutdown); past it the task is
	// just stopped and its new owner restores an older checkpoint.
	// Default 2s; negative: no checkpoint at hand-over. It must be shorter
	// than RebalanceTimeout.
	RevokeCheckpointTimeout time.Duration
	// RebalanceTimeout is the consumer group's rebalance timeout: how long
	// the group waits, in a rebalance, for each process to hand over the
	// tasks taken from it (a checkpoint each, bounded by
	// RevokeCheckpointTimeout, then the stop) and to join again. A process
	// that takes longer is removed from the group, which gives its tasks
	// to others while they may still run here: C2 does not hold for them
	// (fencing does), and TaskStopped says so (TaskEvent.SessionLost).
	// Default 1 minute.
	RebalanceTimeout time.Duration
	// RestartDelay is the pause before a task that failed is started
	// again from its latest checkpoint, while this process still owns it.
	// Default 1s.
	RestartDelay time.Duration
	// TransactionTimeout is the transaction time-out of every task's
	// transactional producers (kafka.SinkOptions.TransactionTimeout);
	// default DefaultTransactionTimeout (10 minutes). It must be longer
	// than CheckpointInterval + SessionTimeout + RebalanceTimeout: a
	// killed process's last checkpoint pre-committed transactions that
	// its task's next owner commits, and the group may take that long to
	// give the task to another process (a process killed while a
	// rebalance is under way is waited for until RebalanceTimeout); the
	// broker aborts a transaction at its time-out, and then that
	// checkpoint's output is lost and its restore fails. Brokers cap it
	// at transaction.max.timeout.ms (15 minutes by default on Kafka).
	TransactionTimeout time.Duration
	// Member names this process in logs and task events, and in the
	// group with StaticMembership; default "<hostname>-<pid>".
	Member string
	// StaticMembership makes this process a static member of the group
	// (KIP-345): its group.instance.id is Member, so Member must be given
	// and must stay the same across restarts of this process (the name of
	// a StatefulSet's pod, a host's name), and differ from every other
	// process's (M6, M7). A process that stops (ctx cancelled) or is
	// killed keeps its place and its tasks in the group for
	// SessionTimeout: restarted within it, it gets the same tasks back
	// and no other process's task moves; past it, the group gives its
	// tasks to the others as for a dynamic member. So a stop for good
	// (scale-down) leaves its tasks unowned for SessionTimeout unless
	// LeaveOnStop. Default false: a dynamic member, which leaves the
	// group when it stops (its tasks move at once) and joins as a new
	// member when it starts (a rebalance each time).
	StaticMembership bool
	// LeaveOnStop makes a static member leave the group when Run returns
	// because ctx was cancelled (a LeaveGroup request by its instance id,
	// after its tasks' hand-over checkpoints), so that the others take its
	// tasks over at once instead of after SessionTimeout: for a process
	// that stops for good. A static member whose tasks have all finished
	// (Bounded) always leaves. Only with StaticMembership (a dynamic member
	// always leaves). Default false.
	LeaveOnStop bool
	// Logger receives the membership's and the tasks' logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Advertise, if set, is a URL this process shows the other members
	// (its dashboard): it rides in the client id of this process's group
	// membership ("weir-<Member> url=<Advertise>"), which the group's
	// description returns (OnGroup). An absolute http or https URL.
	Advertise string
	// OnGroup, if set, is called once this process has joined the group
	// with a function that describes the group as the brokers see it
	// now: every member, the tasks assigned to it and its Advertise URL.
	// The function fails once this process has left the group.
	OnGroup func(describe func(context.Context) ([]GroupMember, error))
	// OnAssignment, if set, is called on the group client's goroutine
	// after every assignment the group makes (a join, a rebalance), with
	// the tasks this process owns from then on, possibly none; the new
	// ones start afterwards (reported to OnTask). A readiness probe uses
	// it: a process is ready once every task it owns has started.
	OnAssignment func(tasks []string)
	// OnTask, if set, is called (from any goroutine, one call at a time)
	// when a task of this process starts, stops, fails or finishes, and
	// when the group takes a task from it (TaskRevoked).
	OnTask func(TaskEvent)
	// Security is TLS and SASL to the brokers (package kafkasec), applied
	// to every Kafka client of the job (source, exchange, sink, group
	// membership, topic preparation) before ClientOptions. The zero value
	// is plaintext without authentication.
	Security kafkasec.Security
	// ClientOptions are added to every Kafka client (client id, ...).
	ClientOptions []kgo.Opt

	secOpts []kgo.Opt // Security's options, made once by withDefaults
}

// withDefaults checks cfg and fills in defaults; the error names every bad
// field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("cluster: Config.Brokers is empty; give the Kafka bootstrap servers"))
	}
	if c.Group == "" || strings.ContainsAny(c.Group, " /\\") {
		errs = append(errs, fmt.Errorf("cluster: Config.Group %q: want a non-empty name without spaces or slashes", c.Group))
	}
	if c.SourceTopic == "" {
		errs = append(errs, errors.New("cluster: Config.SourceTopic is empty; give the input topic"))
	}
	if c.CheckpointBase == "" {
		errs = append(errs, errors.New("cluster: Config.CheckpointBase is empty; give a URL (s3://, gs://, azblob://) or a directory every process sees"))
	} else if err := checkpoint.CheckLocation(c.CheckpointBase); err != nil {
		errs = append(errs, fmt.Errorf("cluster: Config.CheckpointBase: %w", err))
	}
	if c.RestoreFrom != "" {
		if err := checkpoint.CheckLocation(c.RestoreFrom); err != nil {
			errs = append(errs, fmt.Errorf("cluster: Config.RestoreFrom: %w", err))
		}
	}
	neg := func(name string, v any, def string) {
		errs = append(errs, fmt.Errorf("cluster: Config.%s %v: want 0 (meaning %s) or a positive value", name, v, def))
	}
	if c.KeyedTasks < 0 {
		neg("KeyedTasks", c.KeyedTasks, "4")
	}
	if c.MaxParallelism < 0 {
		neg("MaxParallelism", c.MaxParallelism, "128")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		def  string
	}{{"CheckpointInterval", c.CheckpointInterval, "1s"}, {"ControlInterval", c.ControlInterval, "200ms"},
		{"SessionTimeout", c.SessionTimeout, "3s"}, {"HeartbeatInterval", c.HeartbeatInterval, "300ms"},
		{"RestartDelay", c.RestartDelay, "1s"}, {"TransactionTimeout", c.TransactionTimeout, DefaultTransactionTimeout.String()},
		{"RebalanceTimeout", c.RebalanceTimeout, "1m"}} {
		if d.v < 0 {
			neg(d.name, d.v, d.def)
		}
	}
	if c.Retain < 0 {
		neg("Retain", c.Retain, "3")
	}
	if c.ExchangeVersion < 0 || c.ExchangeVersion > int(batchVersionBinary) {
		errs = append(errs, fmt.Errorf("cluster: Config.ExchangeVersion %d: want 0 (the newest, %d), 1 (JSON batches, which every build reads) or 2 (the binary codec's)",
			c.ExchangeVersion, batchVersionBinary))
	}
	if c.KeyedTasks == 0 {
		c.KeyedTasks = 4
	}
	if c.MaxParallelism == 0 {
		c.MaxParallelism = 128
	}
	if err := keygroup.Validate(c.MaxParallelism, c.KeyedTasks); err != nil {
		errs = append(errs, fmt.Errorf("cluster: Config.KeyedTasks %d with MaxParallelism %d: %w", c.KeyedTasks, c.MaxParallelism, err))
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: Config.Security: %w", err))
	}
	if c.StaticMembership && c.Member == "" {
		errs = append(errs, errors.New("cluster: Config.StaticMembership needs Config.Member: a name that stays the same across this process's restarts "+
			"and differs from every other process's (such as a StatefulSet pod's name); the default, <hostname>-<pid>, changes at every start"))
	}
	if c.LeaveOnStop && !c.StaticMembership {
		errs = append(errs, errors.New("cluster: Config.LeaveOnStop is only for a static member (Config.StaticMembership); a dynamic member always leaves the group when it stops"))
	}
	if c.Advertise != "" {
		if u, err := url.Parse(c.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(c.Advertise, " \t\n") {
			errs = append(errs, fmt.Errorf("cluster: Config.Advertise %q: want an absolute http or https URL without spaces, such as http://10.0.0.5:8081/", c.Advertise))
		}
	}
	if revoke, rebalance := cmp.Or(c.RevokeCheckpointTimeout, 2*time.Second), cmp.Or(c.RebalanceTimeout, time.Minute); c.RebalanceTimeout >= 0 && revoke >= rebalance {
		errs = append(errs, fmt.Errorf("cluster: Config.RevokeCheckpointTimeout %v must be shorter than Config.RebalanceTimeout %v "+
			"(a hand-over's checkpoint and stop must end before the group gives the task to another process)", revoke, rebalance))
	}
	if c.CheckpointInterval >= 0 && c.SessionTimeout >= 0 && c.RebalanceTimeout >= 0 && c.TransactionTimeout >= 0 {
		if err := CheckTransactionTimeout(c.TransactionTimeout, c.CheckpointInterval, c.SessionTimeout, c.RebalanceTimeout); err != nil {
			errs = append(errs, fmt.Errorf("cluster: Config.TransactionTimeout: %w", err))
		}
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.CheckpointInterval, time.Second)
	def(&c.ControlInterval, 200*time.Millisecond)
	def(&c.SessionTimeout, 3*time.Second)
	def(&c.HeartbeatInterval, 300*time.Millisecond)
	def(&c.RevokeCheckpointTimeout, 2*time.Second)
	def(&c.RebalanceTimeout, time.Minute)
	def(&c.RestartDelay, time.Second)
	def(&c.TransactionTimeout, DefaultTransactionTimeout)
	if c.Retain == 0 {
		c.Retain = 3
	}
	if c.Member == "" {
		host, _ := os.Hostname()
		c.Member = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Security.Logger == nil {
		c.Security.Logger = c.Logger
	}
	sec, err := c.Security.Opts()
	if err != nil {
		return c, fmt.Errorf("cluster: Config.Security: %w", err)
	}
	c.secOpts = sec
	return c, nil
}

// ExchangeTopic is the internal topic through which source tasks hand
// records to keyed tasks.
func (c Config) ExchangeTopic() string { return c.Group + "-exchange" }

// TasksTopic is the coordination topic: one partition per task; the
// partitions assigned to a process are the tasks it runs. Nothing is
// written to it.
func (c Config) TasksTopic() string { return c.Group + "-tasks" }

// TaskEventKind says what happened to a task.
type TaskEventKind string

// The task events.
const (
	// TaskStarted: the task runs in this process (Restored names the
	// checkpoint it started from, "" if fresh).
	TaskStarted TaskEventKind = "started"
	// TaskStopped: the task was handed over or the process is stopping.
	TaskStopped TaskEventKind = "stopped"
	// TaskFailed: the task failed (Err); it is started again after
	// Config.RestartDelay if this process still owns it.
	TaskFailed TaskEventKind = "failed"
	// TaskFinished: the task's input ended and its output is committed
	// (Bounded).
	TaskFinished TaskEventKind = "finished"
	// TaskRevoked: a rebalance took the task from this process, which
	// has handed it over: reported once the revoke is done, after the
	// task's TaskStopped (or with none, when it was not running here: it
	// had finished, or was waiting to restart after a failure).
	TaskRevoked TaskEventKind = "revoked"
)

// TaskEvent is reported to Config.OnTask.
type TaskEvent struct {
	Task     string        `json:"task"`
	Kind     TaskEventKind `json:"kind"`
	Member   string        `json:"member"`
	Restored string        `json:"restored,omitempty"`
	// Epoch, on TaskStarted, is the claim on the task's checkpoint
	// location this start made (checkpoint.Fence.Epoch, C4): every start
	// of a task, in any process, claims a greater one. A run that a newer
	// claim superseded fails with checkpoint.ErrFenced, whose message
	// names both epochs, so the two starts can be told apart in the
	// processes' logs.
	Epoch int64 `json:"epoch,omitempty"`
	// Job is the task's running job (TaskStarted only), for a caller that
	// shows it (a dashboard); it must not be cancelled or waited for.
	Job *runtime.Job `json:"-"`
	Err string       `json:"err,omitempty"`
	// Time is the wall-clock time of the event, Unix ms.
	Time int64 `json:"time"`
	// SessionLost, on TaskStopped, says the task may have run in another
	// process before it stopped here: this process lost its group
	// session (the task stopped without a checkpoint, M3), or its
	// hand-over took longer than Config.RebalanceTimeout, so the group
	// may have removed the process and given the task away meanwhile. C2
	// does not hold across such a stop; fencing (C4, the transactional
	// ids) does.
	SessionLost bool `json:"session_lost,omitempty"`
}

// GroupMember is one process of the job as the group describes it.
type GroupMember struct {
	// Member is the process's Config.Member.
	Member string `json:"member"`
	// Host is the address the brokers see the process connect from.
	Host string `json:"host"`
	// URL is the process's Config.Advertise ("" if none).
	URL string `json:"url,omitempty"`
	// Tasks are the tasks the group assigned to the process, in the order
	// of Tasks.
	Tasks []string `json:"tasks"`
}

// groupClientID is the client id of the group membership of member:
// "weir-<member>", then " url=<advertise>" when set.
func groupClientID(member, advertise string) string {
	if advertise == "" {
		return "weir-" + member
	}
	return "weir-" + member + " url=" + advertise
}

// parseGroupClientID reverses groupClientID; ok is false for a client
// that is not a weir member.
func parseGroupClientID(id string) (member, advertise string, ok bool) {
	rest, ok := strings.CutPrefix(id, "weir-")
	if !ok {
		return "", "", false
	}
	if i := strings.LastIndex(rest, " url="); i >= 0 {
		return rest[:i], rest[i+len(" url="):], true
	}
	return rest, "", true
}

// clientOptions are the options of the clients the cluster package makes
// itself (group membership, topic preparation): Security's, then
// ClientOptions. c must come from withDefaults.
func (c Config) clientOptions() []kgo.Opt {
	return append(append([]kgo.Opt(nil), c.secOpts...), c.ClientOptions...)
}

// plainClientOptions are the options of a client of the cluster package's
// own that only asks the brokers (topics, offsets, the group's members):
// the seed brokers, then clientOptions.
func (c Config) plainClientOptions() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds(c.Brokers)...)}, c.clientOptions()...)
}
