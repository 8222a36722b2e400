package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
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
	out := weir.Collect(weir.Transform(src, "exchange-out", newExchangeOut(ks, maxPar, parts, time.Millisecond, nil, nil)))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := out.Records()
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
