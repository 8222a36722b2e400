package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirproject/weir/pipeline"
)

// traceFlags are `weir run`'s --trace-* flags: they set job.tracing, or
// override its fields (docs/tracing.md).
type traceFlags struct {
	endpoint, protocol string
	ratio              float64
	content            bool
}

func addTraceFlags(f *pflag.FlagSet) *traceFlags {
	t := &traceFlags{}
	f.StringVar(&t.endpoint, "trace-endpoint", "", "export the agent steps' traces over OTLP to this URL, such as http://localhost:4318 (overrides job.tracing.endpoint; docs/tracing.md)")
	f.StringVar(&t.protocol, "trace-protocol", "", "with tracing: http or grpc (overrides job.tracing.protocol; default http)")
	f.Float64Var(&t.ratio, "trace-sample-ratio", 0, "with tracing: the share of inputs traced, above 0 and at most 1 (overrides job.tracing.sampleRatio; default 1)")
	f.BoolVar(&t.content, "trace-content", false, "with tracing: put prompts, completions and tool arguments and results on the spans (overrides job.tracing.content)")
	return t
}

// apply puts the flags given into s.Job.Tracing, with a usage error (one
// line, exit status 2) for a bad value or a flag that needs an endpoint.
func (t *traceFlags) apply(cmd *cobra.Command, s *pipeline.Spec) error {
	f := cmd.Flags()
	given := false
	for _, n := range []string{"trace-endpoint", "trace-protocol", "trace-sample-ratio", "trace-content"} {
		given = given || f.Changed(n)
	}
	if !given {
		return nil
	}
	ts := s.Job.Tracing
	if ts == nil {
		if !f.Changed("trace-endpoint") {
			return usagef(cmd, "--trace-protocol, --trace-sample-ratio and --trace-content need --trace-endpoint (or job.tracing in the file)")
		}
		ts = &pipeline.TracingSpec{}
	}
	c := ts.Config
	if f.Changed("trace-endpoint") {
		c.Endpoint = t.endpoint
	}
	if f.Changed("trace-protocol") {
		c.Protocol = t.protocol
	}
	if f.Changed("trace-sample-ratio") {
		if !(t.ratio > 0 && t.ratio <= 1) {
			return usagef(cmd, "--trace-sample-ratio %v: want a number above 0 and at most 1, such as 0.01 or 1", t.ratio)
		}
		c.SampleRatio = t.ratio
	}
	if f.Changed("trace-content") {
		c.Content = t.content
	}
	if err := c.Validate(); err != nil {
		return usagef(cmd, "--trace-*: %v", err)
	}
	ts.Config = c
	s.Job.Tracing = ts
	return nil
}
