package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// badOp is an operator whose options are wrong: its Validate fails.
type badOp struct {
	runtime.Base[event]
}

func (*badOp) ProcessRecord(runtime.Record[event]) error { return nil }
func (*badOp) EndInput() error                           { return nil }
func (*badOp) Validate() error                           { return errors.New("badOp: Size -1: want >= 1") }

// TestStartValidates: a job with a bad configuration, a bad operator
// parallelism or an operator whose Validate fails does not start: Start
// returns one error naming the field, and no source reader is created.
func TestStartValidates(t *testing.T) {
	cases := []struct {
		name  string
		cfg   weir.Config
		build func(s weir.Stream[event]) weir.Stream[event]
		want  string
	}{
		{"parallelism above max", weir.Config{Parallelism: 200, MaxParallelism: 128}, nil, "Config.Parallelism 200 exceeds Config.MaxParallelism 128"},
		{"unwritable checkpoint dir", weir.Config{Checkpoint: runtime.CheckpointConfig{Interval: time.Second, Dir: "/proc/x"}}, nil, `CheckpointConfig.Dir "/proc/x"`},
		{"checkpoints without dir", weir.Config{Checkpoint: runtime.CheckpointConfig{Interval: time.Second}}, nil, "CheckpointConfig.Dir is empty"},
		{"unknown backend", weir.Config{StateBackend: runtime.StateBackendConfig{Kind: "rocksdb"}}, nil, `StateBackendConfig.Kind "rocksdb"`},
		{"negative operator parallelism", weir.Config{}, func(s weir.Stream[event]) weir.Stream[event] {
			return weir.Map(s, "m", func(e event) event { return e }).Parallelism(-2)
		}, `operator "m": parallelism -2`},
		{"operator parallelism above max", weir.Config{MaxParallelism: 4}, func(s weir.Stream[event]) weir.Stream[event] {
			return weir.Map(s, "m", func(e event) event { return e }).Parallelism(5)
		}, `operator "m": parallelism 5: want 0 (the job's parallelism) or an integer from 1 to 4`},
		{"operator Validate", weir.Config{}, func(s weir.Stream[event]) weir.Stream[event] {
			return weir.Transform(s, "bad", func() runtime.OneInputOperator[event, event] { return &badOp{} })
		}, `operator "bad": badOp: Size -1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := weir.NewEnvironment(c.cfg)
			created := false
			src := runtime.SourceFunc[event](func(runtime.SourceContext) (runtime.Reader[event], error) {
				created = true
				return nil, errors.New("unreachable")
			})
			s := weir.FromSource(env, "src", src, strategy())
			if c.build != nil {
				s = c.build(s)
			}
			weir.Collect(s)
			err := env.Execute(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Execute: %v, want an error containing %q", err, c.want)
			}
			if created && !strings.Contains(c.name, "Validate") {
				t.Fatal("a source reader was created before the configuration was rejected")
			}
		})
	}
}
