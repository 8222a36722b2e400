package agent

import (
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// Negative limits and time-outs were taken as defaults (or as a time-out
// already expired); they now fail the job at Start, naming the option.
func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"zero", Options{}, ""},
		{"set", Options{MaxConcurrentKeys: 4, MaxBufferedInputs: 8, ActionTimeout: 1, StallWarning: -1}, ""},
		{"keys", Options{MaxConcurrentKeys: -1}, "agent: Options.MaxConcurrentKeys -1: want 0"},
		{"buffered", Options{MaxBufferedInputs: -4}, "agent: Options.MaxBufferedInputs -4: want 0"},
		{"answers", Options{MaxAnswersPerKey: -1}, "agent: Options.MaxAnswersPerKey -1: want 0 (meaning 64)"},
		{"timeout", Options{ActionTimeout: -1}, "agent: Options.ActionTimeout -1ns: want 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.opts.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", err, c.want)
			}
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "A", Text: "A1"}, 1)), watermark.NoWatermarks[msg]())
			record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", chatAgent(newGatedModel()), c.opts))
			if _, err := env.Start(testCtx(t)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start: %v, want %q", err, c.want)
			}
		})
	}
}
