package pipeline

import (
	"fmt"

	gojson "github.com/goccy/go-json"

	"github.com/weirproject/weir/internal/lockedwriter"
	"github.com/weirproject/weir/runtime"
)

// stdoutOp writes records as JSON lines to the shared stdout, a buffer at
// a time (the lock is taken per buffer, not per record): when the buffer
// is full, and at every watermark, idleness change and the end, so a slow
// live stream shows its records as its watermark moves.
type stdoutOp struct {
	runtime.Base[struct{}]
	w   *lockedwriter.Writer
	buf []byte
}

func (o *stdoutOp) ProcessRecord(r runtime.Record[Record]) error {
	b, err := gojson.Marshal(r.Value)
	if err != nil {
		return fmt.Errorf("pipeline: stdout: %w", err)
	}
	o.buf = append(append(o.buf, b...), '\n')
	if len(o.buf) >= 32<<10 {
		return o.flush()
	}
	return nil
}

func (o *stdoutOp) flush() error {
	if len(o.buf) == 0 {
		return nil
	}
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	return err
}

func (o *stdoutOp) ProcessWatermark(ts int64) error {
	o.Out.EmitWatermark(ts)
	return o.flush()
}

func (o *stdoutOp) ProcessIdle(idle bool) error {
	o.Out.EmitIdle(idle)
	return o.flush()
}

func (o *stdoutOp) EndInput() error { return o.flush() }

func (o *stdoutOp) Close() error { return o.flush() }
