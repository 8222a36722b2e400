package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// W1, W2: each record goes to the exchange partition of its key group;
// watermark control records reach every partition after the records they
// cover (none of a producer's records is behind a watermark it sent
// before); the end of input is an end record to every partition, last.
func TestExchangeOutRoutesAndOrders(t *testing.T) {
	const parts, maxPar = 3, 128
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: maxPar, AutoWatermarkInterval: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var data []int64
	for i := range int64(3000) {
		data = append(data, i)
	}
	// A punctuated strategy (a watermark after every record), so that the
	// exchange has watermarks to send however fast the slice is read: a
	// periodic one may not fire at all before the end on a quiet machine.
	punctuated := watermark.ForGenerator(func() watermark.Generator[int64] {
		return watermark.GeneratorFuncs[int64]{Event: func(_ int64, ts int64, out watermark.Output) { out.EmitWatermark(ts) }}
	})
	src := weir.FromSlice(env, "src", data, punctuated.WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, true }))
	ks := weir.KeyBy(src, func(v int64) string { return fmt.Sprint(v % 50) })
	out := weir.Collect(weir.Transform(src, "exchange-out", newExchangeOut(ks, JSON[int64](), nil, maxPar, parts, time.Millisecond, nil, nil)))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := unbatch(t, JSON[int64](), out.Records())
	if len(recs) < len(data) {
		t.Fatalf("%d records out, want the %d records in and control records", len(recs), len(data))
	}
	sent := make([]int64, parts) // latest watermark sent per partition
	for i := range sent {
		sent[i] = watermark.Min
	}
	ends, controls := 0, 0
	for i, r := range recs {
		o := r.Value
		switch o.kind {
		case kindData:
			if ends > 0 {
				t.Fatalf("record %d after an end record", o.v)
			}
			want := keygroup.OperatorIndex(keygroup.Assign(keygroup.HashString(fmt.Sprint(o.v%50)), maxPar), maxPar, parts)
			if int(o.part) != want {
				t.Fatalf("record %d went to partition %d, want %d", o.v, o.part, want)
			}
			if r.Timestamp <= sent[o.part] {
				t.Fatalf("record %d (ts %d) after watermark %d was sent to its partition %d", o.v, r.Timestamp, sent[o.part], o.part)
			}
		case kindWatermark:
			controls++
			if o.wm <= sent[o.part] {
				t.Fatalf("watermark %d to partition %d after %d", o.wm, o.part, sent[o.part])
			}
			sent[o.part] = o.wm
		case kindEnd:
			ends++
			if i < len(recs)-parts {
				t.Fatalf("end record at %d of %d", i, len(recs))
			}
		}
	}
	if ends != parts || controls == 0 {
		t.Fatalf("%d end records, %d watermark records; want %d end records and some watermarks", ends, controls, parts)
	}
}

// unbatch replaces each batch of recs by its values, in order, each a data
// record of the batch's partition at its own timestamp.
func unbatch[T any](t *testing.T, codec Codec[T], recs []runtime.Record[outRec[T]]) []runtime.Record[outRec[T]] {
	t.Helper()
	var out []runtime.Record[outRec[T]]
	for _, r := range recs {
		if r.Value.batch == nil {
			out = append(out, r)
			continue
		}
		ver := r.Value.batch[0]
		if r.Value.kind != kindData || ver != batchVersion && ver != batchVersionBinary {
			t.Fatalf("batch of kind %d, version %d", r.Value.kind, ver)
		}
		decode := codec.Decode
		if ver == batchVersionBinary {
			decode = newBinCodec[T]().Decode
		}
		b, prev := r.Value.batch[1:], int64(0)
		for i := 0; len(b) > 0; i++ {
			ts, enc, rest, err := nextBatchValue(b, prev)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && ts != r.Value.wm {
				t.Fatalf("batch at %d, its first value at %d", r.Value.wm, ts)
			}
			v, err := decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, runtime.Record[outRec[T]]{Value: outRec[T]{part: r.Value.part, v: v}, Timestamp: ts})
			b, prev = rest, ts
		}
	}
	return out
}

type outRecs[T any] struct{ recs []runtime.Record[outRec[T]] }

func (o *outRecs[T]) Collect(r runtime.Record[outRec[T]]) { o.recs = append(o.recs, r) }
func (o *outRecs[T]) EmitWatermark(int64)                 {}
func (o *outRecs[T]) EmitIdle(bool)                       {}

// W2, W3 with batches: data records wait in their partition's batch until
// it is full, a control record goes out (every batch first, so a
// watermark still follows the records it covers) or a checkpoint barrier
// passes (SnapshotState: the batches belong to the checkpoint's
// transaction); each value keeps its order and timestamp. In both
// versions: JSON (Job.Codec's, version 1) and the binary codec's (2).
func TestExchangeOutBatches(t *testing.T) {
	t.Run("json", func(t *testing.T) { testExchangeOutBatches(t, nil, batchVersion) })
	t.Run("binary", func(t *testing.T) { testExchangeOutBatches(t, newBinCodec[int64](), batchVersionBinary) })
}

func testExchangeOutBatches(t *testing.T, bin *binCodec[int64], version byte) {
	const parts, maxPar = 2, 128
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: maxPar})
	ks := weir.KeyBy(weir.FromSlice(env, "src", []int64{0}, watermark.NoWatermarks[int64]()), func(v int64) int64 { return v })
	codec := JSON[int64]()
	op := newExchangeOut(ks, codec, bin, maxPar, parts, time.Millisecond, nil, nil)().(*exchangeOut[int64, int64])
	out := &outRecs[int64]{}
	op.Out = out
	op.announced = true // no Ctx here: skip the behind record
	partOf := func(v int64) int32 {
		return int32(keygroup.OperatorIndex(ks.KeyGroupOf(v, maxPar), maxPar, parts))
	}
	feed := func(from, to int64) {
		for v := from; v < to; v++ {
			if err := op.ProcessRecord(runtime.Record[int64]{Value: v, Timestamp: 1000 + v*3 - v%2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(got []runtime.Record[outRec[int64]], from, to int64) {
		t.Helper()
		next := map[int32]int64{0: -1, 1: -1}
		n := 0
		for _, r := range unbatch(t, codec, got) {
			if r.Value.kind != kindData {
				continue
			}
			v := r.Value.v
			if r.Value.part != partOf(v) || r.Timestamp != 1000+v*3-v%2 || v <= next[r.Value.part] || v < from || v >= to {
				t.Fatalf("value %d at %d in partition %d (after %d)", v, r.Timestamp, r.Value.part, next[r.Value.part])
			}
			next[r.Value.part] = v
			n++
		}
		if n != int(to-from) {
			t.Fatalf("%d values out, want %d", n, to-from)
		}
	}

	feed(0, 100)
	if len(out.recs) != 0 {
		t.Fatalf("%d records out before a barrier, a control record or a full batch", len(out.recs))
	}
	if err := op.SnapshotState(nil); err != nil {
		t.Fatal(err)
	}
	if len(out.recs) != parts {
		t.Fatalf("%d records out at the barrier, want a batch per partition", len(out.recs))
	}
	check(out.recs, 0, 100)

	out.recs = nil
	feed(100, 150)
	op.control(kindWatermark, 5000)
	if len(out.recs) != 2*parts {
		t.Fatalf("%d records out at a watermark, want a batch, then the watermark, per partition", len(out.recs))
	}
	for i, r := range out.recs {
		if isBatch := r.Value.batch != nil; isBatch != (i < parts) {
			t.Fatalf("record %d of %d out at a watermark: batch %v", i, len(out.recs), isBatch)
		}
	}
	check(out.recs, 100, 150)

	// Full batches go out by themselves, each near batchBytes.
	out.recs = nil
	const many = 40_000
	feed(150, 150+many)
	if len(out.recs) < 2 {
		t.Fatalf("%d batches out of %d values without a barrier; want full batches sent", len(out.recs), many)
	}
	for _, r := range out.recs {
		if v := r.Value.batch[0]; v != version {
			t.Fatalf("a batch of version %d, want %d", v, version)
		}
		if l := len(r.Value.batch); l < batchBytes || l > batchBytes+64 {
			t.Fatalf("a batch of %d bytes sent before a barrier; want about %d", l, batchBytes)
		}
	}
	if err := op.EndInput(); err != nil {
		t.Fatal(err)
	}
	check(out.recs, 150, 150+many)
}

// ExchangeValues counts values, not Kafka records: a batch's, one for a
// single data record, none for a control record.
func TestExchangeValues(t *testing.T) {
	b := []byte{batchVersion}
	for i := range int64(3) {
		b = appendBatchValue(b, 100+i, 100+i-1, []byte("7"))
	}
	for _, c := range []struct {
		headers []kgo.RecordHeader
		value   []byte
		want    int
	}{{batchHeaders, b, 3}, {nil, []byte("7"), 1}, {controlHeaders, encodeControl(kindWatermark, 5), 0}, {batchHeaders, b[:len(b)-1], 0}} {
		if got := ExchangeValues(c.headers, c.value); got != c.want {
			t.Fatalf("ExchangeValues(%v, %x) = %d, want %d", c.headers, c.value, got, c.want)
		}
	}
}
