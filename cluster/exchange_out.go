package cluster

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// exchangeOut is the last step of a source task: it routes each record to
// the exchange partition that owns its key group (W1: Flink's operator
// index of the key group at parallelism = the number of exchange
// partitions, so partition q holds exactly key-group range q), and turns the
// task's watermark, idleness and end of input into control records for
// every exchange partition (W2). It is chained in front of the
// transactional sink, so control records share its transactions (W3).
//
// Data records are batched (batchHeader): each record's encoding is
// appended to its partition's batch, which goes out as one Kafka record
// when it reaches batchBytes, before any control record (so a producer's
// watermark still follows every record it covers in each partition), and
// at every checkpoint barrier (SnapshotState: the batch belongs to the
// checkpoint's transaction, W3). Batches add no latency to what the keyed
// tasks see: they read only committed transactions, which end at a
// barrier. Per record: one key-group computation, the codec's encoding
// and an append; a Collect per batch.
//
// Watermarks are rate-limited: the latest is sent at most once per
// interval, from a processing-time timer if it came too soon after the
// previous one (so the last watermark of a quiet spell is always sent).
type exchangeOut[K comparable, T any] struct {
	runtime.Base[outRec[T]]
	keyGroup func(T) int // key group of a value
	codec    Codec[T]
	// bin, if not nil, is the binary codec the batches are written with
	// (batch version 2; codec is then unused); enc is its reused buffer
	// and cur the value it encodes, so that neither escapes per value.
	bin *binCodec[T]
	enc encoder
	cur T
	// batches holds each partition's batch being filled (nil: none);
	// first and prev its first and last value's timestamps.
	batches     [][]byte
	first, prev []int64
	maxPar      int
	parts       int
	interval    int64 // ms

	pending  int64 // latest watermark received
	sent     int64 // latest watermark sent
	lastSent int64 // processing time of the last send (ms)
	timerSet bool
	idle     bool
	ended    bool

	// caughtUp reports whether the task's Kafka source has caught up
	// (kafka.Source.CaughtUp); announced: kindBehind went out (the first
	// control record of the run); caughtUpSent: kindCaughtUp went out;
	// checkSet: a timer will ask caughtUp again (W6).
	caughtUp                          func() bool
	announced, caughtUpSent, checkSet bool

	// position reports the source's position in its partition (the next
	// offset it emits; -1 unknown), sent with every idle record; idlePos
	// is the one last sent, and while the task is idle a timer sends a
	// new idle record when the position has moved since (W7).
	position func() int64
	idlePos  int64
}

func newExchangeOut[K comparable, T any](ks weir.KeyedStream[K, T], codec Codec[T], bin *binCodec[T], maxPar, parts int, interval time.Duration, caughtUp func() bool, position func() int64) func() runtime.OneInputOperator[T, outRec[T]] {
	return func() runtime.OneInputOperator[T, outRec[T]] {
		return &exchangeOut[K, T]{
			keyGroup: func(v T) int { return ks.KeyGroupOf(v, maxPar) }, codec: codec, bin: bin,
			batches: make([][]byte, parts), first: make([]int64, parts), prev: make([]int64, parts),
			maxPar: maxPar, parts: parts, interval: max(interval.Milliseconds(), 1),
			pending: watermark.Min, sent: watermark.Min, caughtUp: caughtUp,
			position: position, idlePos: -1,
		}
	}
}

// pos is the source's position, or -1.
func (o *exchangeOut[K, T]) pos() int64 {
	if o.position == nil {
		return -1
	}
	return max(o.position(), -1)
}

// announce sends kindBehind once per run, before anything else of the run:
// the consumers forget what they kept of the producer's previous run
// (caught up, idle), since this run replays from its checkpoint (W6).
func (o *exchangeOut[K, T]) announce() {
	if !o.announced {
		o.announced = true
		o.control(kindBehind, o.sent)
	}
}

// maybeCaughtUp sends kindCaughtUp once the task's source has caught up.
// The source marks its split idle only after its catch-up is recorded, so
// at the idle that follows a catch-up this sees it, and kindCaughtUp goes
// out before kindIdle: the consumers then hold that idleness until every
// producer has caught up (W6), instead of letting the others run ahead.
func (o *exchangeOut[K, T]) maybeCaughtUp() {
	if o.caughtUpSent || o.caughtUp == nil || !o.caughtUp() {
		return
	}
	o.announce()
	o.caughtUpSent = true
	o.control(kindCaughtUp, o.sent)
}

// checkLater looks again after an interval, while the task is idle: for
// its catch-up, if it went idle without having caught up (time-out
// idleness), since no watermark or idle change would make it ask; and for
// its position, which moves while idle when the partition gets no records
// but transaction markers (or compaction gaps) do: a new idle record
// names the new position, or the keyed tasks would hold this producer
// (W7).
func (o *exchangeOut[K, T]) checkLater() {
	if o.checkSet {
		return
	}
	o.checkSet = true
	o.Ctx.RegisterProcessingTimer(o.Ctx.Clock.Now().UnixMilli()+o.interval, func(int64) {
		o.checkSet = false
		if o.ended || !o.idle {
			return
		}
		o.maybeCaughtUp()
		if p := o.pos(); p != o.idlePos {
			o.idlePos = p
			o.controlIdle()
		}
		o.checkLater()
	})
}

func (o *exchangeOut[K, T]) ProcessRecord(r runtime.Record[T]) error {
	if !o.announced {
		o.announce()
	}
	q := keygroup.OperatorIndex(o.keyGroup(r.Value), o.maxPar, o.parts)
	var enc []byte
	var err error
	version := batchVersion
	if o.bin != nil {
		version = batchVersionBinary
		o.enc.b, o.enc.err, o.cur = o.enc.b[:0], nil, r.Value
		o.bin.encodeTo(&o.enc, &o.cur)
		enc, err = o.enc.b, o.enc.err
		var zero T
		o.cur = zero // not kept past its record
	} else {
		enc, err = o.codec.Encode(r.Value)
	}
	if err != nil {
		return err
	}
	ts := r.Timestamp
	if ts == runtime.NoTimestamp {
		// As the Kafka client stamps a record without a time.
		ts = o.Ctx.Clock.Now().UnixMilli()
	}
	b := o.batches[q]
	if b == nil {
		b = make([]byte, 1, batchBytes+len(enc)+2*binary.MaxVarintLen64)
		b[0] = version
		o.first[q], o.prev[q] = ts, 0
	}
	b = appendBatchValue(b, ts, o.prev[q], enc)
	o.batches[q], o.prev[q] = b, ts
	if len(b) >= batchBytes {
		o.send(q)
	}
	return nil
}

// send sends partition q's batch, if it has one.
func (o *exchangeOut[K, T]) send(q int) {
	b := o.batches[q]
	if b == nil {
		return
	}
	// The batch becomes the Kafka client's: the next one is new.
	o.batches[q] = nil
	o.Out.Collect(runtime.Record[outRec[T]]{Value: outRec[T]{part: int32(q), wm: o.first[q], batch: b}, Timestamp: o.first[q]})
}

// sendAll sends every partition's batch: before a control record, which
// must follow the records it covers, and at a barrier.
func (o *exchangeOut[K, T]) sendAll() {
	for q := range o.batches {
		o.send(q)
	}
}

// SnapshotState sends the batches at the checkpoint barrier, so that they
// are in the transaction the checkpoint commits (W3): the runtime
// snapshots a chain from its head, so the transactional sink chained
// behind takes its snapshot after them. The operator keeps no state.
func (o *exchangeOut[K, T]) SnapshotState(*runtime.SnapshotWriter) error {
	o.sendAll()
	return nil
}

// EndInput sends what is left (the end of input's control records have
// sent it already when the input ended with the maximum watermark).
func (o *exchangeOut[K, T]) EndInput() error {
	o.sendAll()
	return nil
}

func (o *exchangeOut[K, T]) ProcessWatermark(ts int64) error {
	if o.ended {
		return nil
	}
	if ts == watermark.Max {
		// End of input: everything before it is written; the final
		// checkpoint that follows covers the end records too.
		o.ended = true
		o.announce()
		o.control(kindEnd, ts)
		return nil
	}
	o.announce()
	o.pending = ts
	now := o.Ctx.Clock.Now().UnixMilli()
	if now-o.lastSent >= o.interval {
		o.flush(now)
	} else if !o.timerSet {
		o.timerSet = true
		o.Ctx.RegisterProcessingTimer(o.lastSent+o.interval, func(now int64) {
			o.timerSet = false
			o.flush(now)
		})
	}
	return nil
}

// flush sends the pending watermark if it is newer than the last sent.
func (o *exchangeOut[K, T]) flush(now int64) {
	if o.ended {
		return
	}
	o.maybeCaughtUp()
	if o.pending <= o.sent {
		return
	}
	o.sent, o.lastSent = o.pending, now
	o.control(kindWatermark, o.pending)
}

func (o *exchangeOut[K, T]) ProcessIdle(idle bool) error {
	if o.ended || idle == o.idle {
		return nil
	}
	o.idle = idle
	o.announce()
	if idle {
		// The watermark reached so far first, so that the consumers'
		// view of this producer is current when it leaves the minimum
		// (and the catch-up, which flush reports, before the idle).
		o.flush(o.Ctx.Clock.Now().UnixMilli())
		o.idlePos = o.pos()
		o.controlIdle()
		o.checkLater()
	} else {
		o.control(kindActive, o.sent)
	}
	return nil
}

// control writes one control record of kind to every exchange partition.
func (o *exchangeOut[K, T]) control(kind byte, wm int64) {
	o.controlAt(kind, wm, -1)
}

// controlIdle writes the idle record, with the position it was decided at.
func (o *exchangeOut[K, T]) controlIdle() { o.controlAt(kindIdle, o.sent, o.idlePos) }

func (o *exchangeOut[K, T]) controlAt(kind byte, wm, pos int64) {
	o.sendAll()
	ts := min(max(wm, 0), maxKafkaTs)
	for q := range o.parts {
		o.Out.Collect(runtime.Record[outRec[T]]{Value: outRec[T]{part: int32(q), kind: kind, wm: wm, pos: pos}, Timestamp: ts})
	}
}

// maxKafkaTs bounds the timestamps of control records (the watermark, or
// the end of input's Max, are not all valid Kafka timestamps).
const maxKafkaTs = int64(1) << 52

// exchangeSinkOptions are the options of a source task's transactional
// sink to the exchange topic: the partition the exchange operator chose,
// the producer key, and the control header.
func exchangeSinkOptions[T any](cfg Config, codec Codec[T], topic string, producer int32, prefix string) kafka.SinkOptions[outRec[T]] {
	key := producerKey(producer)
	return kafka.SinkOptions[outRec[T]]{
		Brokers: cfg.Brokers,
		Topic:   topic,
		Serialize: func(o outRec[T]) (*kgo.Record, error) {
			if o.batch != nil {
				return &kgo.Record{Key: key, Partition: o.part, Headers: batchHeaders, Value: o.batch,
					Timestamp: time.UnixMilli(min(max(o.wm, 0), maxKafkaTs))}, nil
			}
			if o.kind != kindData {
				v := encodeControl(o.kind, o.wm)
				if o.kind == kindIdle {
					v = encodeIdle(o.wm, o.pos)
				}
				return &kgo.Record{Key: key, Partition: o.part, Headers: controlHeaders, Value: v,
					Timestamp: time.UnixMilli(min(max(o.wm, 0), maxKafkaTs))}, nil
			}
			b, err := codec.Encode(o.v)
			if err != nil {
				return nil, err
			}
			return &kgo.Record{Key: key, Partition: o.part, Value: b}, nil
		},
		TransactionalIDPrefix: prefix,
		TransactionTimeout:    cfg.TransactionTimeout,
		Security:              cfg.Security,
		// Compression is the client's default, snappy: measured on the
		// exchange alone (BENCHMARKS.md, "The exchange's binary codec"),
		// none and lz4 cost the workers and the broker no less CPU per
		// record (within the rounds' noise), and snappy keeps the topic's
		// bytes, which the broker writes and every fetch reads, smaller.
		ClientOptions: append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, cfg.ClientOptions...),
	}
}
