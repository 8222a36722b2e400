package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// The clustered form's invariant (the package documentation numbers it).
const (
	InvClusterExactlyOnce = "S16 clustered exactly-once output (C1, read_committed)"
)

// The clustered form's fault kinds.
const (
	// FaultMemberKill kills member Subtask when the At-th record (over
	// every member, restores included) passes the source tasks: its
	// connections to the broker are cut and refused from then on, then
	// its context is cancelled, so nothing it does afterwards (a
	// hand-over checkpoint's transactions, leaving the group) reaches
	// Kafka, as after kill -9; the group gives its tasks to the others
	// after the session timeout.
	FaultMemberKill FaultKind = "member-kill"
	// FaultMemberJoin starts a new member (index Subtask) when the At-th
	// record passes the source tasks: a rebalance moves tasks to it,
	// each checkpointed by its old owner (M2).
	FaultMemberJoin FaultKind = "member-join"
	// FaultGroupRetriable answers Repeat requests of the group kind
	// Request (JoinGroup, SyncGroup, Heartbeat), from the At-th of the
	// run on, over every member, with the retriable error Err: the
	// members' group clients must absorb it (rejoin, retry).
	// FaultBrokerRetriable strikes the form's data path the same way
	// (fetches, produces, transactions, as the Kafka form draws them).
	FaultGroupRetriable FaultKind = "group-retriable"
	// FaultMemberRestart is not drawn: it records that the harness, as
	// the operator, started member Subtask again after its Run returned
	// an error At (the restart's number), once a fatal broker error had
	// struck (clusterfatal.go).
	FaultMemberRestart FaultKind = "member-restart"
)

// clusterGroupRequests are the group calls FaultGroupRetriable strikes,
// with the retriable errors each may get. (OffsetCommit is not among
// them: the members commit no offsets, their group only assigns tasks.)
var clusterGroupRequests = []struct {
	key       kmsg.Key
	retriable []*kerr.Error
}{
	{kmsg.JoinGroup, []*kerr.Error{kerr.RebalanceInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress}},
	{kmsg.SyncGroup, []*kerr.Error{kerr.RebalanceInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator}},
	{kmsg.Heartbeat, []*kerr.Error{kerr.RebalanceInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator}},
}

// generateClusterFaults draws the form's broker and group faults from a
// stream of their own (after the kills and joins, which keep theirs):
// up to three retriable broker errors on the data path and up to two on
// group calls, each 1-3 requests in a row from a drawn request count.
func generateClusterFaults(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0xc1f7))
	var fs []Fault
	for range rng.IntN(4) {
		r := kafkaRequests[rng.IntN(len(kafkaRequests))]
		fs = append(fs, Fault{Kind: FaultBrokerRetriable, Request: r.key.Name(), Err: r.retriable[rng.IntN(len(r.retriable))].Message,
			At: 1 + rng.Int64N(20), Repeat: 1 + rng.IntN(3)})
	}
	for range rng.IntN(3) {
		r := clusterGroupRequests[rng.IntN(len(clusterGroupRequests))]
		fs = append(fs, Fault{Kind: FaultGroupRetriable, Request: r.key.Name(), Err: r.retriable[rng.IntN(len(r.retriable))].Message,
			At: 1 + rng.Int64N(8), Repeat: 1 + rng.IntN(3)})
	}
	return fs
}

// armCluster installs the broker and group faults of fs in c for the
// members' run; each armed fault says whether it struck. disarm removes
// them, so that the harness's own reads after the run (the output's
// offsets and records) see no fault: a fault that had not struck the
// members would otherwise strike the checker (seed 5288035373167022569's
// ListOffsets#20 once did).
func armCluster(kc *kafkaCluster, fs []Fault) (as []*armed, disarm func()) {
	c := kc.cluster()
	var handles []*kfake.FaultHandle
	var off atomic.Bool // the latency and restart controls stay, idle, once disarmed
	for i := range fs {
		f := &fs[i]
		if f.Kind == FaultLatency {
			as = append(as, armLatency(c, f, &off))
			continue
		}
		if f.Kind == FaultBrokerRestart {
			as = append(as, armRestart(c, &kc.bn, f, &off))
			continue
		}
		if f.Kind != FaultBrokerRetriable && f.Kind != FaultGroupRetriable && f.Kind != FaultBrokerFatal {
			continue
		}
		key, ok := requestKey(f.Request)
		if !ok {
			for _, r := range clusterGroupRequests {
				if r.key.Name() == f.Request {
					key, ok = r.key, true
				}
			}
		}
		if !ok {
			continue
		}
		e := kerrByName(f.Err)
		for _, r := range clusterGroupRequests {
			for _, g := range r.retriable {
				if g.Message == f.Err {
					e = g
				}
			}
		}
		a := &armed{f: f, key: key}
		as = append(as, a)
		handles = append(handles, c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: e, Count: -1,
			When: func(req kmsg.Request) bool {
				if a.count(req) {
					a.struck.Store(true)
					return true
				}
				return false
			}}))
	}
	return as, func() {
		off.Store(true)
		kc.bn.recover(nil)
		for _, h := range handles {
			h.Remove()
		}
	}
}

// ClusterSpec is the clustered form of a seed's job (Spec.Cluster): the
// workload's records in a source topic of several partitions, run by
// Members cluster.Run members in this process over a consumer group of
// kfake, KeyedTasks keyed tasks with a keyed tumbling window and the
// exactly-once sink; members killed and joining as Faults say. Drawn
// from a stream of its own.
type ClusterSpec struct {
	Partitions    int   `json:"partitions"`
	Members       int   `json:"members"`
	KeyedTasks    int   `json:"keyed_tasks"`
	OutPartitions int   `json:"out_partitions"`
	BoundMS       int64 `json:"bound_ms"`
	// Static makes every member a static member (cluster
	// Config.StaticMembership, KIP-345: group.instance.id "m<i>"); drawn
	// in half the clustered seeds from a stream of its own
	// (clusterlatency.go).
	Static bool `json:"static,omitempty"`
	// Faults: member kills and joins, each at a record count.
	Faults  []Fault       `json:"faults"`
	Records []KafkaRecord `json:"-"`
}

// generateCluster draws the clustered form of s from its own stream of
// the seed (about one seed in clusterOneIn), after everything Generate
// draws, so that the other forms of a seed do not change.
func generateCluster(s *Spec) *ClusterSpec {
	rng := rand.New(rand.NewPCG(s.Seed, 0xc105))
	if rng.IntN(clusterOneIn) != 0 {
		return nil
	}
	c := &ClusterSpec{
		Partitions:    2 + rng.IntN(3),
		Members:       2 + rng.IntN(2),
		KeyedTasks:    2 + rng.IntN(3),
		OutPartitions: 1 + rng.IntN(2),
	}
	c.Records, c.BoundMS = spreadRecords(s, rng, c.Partitions)
	n := int64(len(c.Records))
	if n == 0 {
		return c
	}
	// Kill at most Members-1 of the members started first, so one of
	// them survives; a joining member may come after.
	kills := rng.IntN(c.Members)
	for _, m := range rng.Perm(c.Members)[:kills] {
		c.Faults = append(c.Faults, Fault{Kind: FaultMemberKill, Subtask: m, At: 1 + rng.Int64N(n)})
	}
	if rng.IntN(2) == 0 {
		c.Faults = append(c.Faults, Fault{Kind: FaultMemberJoin, Subtask: c.Members, At: 1 + rng.Int64N(n)})
	}
	c.Faults = append(c.Faults, generateClusterFaults(s.Seed)...)
	c.Faults = append(c.Faults, generateClusterLatency(s.Seed)...)
	c.Static = drawStatic(s.Seed)
	c.Faults = append(c.Faults, generateClusterFatal(s.Seed)...)
	c.Faults = append(c.Faults, generateClusterRejoin(s.Seed, c)...)
	c.Faults = append(c.Faults, generateClusterRestarts(s.Seed)...) // brokerrestart.go
	return c
}

// clusterOneIn: one seed in clusterOneIn has a clustered form. A clustered
// run costs consumer-group rebalances and session time-outs (real time).
const clusterOneIn = 50

// spreadRecords spreads the workload's records over the partitions (as
// generateKafka does) and returns them with the watermark bound: the
// largest out-of-orderness within a partition.
func spreadRecords(s *Spec, rng *rand.Rand, partitions int) (recs []KafkaRecord, bound int64) {
	next := make([]int64, partitions)
	maxTS := make([]int64, partitions)
	for i := range maxTS {
		maxTS[i] = minWM
	}
	for _, st := range s.Steps {
		if st.Kind != StepRecord {
			continue
		}
		p := int32(rng.IntN(partitions))
		ts := kafkaTSBase + st.TS
		recs = append(recs, KafkaRecord{Partition: p, Offset: next[p], Key: st.Key, TS: ts, ID: st.ID})
		next[p]++
		if maxTS[p] != minWM {
			bound = max(bound, maxTS[p]-ts)
		}
		maxTS[p] = max(maxTS[p], ts)
	}
	return recs, bound
}

func (c *ClusterSpec) shape() string {
	static := ""
	if c.Static {
		static = " (static)"
	}
	return fmt.Sprintf("clustered %d members%s, %d source partitions, %d keyed tasks, bound %dms, %d output partitions", c.Members, static, c.Partitions, c.KeyedTasks, c.BoundMS, c.OutPartitions)
}

// cevent is what crosses the exchange topic: a record with where it was
// read (for the record lines).
type cevent struct {
	Key string `json:"k"`
	ID  int64  `json:"i"`
	TS  int64  `json:"t"`
	P   int32  `json:"p"`
	Off int64  `json:"o"`
}

// memberNet is one member's view of the virtual network: kill cuts every
// connection it has and refuses new ones.
type memberNet struct {
	kc *kafkaCluster
	mu struct {
		sync.Mutex
		dead  bool
		conns []net.Conn
	}
}

func (m *memberNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	m.mu.Lock()
	dead := m.mu.dead
	m.mu.Unlock()
	if dead {
		return nil, errors.New("sim: member killed")
	}
	c, err := m.kc.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.dead {
		c.Close()
		return nil, errors.New("sim: member killed")
	}
	m.mu.conns = append(m.mu.conns, c)
	return c, nil
}

func (m *memberNet) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.dead = true
	for _, c := range m.mu.conns {
		c.Close()
	}
	m.mu.conns = nil
}

// heal lets a killed member reach the broker again, once the run is over:
// what is left of it (a hand-over checkpoint's flush waits for the
// broker, bounded only by the sink's FlushTimeout) is fenced there by the
// tasks' new owners and ends.
func (m *memberNet) heal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.dead = false
}

// clusterRun is one clustered run: the broker, the members, and the
// record count that triggers the faults.
type clusterRun struct {
	spec *Spec
	c    *ClusterSpec
	kc   *kafkaCluster
	base string
	ctx  context.Context // the run's: members joining late start under it
	over context.CancelFunc
	seen atomic.Int64
	// armed are the broker and group faults armed for the members.
	armed []*armed
	// timeout bounds the run (AttemptTimeout, or the tests').
	timeout time.Duration

	mu struct {
		sync.Mutex
		members map[int]*clusterMember
		// restarts counts the members the harness started again
		// after their Run returned an error (clusterfatal.go), and
		// restarted records them (appended to the form's faults once
		// the members have stopped: passed reads Faults unlocked).
		restarts  int
		restarted []Fault
		// gone are the instances replaced by a later start of their
		// member (a rejoin, a restart): stopAll stops them too.
		gone []*clusterMember
	}
	// own is the check of C2 on the task events; guarded by mu.
	own ownership
	wg  sync.WaitGroup
}

type clusterMember struct {
	index  int
	net    *memberNet
	cancel context.CancelFunc
	done   chan error
	killed bool
}

// runCluster runs the clustered form of spec: produce the input, start the
// members, kill and add members as drawn, wait for the survivors to finish
// the bounded job, read the output back with read_committed and check
// S16.
func runCluster(ctx context.Context, spec *Spec, o Options, res *Result) *Failure {
	c := spec.Cluster
	ks := &KafkaSpec{Partitions: c.Partitions, OutPartitions: c.OutPartitions, Records: c.Records}
	kc := &kafkaCluster{vn: &kfake.VirtualNetwork{}}
	kcl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(kafkaPort), kfake.ListenFn(kc.vn.Listen),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(int32(c.Partitions), kafkaIn), kfake.SeedTopics(int32(c.OutPartitions), kafkaOut))
	if err != nil {
		return &Failure{Invariant: InvCompletes, Detail: "sim: kfake: " + err.Error()}
	}
	kc.mu.c = kcl
	defer kc.close()
	if err := kc.produceInput(ctx, ks); err != nil {
		return &Failure{Invariant: InvCompletes, Detail: err.Error()}
	}
	// The broker and group faults strike the members' requests (armed
	// once the harness has produced the input).
	armedFaults, disarm := armCluster(kc, c.Faults)
	defer disarm()
	// The cluster package keeps checkpoints in a location of package
	// checkpoint (a directory or an object store URL), not a vfs.FS: a
	// temporary directory, in memory where the machine has /dev/shm.
	base, err := os.MkdirTemp(shmDir(), "weir-sim-cluster-")
	if err != nil {
		return &Failure{Invariant: InvCompletes, Detail: err.Error()}
	}
	defer os.RemoveAll(base)
	timeout := AttemptTimeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mctx, over := context.WithCancel(ctx) // the members' and expire's, cancelled by stopAll
	defer over()
	cr := &clusterRun{spec: spec, c: c, kc: kc, base: base, ctx: mctx, over: over, armed: armedFaults, timeout: timeout}
	cr.mu.members = map[int]*clusterMember{}
	res.Attempts++
	for i := range c.Members {
		cr.start(mctx, i)
	}
	f := cr.wait(ctx)
	cr.stopAll()
	disarm()
	c.Faults = append(c.Faults, cr.mu.restarted...)
	for _, a := range armedFaults {
		if a.struck.Load() {
			a.f.Struck = true
		}
	}
	if f != nil {
		return f
	}
	kr := &kafkaRun{kc: kc}
	got, f := kr.readCommitted(ctx)
	if f != nil {
		f.Invariant = InvClusterExactlyOnce + " (" + f.Invariant + ")"
		return f
	}
	lines := make([]string, len(got))
	for i, r := range got {
		lines[i] = r.line
	}
	if f := compareLines(KafkaReference(ks, spec.WindowMS), sortedCopy(lines)); f != nil {
		f.Invariant = InvClusterExactlyOnce
		return f
	}
	return cr.ownerFailure()
}

func shmDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

func sortedCopy(ls []string) []string {
	out := slices.Clone(ls)
	slices.Sort(out)
	return out
}

// config is member i's cluster.Config: short group and checkpoint
// timings (the run's real time is mostly rebalances and session
// time-outs). The session time-out is longer than a rebalance can park a
// member's JoinGroup or SyncGroup (simSessionTimeout).
func (cr *clusterRun) config(i int, mn *memberNet) cluster.Config {
	return cluster.Config{Brokers: cr.kc.seeds(), Group: "sim", SourceTopic: kafkaIn, KeyedTasks: cr.c.KeyedTasks,
		CheckpointBase: cr.base, CheckpointInterval: 20 * time.Millisecond, ControlInterval: 5 * time.Millisecond,
		Bounded: true, SessionTimeout: simSessionTimeout, HeartbeatInterval: 30 * time.Millisecond,
		RevokeCheckpointTimeout: simRevokeTimeout, RebalanceTimeout: simRebalanceTimeout, RestartDelay: 10 * time.Millisecond,
		Member: "m" + strconv.Itoa(i), Logger: clusterLogger(i),
		ClientOptions: mn.clientOpts(), StaticMembership: cr.c.Static}
}

// The group timings of the form. kfake, unlike Kafka, lets a member's
// session time-out run while its JoinGroup or SyncGroup is parked at the
// coordinator (Kafka keeps a member awaiting a join or a sync alive), and
// a member removed that way never gets an answer: its request waits for
// franz-go's read time-out (the rebalance time-out plus 10s), and with a
// killed member still in the group the join was parked for the whole
// rebalance time-out (1s then), past the session time-out (300ms then):
// the survivor stalled 11s, once past the seed's minute (seed 47, S4).
// So the session time-out here is well above the longest a request is
// parked (the rebalance time-out, from the latest join, plus the
// revoke's hand-over checkpoint before a member's second join), and a
// killed member is still noticed within a second.
//
// The rebalance time-out (franz-go's default is a minute) is how long a
// rebalance waits for every member to rejoin, a member that hands tasks
// over included: it must outlast the hand-over (the revoke's checkpoint,
// simRevokeTimeout, then the task's stop), or the group removes the
// member and gives its tasks away while it still runs them. With 200ms
// against a 300ms hand-over checkpoint, 8 of the first 100 clustered
// seeds under load had a task in two live members at once (C2, S16).
const (
	simSessionTimeout   = time.Second
	simRebalanceTimeout = 500 * time.Millisecond
	simRevokeTimeout    = 150 * time.Millisecond
)

// clientOpts are the options of every Kafka client of the member: its
// own dialer on the virtual network and short back-offs.
func (m *memberNet) clientOpts() []kgo.Opt {
	return clientOpts(m.dial)
}

// job is the clustered job: source records to cevents (counting them, for
// the faults), keyed by key, a tumbling window and a record line per
// record, into the exactly-once sink.
func (cr *clusterRun) job(mn *memberNet) cluster.Job[kafka.Message[string], cevent, string, string] {
	size := time.Duration(cr.spec.WindowMS) * time.Millisecond
	return cluster.Job[kafka.Message[string], cevent, string, string]{
		Source:     kafka.WithMetadata(kafka.String()),
		Watermarks: watermark.ForBoundedOutOfOrderness[kafka.Message[string]](time.Duration(cr.c.BoundMS) * time.Millisecond),
		Upstream: func(s weir.Stream[kafka.Message[string]]) weir.Stream[cevent] {
			return weir.MapErr(s, "count", func(m kafka.Message[string]) (cevent, error) {
				id, err := strconv.ParseInt(m.Value, 10, 64)
				if err != nil {
					return cevent{}, fmt.Errorf("sim: input value %q", m.Value)
				}
				cr.passed(cr.seen.Add(1))
				return cevent{Key: string(m.Key), ID: id, TS: m.Timestamp, P: m.Partition, Off: m.Offset}, nil
			})
		},
		Key: func(e cevent) string { return e.Key },
		Keyed: func(ks weir.KeyedStream[string, cevent]) weir.Stream[string] {
			late := weir.NewOutputTag[cevent]("late")
			w := window.AggregateKeyed(ks, "window", window.Tumbling(size), window.AggregateFuncs[cevent, acc, acc]{
				AddFn:    func(e cevent, a acc) acc { return acc{N: a.N + 1, Sum: a.Sum + e.ID} },
				ResultFn: func(a acc) acc { return a },
				MergeFn:  func(a, b acc) acc { return acc{N: a.N + b.N, Sum: a.Sum + b.Sum} },
			}, window.LateOutput(late)).UID("window")
			winLines := weir.Map(w, "window-lines", func(r window.Result[string, acc]) string {
				return windowLine(r.Key, r.Window.Start, r.Window.End, r.Value.N, r.Value.Sum)
			}).UID("window-lines")
			lateLines := weir.Map(weir.SideOutput(w, late), "late-lines", func(e cevent) string {
				return lateLine(e.Key, e.TS, e.ID)
			}).UID("late-lines")
			recLines := weir.Map(ks.Stream, "record-lines", func(e cevent) string {
				return recordLine(e.P, e.Off, e.Key, e.TS, e.ID)
			}).UID("record-lines")
			return weir.Union(winLines, lateLines, recLines)
		},
		Sink: kafka.SinkOptions[string]{Topic: kafkaOut, TransactionalIDPrefix: "sim", ClientOptions: mn.clientOpts(),
			Serialize: func(s string) (*kgo.Record, error) { return &kgo.Record{Value: []byte(s)}, nil }},
	}
}

// passed strikes the faults due at the n-th record.
func (cr *clusterRun) passed(n int64) {
	for i := range cr.c.Faults {
		f := &cr.c.Faults[i]
		if f.At != n || (f.Kind != FaultMemberKill && f.Kind != FaultMemberJoin) {
			continue
		}
		cr.mu.Lock()
		if f.Struck {
			cr.mu.Unlock()
			continue
		}
		f.Struck = true
		cr.mu.Unlock()
		switch f.Kind {
		case FaultMemberKill:
			cr.kill(f.Subtask)
		case FaultMemberJoin:
			// Not on the task's goroutine: Run joins the group.
			go cr.start(cr.ctx, f.Subtask)
		}
	}
}

// start starts member i in a goroutine of its own with its own context.
func (cr *clusterRun) start(ctx context.Context, i int) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.mu.members == nil { // the run is over
		return
	}
	mn := &memberNet{kc: cr.kc}
	mctx, cancel := context.WithCancel(ctx)
	m := &clusterMember{index: i, net: mn, cancel: cancel, done: make(chan error, 1)}
	if old := cr.mu.members[i]; old != nil {
		cr.mu.gone = append(cr.mu.gone, old)
	}
	cr.mu.members[i] = m
	cfg, job := cr.config(i, mn), cr.job(mn)
	cfg.OnTask = func(ev cluster.TaskEvent) { cr.onTask(m, i, ev) }
	cr.wg.Add(1)
	go func() {
		defer cr.wg.Done()
		// Labelled, so that a member that does not finish shows where
		// it waits (wait) and its goroutines alone.
		pprof.Do(mctx, pprof.Labels(memberLabel, cr.memberID(i)), func(mctx context.Context) {
			m.done <- cluster.Run(mctx, cfg, job)
		})
	}()
}

// memberLabel is the pprof label key of a member's goroutines; its value
// is memberID.
const memberLabel = "weir_sim_member"

// memberID names member i of this run among every run of the process.
func (cr *clusterRun) memberID(i int) string {
	return fmt.Sprintf("%p-m%d", cr, i)
}

// kill cuts member i off the broker and cancels its context.
func (cr *clusterRun) kill(i int) {
	cr.mu.Lock()
	m := cr.mu.members[i]
	if m != nil {
		m.killed = true
	}
	cr.mu.Unlock()
	if m == nil {
		return
	}
	m.net.kill()
	m.cancel()
	cr.wg.Add(1)
	go func() {
		defer cr.wg.Done()
		if f := cr.rejoinOf(i); f != nil {
			cr.rejoin(i, f) // within its session: not removed (clusterrejoin.go)
			return
		}
		cr.expire(i)
	}()
}

// expire does, a session time-out after member i was killed, what Kafka's
// coordinator does then and kfake does not always do: it removes the
// member from the group. kfake arms a member's session timer when an
// answer reaches it; a member that joined as a new one (its timer
// stopped) and was killed before its JoinGroup answer reached it has
// none, and when the leader's SyncGroup completes the rebalance (which
// stops the pending-sync timer) it stays in the group for good with the
// tasks the leader gave it: no other member is ever given them (seed 47,
// the survivor heartbeating a minute beside a dead member's tasks). So
// the harness sends the LeaveGroup the session expiry stands for, by the
// member's id (its client id is weir-m<i>); a member Kafka removed
// already is unknown and answers nothing to do.
func (cr *clusterRun) expire(i int) {
	t := time.NewTimer(2 * simSessionTimeout)
	defer t.Stop()
	select {
	case <-cr.ctx.Done():
		return
	case <-t.C:
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cr.kc.seeds()...)}, cr.kc.clientOpts()...)...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cr.ctx, 5*time.Second)
	defer cancel()
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, "sim")
	if err != nil {
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = "sim"
	for _, d := range gs["sim"].Members {
		if d.ClientID == "weir-m"+strconv.Itoa(i) {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = d.MemberID
			lm.InstanceID = d.InstanceID // a static member's
			lm.Reason = kmsg.StringPtr("sim: the member was killed; its session expired")
			req.Members = append(req.Members, lm)
		}
	}
	if len(req.Members) > 0 {
		req.RequestWith(ctx, cl)
	}
}

// wait waits until every member not killed has returned nil (the bounded
// job finished). A killed member is not waited for: it is cut off the
// broker, so its hand-over checkpoint may wait for a flush until the run
// is over (stopAll).
func (cr *clusterRun) wait(ctx context.Context) *Failure {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	ended := map[*clusterMember]bool{}
	for {
		cr.mu.Lock()
		all, running := true, 0
		var fail *Failure
		var restart []int
		for i, m := range cr.mu.members {
			if ended[m] {
				continue
			}
			select {
			case err := <-m.done:
				ended[m] = true
				if err != nil && !m.killed {
					if cr.mu.restarts < maxMemberRestarts*cr.brokerFaultsStruck() {
						// The operator starts it again (clusterfatal.go).
						cr.mu.restarts++
						restart = append(restart, i)
						continue
					}
					fail = &Failure{Invariant: InvCompletes, Detail: fmt.Sprintf("clustered member m%d: %v", i, err)}
				}
			default:
				if !m.killed {
					all = false
					running++
				}
			}
		}
		cr.mu.Unlock()
		if fail != nil {
			return fail
		}
		for _, i := range restart {
			cr.mu.Lock()
			cr.mu.restarted = append(cr.mu.restarted, Fault{Kind: FaultMemberRestart, Subtask: i, At: int64(len(cr.mu.restarted) + 1), Struck: true})
			cr.mu.Unlock()
			cr.kc.bn.awaitUp(ctx)
			cr.start(cr.ctx, i)
			all = false
		}
		// Every member started and not killed has ended. (A join that strikes on the
		// last records may start a member after this: it finds every
		// task finished, or stopAll stops it.)
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			if os.Getenv("WEIR_SIM_DEBUG") != "" {
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
			return cr.stalled(ended)
		case <-tick.C:
		}
	}
}

// stalled is S4's failure when the members not killed have not finished:
// it names them, with where their goroutines wait (the first frames
// outside the runtime of each distinct stack, as S6 prints them).
func (cr *clusterRun) stalled(ended map[*clusterMember]bool) *Failure {
	f := &Failure{Invariant: InvCompletes, TimedOut: true}
	cr.mu.Lock()
	var running []int
	for i, m := range cr.mu.members {
		if !ended[m] && !m.killed {
			running = append(running, i)
		}
	}
	cr.mu.Unlock()
	slices.Sort(running)
	for _, i := range running {
		n, stacks := goroutinesWith(memberLabel, cr.memberID(i))
		f.Records = append(f.Records, fmt.Sprintf("member m%d: %d goroutines", i, n))
		for _, st := range stacks {
			f.Records = append(f.Records, "m"+strconv.Itoa(i)+": "+st)
		}
	}
	f.Detail = fmt.Sprintf("the clustered job did not finish within %v (members %v running)", cr.timeout, running)
	return f
}

// stopAll stops every member still running, lets the killed ones reach
// the broker again, and waits for them all. It runs before the output is
// read: whatever a killed member still does then is in what is checked.
func (cr *clusterRun) stopAll() {
	cr.over()
	cr.mu.Lock()
	for _, m := range cr.mu.members {
		m.net.heal()
		m.cancel()
	}
	for _, m := range cr.mu.gone {
		m.net.heal()
		m.cancel()
	}
	cr.mu.members = nil
	cr.mu.Unlock()
	cr.wg.Wait()
}

// clusterLogger is member i's logger: discarded, unless WEIR_SIM_DEBUG is
// set (then to stderr, for a seed being looked into).
func clusterLogger(i int) *slog.Logger {
	if os.Getenv("WEIR_SIM_DEBUG") == "" {
		return quiet
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", i)
}
