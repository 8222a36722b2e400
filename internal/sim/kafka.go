package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// The Kafka form's invariants (the package documentation numbers them).
const (
	InvKafkaExactlyOnce = "S13 exactly-once Kafka output (read_committed)"
	InvKafkaNoAborted   = "S14 no transaction of a failed attempt committed beyond its checkpoints"
	InvKafkaResume      = "S15 the Kafka source resumes from its checkpointed offsets"
)

// The Kafka form's fault kinds. FaultRecord and FaultWrite keep their
// meaning (the write fault strikes the At-th record into a sink subtask,
// in the operator chained before weir's Kafka sink); the others act in
// the broker.
const (
	// FaultBrokerFatal answers the At-th request of kind Request of the
	// attempt with the non-retriable error Err: the attempt fails.
	FaultBrokerFatal FaultKind = "broker-fatal"
	// FaultBrokerRetriable answers Repeat requests of kind Request, from
	// the At-th of the attempt on, with the retriable error Err: franz-go
	// (or weir's own fetch and EndTxn loops) must absorb it. Armed in
	// every attempt.
	FaultBrokerRetriable FaultKind = "broker-retriable"
	// FaultLatency delays the answer to the At-th request of kind Request
	// of the attempt by DelayMS milliseconds. Armed in every attempt.
	FaultLatency FaultKind = "latency"
)

// kafkaTSBase shifts the workload's timestamps: Kafka timestamps are
// milliseconds since 1970 and must not be negative.
const kafkaTSBase = 1_000_000_000_000

// KafkaRecord is one record of the Kafka form's input topic.
type KafkaRecord struct {
	Partition int32
	Offset    int64 // its offset: records are produced in order, one producer
	Key       string
	TS        int64
	ID        int64
}

// KafkaSpec is the Kafka form of a seed's job (Spec.Kafka): the workload's
// records in a topic of several partitions, read by weir's Kafka source
// (bounded: Options.Stop closed at the start), keyed tumbling windows, and
// weir's exactly-once Kafka sink. It is drawn from a stream of its own.
type KafkaSpec struct {
	Partitions        int `json:"partitions"`
	SourceParallelism int `json:"source_parallelism"`
	OutPartitions     int `json:"out_partitions"`
	// BoundMS is the watermark's out-of-orderness bound: above the
	// largest out-of-orderness within a partition, so no record is ever
	// late, whatever the order in which partitions are read.
	BoundMS int64 `json:"bound_ms"`
	// Every is how many records pass the source between checkpoint
	// requests.
	Every int `json:"every"`
	// Faults: the n-th is armed in the n-th attempt (record, write,
	// broker-fatal); Background faults (retriable errors,
	// latency) in every attempt.
	Faults     []Fault       `json:"faults"`
	Background []Fault       `json:"background"`
	Records    []KafkaRecord `json:"-"`
	// Session, in half the Kafka seeds (a stream of its own), adds keyed
	// event-time session windows; WindowLatenessMS, drawn with it, is the
	// tumbling window's allowed lateness (kafkasession.go).
	Session          *SessionSpec `json:"session,omitempty"`
	WindowLatenessMS int64        `json:"window_lateness_ms,omitempty"`
}

// kafkaRequests are the request kinds faults strike, with the errors
// each may get: retriable ones (franz-go or weir retries) and fatal ones
// (the attempt fails).
var kafkaRequests = []struct {
	key              kmsg.Key
	retriable, fatal []*kerr.Error
}{
	{kmsg.Fetch, []*kerr.Error{kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition}, []*kerr.Error{kerr.TopicAuthorizationFailed}},
	{kmsg.ListOffsets, []*kerr.Error{kerr.NotLeaderForPartition, kerr.LeaderNotAvailable}, []*kerr.Error{kerr.TopicAuthorizationFailed}},
	{kmsg.Produce, []*kerr.Error{kerr.NotLeaderForPartition, kerr.RequestTimedOut}, []*kerr.Error{kerr.InvalidTxnState, kerr.TopicAuthorizationFailed}},
	{kmsg.InitProducerID, []*kerr.Error{kerr.CoordinatorNotAvailable, kerr.ConcurrentTransactions}, []*kerr.Error{kerr.TransactionalIDAuthorizationFailed}},
	{kmsg.AddPartitionsToTxn, []*kerr.Error{kerr.CoordinatorNotAvailable, kerr.ConcurrentTransactions}, []*kerr.Error{kerr.InvalidTxnState}},
	{kmsg.EndTxn, []*kerr.Error{kerr.CoordinatorNotAvailable, kerr.NotCoordinator}, []*kerr.Error{kerr.ProducerFenced, kerr.InvalidTxnState, kerr.UnknownServerError}},
}

func requestKey(name string) (kmsg.Key, bool) {
	for _, r := range kafkaRequests {
		if r.key.Name() == name {
			return r.key, true
		}
	}
	return 0, false
}

func kerrByName(name string) *kerr.Error {
	for _, r := range kafkaRequests {
		for _, e := range append(slices.Clone(r.retriable), r.fatal...) {
			if e.Message == name {
				return e
			}
		}
	}
	return kerr.UnknownServerError
}

// generateKafka draws the Kafka form of s from its own stream of the seed
// (about a third of the seeds), after everything Generate draws: the
// records are the workload's, spread over the partitions.
func generateKafka(s *Spec) *KafkaSpec {
	rng := rand.New(rand.NewPCG(s.Seed, 0x4afa))
	if rng.IntN(3) != 0 {
		return nil
	}
	k := &KafkaSpec{
		Partitions:        2 + rng.IntN(5),
		SourceParallelism: 1 + rng.IntN(3),
		OutPartitions:     1 + rng.IntN(3),
	}
	next := make([]int64, k.Partitions)
	maxTS := make([]int64, k.Partitions)
	for i := range maxTS {
		maxTS[i] = minWM
	}
	for _, st := range s.Steps {
		if st.Kind != StepRecord {
			continue
		}
		p := int32(rng.IntN(k.Partitions))
		ts := kafkaTSBase + st.TS
		k.Records = append(k.Records, KafkaRecord{Partition: p, Offset: next[p], Key: st.Key, TS: ts, ID: st.ID})
		next[p]++
		if maxTS[p] != minWM {
			k.BoundMS = max(k.BoundMS, maxTS[p]-ts)
		}
		maxTS[p] = max(maxTS[p], ts)
	}
	k.Every = max(1, len(k.Records)/(2+rng.IntN(8)))
	lines := int64(len(KafkaReference(k, s.WindowMS)))
	for range rng.IntN(4) {
		f := Fault{Subtask: rng.IntN(s.Parallelism)}
		switch rng.IntN(4) {
		case 0:
			f.Kind, f.At = FaultRecord, 1+rng.Int64N(int64(len(k.Records)))
		case 1:
			f.Kind, f.At = FaultWrite, 1+rng.Int64N(lines/int64(s.Parallelism)+1)
		default:
			r := kafkaRequests[rng.IntN(len(kafkaRequests))]
			f.Kind, f.Request, f.Err = FaultBrokerFatal, r.key.Name(), r.fatal[rng.IntN(len(r.fatal))].Message
			f.At = 1 + rng.Int64N(requestSpread(r.key))
		}
		f.Machine = rng.IntN(2) == 0
		k.Faults = append(k.Faults, f)
	}
	for range rng.IntN(4) {
		r := kafkaRequests[rng.IntN(len(kafkaRequests))]
		f := Fault{Request: r.key.Name(), At: 1 + rng.Int64N(requestSpread(r.key))}
		if rng.IntN(2) == 0 {
			f.Kind, f.Err, f.Repeat = FaultBrokerRetriable, r.retriable[rng.IntN(len(r.retriable))].Message, 1+rng.IntN(3)
		} else {
			f.Kind, f.DelayMS = FaultLatency, 1+rng.Int64N(5)
		}
		k.Background = append(k.Background, f)
	}
	k.Background = append(k.Background, generateKafkaRestarts(s.Seed)...) // a stream of their own
	generateKafkaSession(s, k)                                            // a stream of its own
	return k
}

// requestSpread is the range of the n-th request a fault strikes: about
// how many requests of the kind an attempt sends.
func requestSpread(k kmsg.Key) int64 {
	switch k {
	case kmsg.Fetch, kmsg.Produce:
		return 12
	case kmsg.ListOffsets, kmsg.EndTxn:
		return 4
	default:
		return 2
	}
}

// kafkaShape describes the Kafka form in a few words.
func (k *KafkaSpec) shape() string {
	s := fmt.Sprintf("kafka %d partitions read by %d subtasks, bound %dms, %d output partitions, exactly-once sink", k.Partitions, k.SourceParallelism, k.wmBound(), k.OutPartitions)
	if k.Session != nil {
		s += fmt.Sprintf(", window lateness %dms, %s", k.WindowLatenessMS, k.Session)
	}
	return s
}

// recordLine and kafkaWindowLine are the Kafka form's output lines: one
// per input record (with its partition and offset, for S15), one per
// window.
func recordLine(p int32, off int64, key string, ts, id int64) string {
	return fmt.Sprintf("R p=%d off=%d %s ts=%d id=%d", p, off, key, ts, id)
}

// KafkaReference is the Kafka form's committed output, from the workload
// alone: every record once as a record line, every (key, tumbling
// window) once with its count and the sum of its records' ids, and with
// KafkaSpec.Session every key's sessions once (kafkaSessionReference). No
// record is late (KafkaSpec.BoundMS), so each window fires once, complete,
// whatever the order in which the source read the partitions. Sorted.
func KafkaReference(k *KafkaSpec, windowMS int64) []string {
	type win struct {
		key    string
		start  int64
		n, sum int64
	}
	wins := map[[2]any]*win{}
	var out []string
	for _, r := range k.Records {
		out = append(out, recordLine(r.Partition, r.Offset, r.Key, r.TS, r.ID))
		start := r.TS - floorMod(r.TS, windowMS)
		w := wins[[2]any{r.Key, start}]
		if w == nil {
			w = &win{key: r.Key, start: start}
			wins[[2]any{r.Key, start}] = w
		}
		w.n++
		w.sum += r.ID
	}
	for _, w := range wins {
		out = append(out, windowLine(w.key, w.start, w.start+windowMS, w.n, w.sum))
	}
	if k.Session != nil {
		out = append(out, kafkaSessionReference(k)...)
	}
	slices.Sort(out)
	return out
}

// The topics and the transactional-id prefix of the Kafka form.
const (
	kafkaIn   = "in"
	kafkaOut  = "out"
	kafkaPort = 9092
)

// kafkaCluster is the in-process broker of one Kafka run (kfake on a
// virtual network), with the faults of the current attempt.
type kafkaCluster struct {
	vn *kfake.VirtualNetwork
	// bn is every client's way to vn: broker restarts reset and refuse
	// connections there (brokerrestart.go).
	bn brokerNet

	mu struct {
		sync.Mutex
		c *kfake.Cluster
		// latency: the latency faults of the current attempt and their
		// request counts.
		latency []*armed
	}
}

// armed is a fault armed in one attempt, with its request count (on the
// cluster goroutine) and whether it struck.
type armed struct {
	f      *Fault
	key    kmsg.Key
	n      int64
	last   kmsg.Request
	struck atomic.Bool
}

// count counts req once (When is called once per entity of a request) and
// reports whether it is within the fault's requests.
func (a *armed) count(req kmsg.Request) bool {
	if req != a.last {
		a.last = req
		a.n++
	}
	repeat := int64(max(1, a.f.Repeat))
	return a.n >= a.f.At && a.n < a.f.At+repeat
}

func newKafkaCluster(k *KafkaSpec) (*kafkaCluster, error) {
	kc := &kafkaCluster{vn: &kfake.VirtualNetwork{}}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(kafkaPort), kfake.ListenFn(kc.vn.Listen),
		kfake.SeedTopics(int32(k.Partitions), kafkaIn), kfake.SeedTopics(int32(k.OutPartitions), kafkaOut))
	if err != nil {
		return nil, fmt.Errorf("sim: kfake: %w", err)
	}
	kc.mu.c = c
	kc.installControls(c)
	return kc, nil
}

// installControls adds to c the controls that delay requests for latency
// faults.
func (kc *kafkaCluster) installControls(c *kfake.Cluster) {
	for _, r := range kafkaRequests {
		key := r.key
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			kc.maybeDelay(key, req)
			return nil, nil, false
		})
	}
}

func (kc *kafkaCluster) cluster() *kfake.Cluster {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	return kc.mu.c
}

// maybeDelay runs in a control function of the cluster: a latency fault
// of the attempt that matches the request stalls the broker for its
// delay (every connection waits, as behind a broker's GC pause or a slow
// disk). It sleeps in the control function itself, not with
// kfake's SleepControl: a cluster closed while a SleepControl sleep was in
// progress left a later control goroutine blocked on kfake's control mutex
// for good (S6 found it under load).
func (kc *kafkaCluster) maybeDelay(key kmsg.Key, req kmsg.Request) {
	kc.mu.Lock()
	var d time.Duration
	for _, a := range kc.mu.latency {
		if a.key == key && a.count(req) && !a.struck.Swap(true) {
			d = time.Duration(a.f.DelayMS) * time.Millisecond
		}
	}
	kc.mu.Unlock()
	if key == kmsg.Fetch && d == 0 {
		// Pacing: every fetch takes a millisecond, so that the source
		// reads the input over several checkpoints.
		d = time.Millisecond
	}
	if d > 0 {
		time.Sleep(d)
	}
}

// arm installs the error faults of one attempt and returns them with a
// function that removes them.
func (kc *kafkaCluster) arm(faults []*Fault) (as []*armed, disarm func()) {
	c := kc.cluster()
	var handles []*kfake.FaultHandle
	var lat []*armed
	off := new(atomic.Bool)
	for _, f := range faults {
		key, ok := requestKey(f.Request)
		if !ok {
			continue
		}
		if f.Kind == FaultBrokerRestart {
			as = append(as, armRestart(c, &kc.bn, f, off))
			continue
		}
		a := &armed{f: f, key: key}
		as = append(as, a)
		if f.Kind == FaultLatency {
			lat = append(lat, a)
			continue
		}
		handles = append(handles, c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerrByName(f.Err), Count: -1,
			When: func(req kmsg.Request) bool {
				if a.count(req) {
					a.struck.Store(true)
					return true
				}
				return false
			}}))
	}
	kc.mu.Lock()
	kc.mu.latency = lat
	kc.mu.Unlock()
	return as, func() {
		off.Store(true)
		kc.bn.recover(nil)
		for _, h := range handles {
			h.Remove()
		}
		kc.mu.Lock()
		kc.mu.latency = nil
		kc.mu.Unlock()
	}
}

func (kc *kafkaCluster) close() { kc.cluster().Close() }

// clientOpts are the options of every franz-go client of the run: the
// virtual network, and short back-offs (retries cost real time).
func (kc *kafkaCluster) clientOpts() []kgo.Opt { return clientOpts(kc.dial) }

// clientOpts are the options every franz-go client of the simulator
// takes (the Kafka and the clustered forms): dial through dial (the
// virtual network), short back-offs (retries cost real time), metadata
// refreshed at once after a retriable error (not after the default
// minimum age of 5s), and no KIP-714 telemetry for the broker (each
// client gzipped its metrics for kfake: 57% of the bytes a Kafka seed
// allocated).
func clientOpts(dial func(ctx context.Context, network, addr string) (net.Conn, error)) []kgo.Opt {
	return []kgo.Opt{kgo.Dialer(dial),
		kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }),
		kgo.MetadataMinAge(10 * time.Millisecond),
		kgo.DisableClientMetrics()}
}

func (kc *kafkaCluster) seeds() []string { return []string{"localhost:" + strconv.Itoa(kafkaPort)} }

// inputBatch is the records of one produce request of the input.
const inputBatch = 24

// produceInput writes the workload with a plain franz-go producer (not
// weir), in order, and checks every record landed at the offset the
// oracle gives it.
func (kc *kafkaCluster) produceInput(ctx context.Context, k *KafkaSpec) error {
	cl, err := kgo.NewClient(append(kc.clientOpts(), kgo.SeedBrokers(kc.seeds()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<16))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(k.Records))
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range k.Records {
		recs[i] = &kgo.Record{Topic: kafkaIn, Partition: r.Partition, Key: []byte(r.Key),
			Value: strconv.AppendInt(nil, r.ID, 10), Timestamp: time.UnixMilli(r.TS)}
		index[recs[i]] = i
	}
	// Small batches (a fetch returns whole batches): the source reads in
	// many small steps, and checkpoints fall in the middle of the input.
	var res kgo.ProduceResults
	for i := 0; i < len(recs); i += inputBatch {
		r := cl.ProduceSync(ctx, recs[i:min(i+inputBatch, len(recs))]...)
		if err := r.FirstErr(); err != nil {
			return fmt.Errorf("sim: produce the input: %w", err)
		}
		res = append(res, r...)
	}
	for _, r := range res { // in completion order
		if want := k.Records[index[r.Record]]; r.Record.Offset != want.Offset {
			return fmt.Errorf("sim: input record %d landed at %d/%d, the oracle says %d", want.ID, want.Partition, r.Record.Offset, want.Offset)
		}
	}
	return nil
}

// stamped is a line on its way into the Kafka sink, with where it comes
// from: the attempt, and the last checkpoint whose barrier passed before
// it (S14).
type stamped struct {
	Line    string
	Attempt int
	Ckpt    int64
}

// stamper is chained before the sink: it stamps each line, and fails the
// At-th record of its subtask for a write fault.
type stamper struct {
	runtime.Base[stamped]
	attempt int
	ckpt    int64
	fault   *Fault
	writes  int64
}

func (s *stamper) Open(ctx *runtime.Context, out runtime.Output[stamped]) error {
	s.Base.Open(ctx, out)
	if r := ctx.Restored(); r != nil {
		s.ckpt = r.CheckpointID
	}
	return nil
}

func (s *stamper) ProcessRecord(r runtime.Record[string]) error {
	s.writes++
	if f := s.fault; f != nil && f.Subtask == s.Ctx.Subtask && f.At == s.writes {
		f.Struck = true
		return fmt.Errorf("%w: write %d of sink subtask %d", ErrInjected, s.writes, s.Ctx.Subtask)
	}
	s.Out.Collect(runtime.Record[stamped]{Value: stamped{Line: r.Value, Attempt: s.attempt, Ckpt: s.ckpt}, Timestamp: r.Timestamp})
	return nil
}

func (s *stamper) SnapshotState(w *runtime.SnapshotWriter) error {
	s.ckpt = w.CheckpointID()
	return nil
}

// quiet discards the logs of the Kafka form's jobs (the connector logs
// every catch-up and stop at info level).
var quiet = slog.New(slog.DiscardHandler)

// kafkaRun is the state of one Kafka run across its attempts.
type kafkaRun struct {
	spec *Spec
	k    *KafkaSpec
	kc   *kafkaCluster
	fs   *vfs.MemFS
	// complete[a] is the highest complete checkpoint id in the storage
	// after attempt a (as the next attempt finds it), 0 if none.
	complete map[int]int64
	failed   map[int]bool
	// expired is the first checkpoint that kept what had expired (S18),
	// expiredRead how many checkpoints S18 read.
	expired     *Failure
	expiredRead int
	noExpired   bool
}

// runKafka runs the Kafka form of spec: produce the input, run the job
// until it completes (restoring after every failure), read the output
// back with read_committed and check S13-S15.
func runKafka(ctx context.Context, spec *Spec, o Options, res *Result) *Failure {
	k := spec.Kafka
	kc, err := newKafkaCluster(k)
	if err != nil {
		return &Failure{Invariant: InvCompletes, Detail: err.Error()}
	}
	defer kc.close()
	if err := kc.produceInput(ctx, k); err != nil {
		return &Failure{Invariant: InvCompletes, Detail: err.Error()}
	}
	kr := &kafkaRun{spec: spec, k: k, kc: kc, fs: vfs.NewCrashableMem(), complete: map[int]int64{}, failed: map[int]bool{}, noExpired: o.noExpired}
	if f := kr.attempts(ctx, o, res); f != nil {
		return f
	}
	if os.Getenv("WEIR_SIM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "sim: seed %d: kafka S18 read %d checkpoints\n", spec.Seed, kr.expiredRead)
	}
	if f := kr.check(ctx); f != nil {
		return f
	}
	return kr.expired
}

func (kr *kafkaRun) attempts(ctx context.Context, o Options, res *Result) *Failure {
	k := kr.k
	for n := 1; n <= MaxAttempts; n++ {
		res.Attempts++
		var fault *Fault
		if i := n - 1; i < len(k.Faults) {
			fault = &k.Faults[i]
		}
		armedFaults := []*Fault{}
		if fault != nil && fault.Kind == FaultBrokerFatal {
			armedFaults = append(armedFaults, fault)
		}
		for i := range k.Background {
			if k.Background[i].Kind == FaultBrokerRestart && n > 1 {
				continue // the first attempt's only (brokerrestart.go)
			}
			armedFaults = append(armedFaults, &k.Background[i])
		}
		as, disarm := kr.kc.arm(armedFaults)
		restored, err := kr.attempt(ctx, n, fault, o)
		disarm()
		if kr.expired != nil {
			return kr.expired
		}
		if err != nil && os.Getenv("WEIR_SIM_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "sim: seed %d: kafka attempt %d failed: %v\n", kr.spec.Seed, n, err)
		}
		for _, a := range as {
			if a.struck.Load() {
				a.f.Struck = true
				a.f.RiddenOut = err == nil && a.f.Kind == FaultBrokerRestart
			}
		}
		if restored {
			res.Restores++
		}
		// A broker restart that struck may fail the attempt too
		// (brokerrestart.go): the attempt restores as after a fault. So
		// may a request of the failed attempt before (zombieFenced).
		struck := fault != nil && fault.Struck || restartStruck(as)
		zombie := err != nil && !struck && n > 1 && kr.failed[n-1] && zombieFenced(err)
		if zombie {
			res.ZombieFenced++
		}
		injected := err != nil && (struck || zombie)
		if err == nil {
			return nil
		}
		if !injected && !errors.Is(err, ErrInjected) {
			f := &Failure{Invariant: InvCompletes, Detail: fmt.Sprintf("kafka attempt %d failed without an injected fault striking: %v", n, err)}
			f.timedOut(err)
			return f
		}
		kr.failed[n] = true
		if fault != nil && fault.Machine {
			kr.fs = kr.fs.CrashClone(vfs.CrashCloneCfg{})
		}
		kr.complete[n] = latestComplete(kr.fs)
	}
	return &Failure{Invariant: InvCompletes, Detail: fmt.Sprintf("kafka form still failing after %d attempts", MaxAttempts)}
}

// zombieFenced reports whether err is a transactional producer's
// being fenced (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED): after a failed
// attempt, the fault of that attempt. Its sinks' clients may have had an
// InitProducerID in flight when it ended (a sink's open fences its ids,
// and a fault striking one subtask's open ends the others' at once); the
// broker applies a request it has read even after its connection closed,
// and kfake, as Kafka, reads a request and applies it on two goroutines,
// so the dead attempt's InitProducerID can come after the next attempt's
// for the same id and fence its producer, whose next produce then fails.
// The job fails and restores, as after the fault; S13-S15 judge what it
// commits. (Seed 1995972172757581544, in a CI batch under load: "pre-commit
// of checkpoint 1 failed ... INVALID_PRODUCER_EPOCH" in the attempt after
// a fatal InitProducerID.) A first attempt is never excused so.
func zombieFenced(err error) bool {
	if errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, kerr.InvalidProducerEpoch.Message) || strings.Contains(msg, kerr.ProducerFenced.Message)
}

// latestComplete lists the checkpoint directory itself (not through
// weir's checkpoint package): the highest chk-N holding its metadata
// file, the mark of a complete checkpoint.
func latestComplete(fs vfs.FS) int64 {
	names, err := fs.List(checkpointDir)
	if err != nil {
		return 0
	}
	var best int64
	for _, n := range names {
		num, ok := strings.CutPrefix(n, "chk-")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil || id <= best {
			continue
		}
		if _, err := fs.Stat(fs.PathJoin(checkpointDir, n, checkpoint.MetadataFile)); err == nil {
			best = id
		}
	}
	return best
}

// attempt runs the Kafka job once, restored from the latest checkpoint if
// there is one, with fault armed.
func (kr *kafkaRun) attempt(ctx context.Context, n int, fault *Fault, o Options) (restored bool, err error) {
	spec, k, kc := kr.spec, kr.k, kr.kc
	timeout := AttemptTimeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	ctx, stalled, cancel := timeLimit(ctx, timeout, nil)
	defer cancel()
	defer func() { err = stalled(err) }()
	cfg := weir.Config{Parallelism: spec.Parallelism, MaxParallelism: 128, Logger: quiet,
		// Watermarks every millisecond: windows fire during the run, not
		// only at its end.
		AutoWatermarkInterval: time.Millisecond,
		Checkpoint: runtime.CheckpointConfig{Dir: checkpointDir, Retain: 2, Interval: time.Hour,
			Storage: checkpoint.Storage{FS: kr.fs}}}
	if latest, _, err := cfg.Checkpoint.Storage.Latest(checkpointDir); err == nil {
		cfg.Checkpoint.RestoreFrom, restored = latest, true
	}
	env := weir.NewEnvironment(cfg)
	stop := make(chan struct{})
	close(stop) // bounded: read up to the end offsets listed at the start
	src := kafka.NewSource(kafka.Options{Brokers: kc.seeds(), Topics: []string{kafkaIn}, Stop: stop,
		FetchMaxWait: 5 * time.Millisecond, PartitionMaxBytes: 1, RecordsPerPoll: 16, ClientOptions: kc.clientOpts()}, kafka.WithMetadata(kafka.String()))
	msgs := weir.FromSource(env, "src", src,
		watermark.ForBoundedOutOfOrderness[kafka.Message[string]](time.Duration(k.wmBound())*time.Millisecond)).
		UID("src").Parallelism(k.SourceParallelism)
	want := make(chan struct{}, 1)
	var seen atomic.Int64
	recs := weir.MapErr(msgs, "fail-injector", func(m kafka.Message[string]) (event, error) {
		id, err := strconv.ParseInt(m.Value, 10, 64)
		if err != nil {
			return event{}, fmt.Errorf("sim: input value %q", m.Value)
		}
		n := seen.Add(1)
		if fault != nil && fault.Kind == FaultRecord && fault.At == n {
			fault.Struck = true
			return event{}, fmt.Errorf("%w: record %d of the attempt (id %d)", ErrInjected, n, id)
		}
		if n%int64(k.Every) == 0 {
			select {
			case want <- struct{}{}:
			default:
			}
		}
		return event{Key: string(m.Key), ID: id, TS: m.Timestamp}, nil
	}).UID("fail-injector").Parallelism(k.SourceParallelism)
	recLines := weir.MapErr(msgs, "record-lines", func(m kafka.Message[string]) (string, error) {
		id, err := strconv.ParseInt(m.Value, 10, 64)
		return recordLine(m.Partition, m.Offset, string(m.Key), m.Timestamp, id), err
	}).UID("record-lines").Parallelism(k.SourceParallelism)
	size := time.Duration(spec.WindowMS) * time.Millisecond
	// No record is late (KafkaSpec.BoundMS): one that is anyway is
	// committed as a late line, which the reference never has.
	late := weir.NewOutputTag[event]("late")
	opts := []window.Option{window.LateOutput(late)}
	if k.WindowLatenessMS > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(k.WindowLatenessMS)*time.Millisecond))
	}
	windowed := window.AggregateKeyed(weir.KeyBy(recs, func(e event) string { return e.Key }), "window",
		window.Tumbling(size), countSum, opts...).UID("window").Parallelism(spec.Parallelism)
	// The taps behind the keyed operators record the watermarks S18
	// judges their checkpoints by (kafkasession.go).
	taps := &wmSeen{}
	winLines := weir.Transform(windowed, "window-lines", func() runtime.OneInputOperator[window.Result[string, acc], string] {
		return &wmTap{op: "window", seen: taps, line: func(r window.Result[string, acc]) string {
			return windowLine(r.Key, r.Window.Start, r.Window.End, r.Value.N, r.Value.Sum)
		}}
	}).UID("window-lines").Parallelism(spec.Parallelism)
	lateLines := weir.Map(weir.SideOutput(windowed, late), "late-lines", func(e event) string {
		return lateLine(e.Key, e.TS, e.ID)
	}).UID("late-lines").Parallelism(spec.Parallelism)
	parts := []weir.Stream[string]{lateLines, recLines}
	if k.Session != nil {
		parts = append(parts, kafkaSessionBranch(k.Session, recs, taps, spec.Parallelism)...)
	}
	var wf *Fault
	if fault != nil && fault.Kind == FaultWrite {
		wf = fault
	}
	st := weir.Transform(weir.Union(winLines, parts...), "stamp", func() runtime.OneInputOperator[string, stamped] {
		return &stamper{attempt: n, fault: wf}
	}).UID("stamp").Parallelism(spec.Parallelism)
	kafka.ExactlyOnceSink(st, "sink", kafka.SinkOptions[stamped]{Brokers: kc.seeds(), Topic: kafkaOut,
		TransactionalIDPrefix: "sim", ClientOptions: kc.clientOpts(),
		Serialize: func(s stamped) (*kgo.Record, error) {
			return &kgo.Record{Value: []byte(s.Line), Headers: []kgo.RecordHeader{
				{Key: "attempt", Value: strconv.AppendInt(nil, int64(s.Attempt), 10)},
				{Key: "ckpt", Value: strconv.AppendInt(nil, s.Ckpt, 10)}}}, nil
		}}).UID("sink").Parallelism(spec.Parallelism)

	job, err := env.Start(ctx)
	if err != nil {
		return restored, err
	}
	for {
		select {
		case <-want:
			if _, loc, err := job.TriggerCheckpoint(ctx); err == nil && kr.expired == nil && !kr.noExpired {
				kr.expired = kr.checkKafkaExpired(n, taps, loc) // S18
			}
		case <-job.Done():
			err := job.Wait()
			if latest, _, lerr := cfg.Checkpoint.Storage.Latest(checkpointDir); err == nil && lerr == nil && kr.expired == nil && !kr.noExpired {
				kr.expired = kr.checkKafkaExpired(n, taps, latest) // S18, the final checkpoint
			}
			return restored, err
		}
	}
}

// check reads the committed output with a read_committed franz-go consumer
// and checks S14, S15 and S13.
func (kr *kafkaRun) check(ctx context.Context) *Failure {
	got, f := kr.readCommitted(ctx)
	if f != nil {
		return f
	}
	// S14: a record of a failed attempt written after checkpoint c is in a
	// transaction that only a checkpoint after c commits; one must have
	// completed in that attempt.
	for _, r := range got {
		if kr.failed[r.attempt] && r.ckpt >= kr.complete[r.attempt] {
			return &Failure{Invariant: InvKafkaNoAborted,
				Detail: fmt.Sprintf("a line written by failed attempt %d after checkpoint %d is committed, but the latest complete checkpoint after that attempt is %d",
					r.attempt, r.ckpt, kr.complete[r.attempt]),
				Records: []string{r.line}}
		}
	}
	lines := make([]string, len(got))
	for i, r := range got {
		lines[i] = r.line
	}
	slices.Sort(lines)
	// S15: every input record once.
	var inRec []string
	for _, l := range lines {
		if len(l) > 0 && l[0] == 'R' {
			inRec = append(inRec, l)
		}
	}
	var wantRec []string
	for _, r := range kr.k.Records {
		wantRec = append(wantRec, recordLine(r.Partition, r.Offset, r.Key, r.TS, r.ID))
	}
	slices.Sort(wantRec)
	if missing, extra := diff(wantRec, inRec); len(missing)+len(extra) > 0 {
		f := &Failure{Invariant: InvKafkaResume, Detail: fmt.Sprintf("%d input records skipped, %d read twice into the committed output", len(missing), len(extra))}
		f.Records = append(f.Records, firstLines("skipped: ", missing)...)
		f.Records = append(f.Records, firstLines("twice:   ", extra)...)
		return f
	}
	if f := compareLines(KafkaReference(kr.k, kr.spec.WindowMS), lines); f != nil {
		f.Invariant = InvKafkaExactlyOnce
		return f
	}
	return nil
}

func firstLines(prefix string, ls []string) []string {
	var out []string
	for i, l := range ls {
		if i == 4 {
			break
		}
		out = append(out, prefix+l)
	}
	return out
}

type committedLine struct {
	line    string
	attempt int
	ckpt    int64
}

// readCommitted reads the output topic with read_committed up to its last
// stable offset, which must be its high watermark: a transaction left open
// at the end holds read_committed readers back.
func (kr *kafkaRun) readCommitted(ctx context.Context) ([]committedLine, *Failure) {
	kc := kr.kc
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(kc.clientOpts(), kgo.SeedBrokers(kc.seeds()...), kgo.ConsumeTopics(kafkaOut),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(10*time.Millisecond))...)
	if err != nil {
		return nil, &Failure{Invariant: InvCompletes, Detail: err.Error()}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	hwm, err := adm.ListEndOffsets(ctx, kafkaOut)
	if err == nil {
		err = hwm.Error()
	}
	lso, err2 := adm.ListCommittedOffsets(ctx, kafkaOut)
	if err2 == nil {
		err2 = lso.Error()
	}
	if err = errors.Join(err, err2); err != nil {
		return nil, &Failure{Invariant: InvCompletes, Detail: "list the output's offsets: " + err.Error()}
	}
	ends := map[int32]int64{}
	var open []string
	lso.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		if h, ok := hwm.Lookup(o.Topic, o.Partition); ok && h.Offset != o.Offset {
			open = append(open, fmt.Sprintf("partition %d: last stable offset %d, high watermark %d", o.Partition, o.Offset, h.Offset))
		}
	})
	if len(open) > 0 {
		return nil, &Failure{Invariant: InvKafkaExactlyOnce, Detail: "a transaction is left open at the end of the run (read_committed readers are held back)", Records: open}
	}
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var out []committedLine
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, &Failure{Invariant: InvKafkaExactlyOnce, Detail: fmt.Sprintf("reading the output with read_committed did not reach the last stable offsets %v (at %v)", ends, next)}
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, &Failure{Invariant: InvCompletes, Detail: "read the output: " + err.Error()}
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			c := committedLine{line: string(r.Value)}
			for _, h := range r.Headers {
				v, _ := strconv.ParseInt(string(h.Value), 10, 64)
				switch h.Key {
				case "attempt":
					c.attempt = int(v)
				case "ckpt":
					c.ckpt = v
				}
			}
			out = append(out, c)
		})
	}
	return out, nil
}
