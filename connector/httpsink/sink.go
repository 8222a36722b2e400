package httpsink

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
)

// DeadLetter is a record the service refused (S5) or that did not encode.
type DeadLetter[T any] struct {
	// Value is the record.
	Value T `json:"value"`
	// Key is the idempotency key of the request that carried it ("" when
	// it did not encode).
	Key string `json:"key,omitempty"`
	// Status is the HTTP status of the refusal; 0 when the record did not
	// encode.
	Status int `json:"status"`
	// Reason says what went wrong: the status and the first BodyExcerpt
	// bytes of the service's answer, or the encoding error.
	Reason string `json:"reason"`
}

// stateList is the operator-state list of the sink's key positions (S2).
const stateList = "httpsink"

// position is a sink subtask's key position in a checkpoint.
type position struct {
	Epoch       string `json:"epoch"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	Seq         int64  `json:"seq"`
}

// Sink sends the records of s to an HTTP service (see the package
// documentation). Its result carries the dead letters, with the
// timestamps of their records: records the service refused with a 4xx
// other than 408 and 429, and records that did not encode. Leave it
// unconnected to drop them (they are still counted in the "deadLetters"
// metric). Options are checked when the job starts.
func Sink[T any](s weir.Stream[T], name string, opts Options[T]) weir.Stream[DeadLetter[T]] {
	return weir.Transform(s, name, func() runtime.OneInputOperator[T, DeadLetter[T]] {
		return &sinkOp[T]{opts: opts}
	})
}

// pending is a record of the batch being filled.
type pending[T any] struct {
	v    T
	ts   int64
	data []byte
}

// sinkOp is one sink subtask. Every record gets the next number of the
// subtask's sequence (seq); batches are cut where seq reaches a multiple of
// Batch, at barriers, at the end of input and at timed flushes (S3). A
// batch is sent synchronously, on the subtask goroutine, so a barrier
// passes the sink only once everything before it has been accepted (S1).
type sinkOp[T any] struct {
	runtime.Base[DeadLetter[T]]
	opts   Options[T]
	p      *poster
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	prefix string

	epoch string
	seq   int64 // number of the next record
	batch []pending[T]
	first int64 // seq of batch[0]
	body  bytes.Buffer

	flushArmed bool
	batchStart int64 // processing time (ms) the batch began, with FlushInterval

	sentRecords, sentRequests, retries, deadLetters *runtime.Counter
}

// Validate implements runtime.Validator.
func (o *sinkOp[T]) Validate() error { return o.opts.Validate() }

func (o *sinkOp[T]) Open(ctx *runtime.Context, out runtime.Output[DeadLetter[T]]) error {
	o.Base.Open(ctx, out)
	if err := o.opts.Validate(); err != nil {
		return err
	}
	o.opts = o.opts.withDefaults()
	ct := "application/json"
	if o.opts.Format == FormatLines {
		ct = "application/x-ndjson"
	}
	clk := ctx.Clock
	if clk == nil {
		clk = clock.Real
	}
	o.p = newPoster(o.opts, ct, clk)
	o.sentRecords, o.sentRequests = ctx.Counter("recordsSent"), ctx.Counter("requestsSent")
	o.retries, o.deadLetters = ctx.Counter("retries"), ctx.Counter("deadLetters")
	o.p.onRetry = func() { o.retries.Add(1) }
	o.prefix = o.opts.KeyPrefix
	if o.prefix == "" {
		o.prefix = ctx.Name
	}
	// The job's cancellation ends a request or a wait in progress.
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.stop = make(chan struct{})
	done, cancel, stop := ctx.Done(), o.cancel, o.stop
	go func() {
		select {
		case <-done:
			cancel()
		case <-stop:
		}
	}()
	return o.restore(ctx)
}

// restore takes the subtask's key position from the restored checkpoint
// (S2): the same epoch and sequence when the parallelism is the same, a new
// epoch otherwise (and on a fresh start).
func (o *sinkOp[T]) restore(ctx *runtime.Context) error {
	items, err := ctx.Restored().List(stateList)
	if err != nil {
		return err
	}
	for _, it := range items {
		var p position
		if err := json.Unmarshal(it, &p); err != nil {
			return fmt.Errorf("httpsink: restoring the key position %q: %w", it, err)
		}
		if p.Subtask == ctx.Subtask && p.Parallelism == ctx.Parallelism {
			o.epoch, o.seq = p.Epoch, p.Seq
			return nil
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("httpsink: drawing a key epoch: %w", err)
	}
	o.epoch = hex.EncodeToString(b[:])
	return nil
}

func (o *sinkOp[T]) ProcessRecord(r runtime.Record[T]) error {
	seq := o.seq
	o.seq++
	data, err := o.encode(r.Value)
	if err != nil {
		o.deadLetter(r.Value, r.Timestamp, "", 0, fmt.Sprintf("httpsink: encoding the record: %v", err))
	} else {
		if len(o.batch) == 0 {
			o.first = seq
			o.armFlush()
		}
		o.batch = append(o.batch, pending[T]{v: r.Value, ts: r.Timestamp, data: data})
	}
	if n := int64(o.opts.batch()); o.seq%n == 0 || len(o.batch) >= int(n) {
		return o.flush()
	}
	return nil
}

func (o *sinkOp[T]) encode(v T) ([]byte, error) {
	if o.opts.Encode != nil {
		return o.opts.Encode(v)
	}
	return json.Marshal(v)
}

// armFlush registers the timed flush of the batch just begun (one timer at
// a time: a batch sent before its timer fires leaves the timer to the next
// batch, which it re-registers for that batch's own deadline).
func (o *sinkOp[T]) armFlush() {
	if o.opts.FlushInterval <= 0 {
		return
	}
	o.batchStart = clock.NowMillis(o.p.clk)
	if !o.flushArmed {
		o.flushArmed = true
		o.Ctx.RegisterProcessingTimer(o.batchStart+o.opts.FlushInterval.Milliseconds(), o.timedFlush)
	}
}

func (o *sinkOp[T]) timedFlush(now int64) {
	o.flushArmed = false
	if len(o.batch) == 0 {
		return
	}
	if due := o.batchStart + o.opts.FlushInterval.Milliseconds(); now < due {
		o.flushArmed = true
		o.Ctx.RegisterProcessingTimer(due, o.timedFlush)
		return
	}
	if err := o.flush(); err != nil {
		o.Ctx.Fail(err)
	}
}

// flush sends the batch, if any, and waits for the service's answer.
func (o *sinkOp[T]) flush() error {
	if len(o.batch) == 0 {
		return nil
	}
	o.body.Reset()
	format := o.opts.Format
	if format == FormatAuto && o.opts.batch() > 1 {
		format = FormatArray
	}
	switch format {
	case FormatAuto:
		o.body.Write(o.batch[0].data)
	case FormatArray:
		o.body.WriteByte('[')
		for i, p := range o.batch {
			if i > 0 {
				o.body.WriteByte(',')
			}
			o.body.Write(p.data)
		}
		o.body.WriteByte(']')
	case FormatLines:
		for _, p := range o.batch {
			o.body.Write(p.data)
			o.body.WriteByte('\n')
		}
	}
	key := o.key(o.first, len(o.batch), o.body.Bytes())
	rej, err := o.p.send(o.ctx, o.body.Bytes(), len(o.batch), key)
	if err != nil {
		return err
	}
	o.sentRequests.Add(1)
	if rej != nil {
		reason := fmt.Sprintf("httpsink: %s %s answered %d: %s", o.opts.Method, o.opts.URL, rej.Status, rej.Body)
		for _, p := range o.batch {
			o.deadLetter(p.v, p.ts, key, rej.Status, reason)
		}
	} else {
		o.sentRecords.Add(int64(len(o.batch)))
	}
	clear(o.batch)
	o.batch = o.batch[:0]
	return nil
}

// key is the idempotency key of a request (S2): the prefix, the subtask's
// epoch, the subtask, the sequence number of its first record and its
// number of records, and a hash of the body.
func (o *sinkOp[T]) key(first int64, n int, body []byte) string {
	h := sha256.Sum256(body)
	return o.prefix + "/" + o.epoch + "/" + strconv.Itoa(o.Ctx.Subtask) + "/" +
		strconv.FormatInt(first, 10) + "+" + strconv.Itoa(n) + "/" + hex.EncodeToString(h[:8])
}

func (o *sinkOp[T]) deadLetter(v T, ts int64, key string, status int, reason string) {
	o.deadLetters.Add(1)
	if o.deadLetters.Value() <= 3 {
		o.Ctx.Logger.Warn("httpsink: dead letter", "status", status, "reason", reason)
		o.Ctx.Note("deadLetter", reason)
	}
	o.Out.Collect(runtime.Record[DeadLetter[T]]{Value: DeadLetter[T]{Value: v, Key: key, Status: status, Reason: reason}, Timestamp: ts})
}

// SnapshotState sends the batch (S1) and records the key position (S2).
func (o *sinkOp[T]) SnapshotState(w *runtime.SnapshotWriter) error {
	if err := o.flush(); err != nil {
		return err
	}
	b, err := json.Marshal(position{Epoch: o.epoch, Subtask: o.Ctx.Subtask, Parallelism: o.Ctx.Parallelism, Seq: o.seq})
	if err != nil {
		return err
	}
	w.List(stateList, checkpoint.Union, [][]byte{b})
	return nil
}

// ProcessWatermark forwards the watermark after the dead letters it covers
// (they are emitted as their batches are answered).
func (o *sinkOp[T]) ProcessWatermark(ts int64) error {
	o.Out.EmitWatermark(ts)
	return nil
}

func (o *sinkOp[T]) EndInput() error { return o.flush() }

func (o *sinkOp[T]) Close() error {
	if o.stop != nil {
		close(o.stop)
		o.cancel()
		o.stop = nil
	}
	return nil
}
