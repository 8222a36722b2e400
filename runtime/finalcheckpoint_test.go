package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// finalProbe logs, in order, the records it receives, its snapshots (with
// what SnapshotWriter.Final says) and its end of input.
type finalProbe struct {
	runtime.Base[int]
	mu  *sync.Mutex
	log *[]string
}

func (p *finalProbe) add(s string) {
	p.mu.Lock()
	*p.log = append(*p.log, s)
	p.mu.Unlock()
}

func (p *finalProbe) ProcessRecord(r runtime.Record[int]) error {
	p.add(fmt.Sprint("record ", r.Value))
	p.Out.Collect(r)
	return nil
}

func (p *finalProbe) SnapshotState(w *runtime.SnapshotWriter) error {
	p.add(fmt.Sprintf("snapshot %d final=%v", w.CheckpointID(), w.Final()))
	return nil
}

func (p *finalProbe) EndInput() error {
	p.add("end of input")
	return nil
}

// The final checkpoint of a bounded job, and only it, tells the operators
// that it is final (SnapshotWriter.Final): it is taken after every record
// and before any end of input, in chained operators and in operators of
// their own task alike, and it is the checkpoint a resume finds.
func TestSnapshotWriterFinal(t *testing.T) {
	for _, chaining := range []bool{true, false} {
		t.Run(fmt.Sprintf("chaining=%v", chaining), func(t *testing.T) {
			dir := t.TempDir()
			env := weir.NewEnvironment(weir.Config{Parallelism: 1, DisableChaining: !chaining,
				Checkpoint: runtime.CheckpointConfig{Interval: time.Hour, Dir: dir}})
			resume := make(chan struct{})
			src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[int]{{
				weirtest.Rec(0, 1, 1), weirtest.Rec(0, 2, 2), weirtest.PauseUntil[int](resume), weirtest.Rec(0, 3, 3),
			}}), watermark.ForMonotonous[int]())
			var mu sync.Mutex
			var log []string
			probed := weir.Transform(src, "probe", func() runtime.OneInputOperator[int, int] {
				return &finalProbe{mu: &mu, log: &log}
			})
			weir.Collect(probed)
			logged := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(log)
			}
			job, _ := weirtest.Start(t, env)
			weirtest.Eventually(t, "records 1 and 2", func() bool { return len(logged()) == 2 })
			id, _, err := job.TriggerCheckpoint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			close(resume)
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			_, final, err := checkpoint.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"record 1", "record 2", fmt.Sprintf("snapshot %d final=false", id), "record 3",
				fmt.Sprintf("snapshot %d final=true", final), "end of input"}
			if got := logged(); !slices.Equal(got, want) || final <= id {
				t.Fatalf("probe saw %q (final checkpoint %d), want %q", got, final, want)
			}
		})
	}
}
