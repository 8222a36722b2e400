package jsonl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
)

// A negative MaxLineSize was taken as the default; it now fails the job at
// start, naming the option, before any file is opened.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		size int
		want string
	}{
		{0, ""},
		{10, ""},
		{-1, "jsonl: Options.MaxLineSize -1: want 0"},
	} {
		o := jsonl.Options[event]{MaxLineSize: c.size}
		if err := o.Validate(); (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Fatalf("MaxLineSize %d: Validate: %v, want %q", c.size, err, c.want)
		}
		if c.want == "" {
			continue
		}
		env := weir.NewEnvironment(weir.Config{})
		weir.Collect(weir.FromSource(env, "src", jsonl.SourceWith(o, "/nonexistent/file.jsonl"), byTS()))
		if err := env.Execute(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("MaxLineSize %d: Execute: %v, want %q", c.size, err, c.want)
		}
	}
}
