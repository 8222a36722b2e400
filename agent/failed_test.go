package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// failedSink collects the failed inputs of a side output.
type failedSink struct {
	runtime.Base[struct{}]
	mu  *sync.Mutex
	got *[]runtime.Record[FailedInput]
}

func (f *failedSink) ProcessRecord(r runtime.Record[FailedInput]) error {
	f.mu.Lock()
	*f.got = append(*f.got, r)
	f.mu.Unlock()
	return nil
}

func (f *failedSink) EndInput() error { return nil }

// TestFailedInputs: with ContinueOnError and FailedInputs, every failed
// action run (an error, a panic, a failing trigger condition) sends its
// input with the key, sequence number, action, run identity and error to
// the side output, with the input's timestamp, and is counted; the inputs
// that succeed are output as before, and the job goes on.
func TestFailedInputs(t *testing.T) {
	a := &Agent{Actions: []Action{
		NewAction("respond", func(c *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			switch in.Text {
			case "fail":
				return errors.New("model unreachable")
			case "panic":
				panic("nil map")
			}
			c.Output("ok:" + in.Text)
			return nil
		}, TypeInput),
		NewAction("needs", func(c *RunnerContext, _ Event) error { return nil }, TypeInput).WithCondition(`event.value.text != "cond" || event.value.missing > 1`),
	}}
	tag := weir.NewOutputTag[FailedInput]("failed")
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "one"}, 1),
		rec(msg{Key: "A", Text: "fail"}, 2),
		rec(msg{Key: "B", Text: "panic"}, 3),
		rec(msg{Key: "C", Text: "cond"}, 4),
		rec(msg{Key: "A", Text: "three"}, 5),
	), watermark.NoWatermarks[msg]())
	out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{ContinueOnError: true, FailedInputs: tag})
	rc := record(out)
	var mu sync.Mutex
	var failed []runtime.Record[FailedInput]
	weir.Transform(weir.SideOutput(out, tag), "failed", func() runtime.OneInputOperator[FailedInput, struct{}] {
		return &failedSink{mu: &mu, got: &failed}
	})
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := values(rc.events)
	slices.Sort(got)
	if want := []string{"ok:cond", "ok:one", "ok:three"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	var lines []string
	for _, r := range failed {
		f := r.Value
		in, _ := f.Input.(msg)
		if f.RunID == "" || f.Operator != "agent" || f.Err == nil {
			t.Fatalf("failed input without its identity: %+v", f)
		}
		if r := f.Reason(); !strings.Contains(r, f.Action) || strings.Contains(r, "\n") {
			t.Fatalf("reason %q lacks the action or is not one line", f.Reason())
		}
		lines = append(lines, fmt.Sprintf("%s/%d %s %s ts=%d %v", f.Key, f.Seq, f.Action, in.Text, r.Timestamp, f.Err))
	}
	slices.Sort(lines)
	want := []string{
		"A/1 respond fail ts=2 model unreachable",
		"B/0 respond panic ts=3 panic: nil map",
		`C/0 needs cond ts=4 agent: the condition of action "needs"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("failed inputs\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Fatalf("failed input %q, want it to start with %q", lines[i], want[i])
		}
	}
	m := env.Metrics()
	if n := m.Sum("agent", "failedInputs"); n != 3 {
		t.Fatalf("failedInputs = %d, want 3", n)
	}
	if n := m.Sum("agent", "actionErrors"); n != 3 {
		t.Fatalf("actionErrors = %d, want 3", n)
	}
}

// TestFailedInputsNeedsContinueOnError: FailedInputs without
// ContinueOnError is refused before the job starts.
func TestFailedInputsNeedsContinueOnError(t *testing.T) {
	err := Options{FailedInputs: weir.NewOutputTag[FailedInput]("f")}.Validate()
	if err == nil || !strings.Contains(err.Error(), "FailedInputs") {
		t.Fatalf("Validate = %v, want FailedInputs refused", err)
	}
}
