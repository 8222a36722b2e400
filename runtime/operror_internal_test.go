package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weirproject/weir/watermark"
)

// phaseOp fails in one phase with errPhase, in subtask 1 only.
type phaseOp struct {
	Base[int]
	phase Phase
}

var errPhase = errors.New("phase: injected")

func (o *phaseOp) Open(ctx *Context, out Output[int]) error {
	o.Base.Open(ctx, out)
	if ctx.Subtask != 1 {
		o.phase = ""
	}
	if o.phase == PhaseOpen {
		return errPhase
	}
	return nil
}

func (o *phaseOp) ProcessRecord(r Record[int]) error {
	if o.phase == PhaseProcess {
		return errPhase
	}
	if o.phase == PhasePanic {
		panic(errPhase)
	}
	return nil
}

func (o *phaseOp) EndInput() error {
	if o.phase == PhaseEndInput {
		return errPhase
	}
	return nil
}

func (o *phaseOp) Close() error {
	if o.phase == PhaseClose {
		return errPhase
	}
	return nil
}

// failingReader fails its first Poll.
type failingReader struct{ sliceReader }

func (r *failingReader) Poll(SourceOutput[int]) (PollStatus, error) { return More, errPhase }

// A job whose operator fails ends with an *OperatorError naming the
// operator, its subtask and the phase, whose chain reaches the operator's
// error (I6), in every phase; its text is the one logs have always shown.
func TestOperatorErrorPhases(t *testing.T) {
	for _, tc := range []struct {
		phase Phase
		text  string
	}{
		{PhaseOpen, `operator "op" (subtask 1 of 2): open: phase: injected`},
		{PhaseProcess, `operator "op" (subtask 1 of 2): phase: injected`},
		{PhaseEndInput, `operator "op" (subtask 1 of 2): end of input: phase: injected`},
		{PhaseClose, `operator "op" (subtask 1 of 2): close: phase: injected`},
		{PhasePanic, `operator "op" (subtask 1 of 2) panicked: phase: injected`},
		{PhaseRead, `operator "src" (subtask 1 of 2): read: phase: injected`},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g := &Graph{}
			src := AddSource[int](g, "src", SourceFunc[int](func(sc SourceContext) (Reader[int], error) {
				r := sliceReader{vals: []int{1, 2, 3}, per: 3}
				if tc.phase == PhaseRead && sc.Subtask == 1 {
					return &failingReader{r}, nil
				}
				return &r, nil
			}), watermark.NoWatermarks[int]())
			// Only subtask 1 fails: the error must say which.
			op := AddOneInput[int, int](g, "op", func() OneInputOperator[int, int] { return &phaseOp{phase: tc.phase} })
			Connect[int](src, nil, op, 0, Forward[int]())
			err := Execute(ctx, g, Config{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var oe *OperatorError
			if !errors.As(err, &oe) || oe.Phase != tc.phase || !errors.Is(err, errPhase) {
				t.Fatalf("the job ended with %v, want an *OperatorError of phase %q wrapping the operator's error", err, tc.phase)
			}
			if got := err.Error(); len(got) < len(tc.text) || got[:len(tc.text)] != tc.text {
				t.Errorf("error text %q, want it to begin %q", got, tc.text)
			}
		})
	}
}
