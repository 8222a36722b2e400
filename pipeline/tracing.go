package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/tracing"
)

// TracingSpec is job.tracing: where the agent steps' traces go
// (docs/tracing.md). Without it nothing is traced.
type TracingSpec struct {
	Pos Pos
	// Config is the exporter's configuration (Endpoint, Protocol,
	// SampleRatio, Content), validated when parsed.
	Config tracing.Config
}

// tracing reads job.tracing.
func (d *dec) tracing(k, n ast.Node) *TracingSpec {
	t := &TracingSpec{Pos: d.pos(k)}
	c := &t.Config
	d.object(n, "job.tracing",
		field{name: "endpoint", required: true, accepts: "the OTLP receiver's URL, such as http://localhost:4318", def: "none (no traces)", doc: "export traces over OTLP to this URL (`--trace-endpoint`)",
			fn: func(at string, _, v ast.Node) {
				if d.nonEmpty(v, at, "the OTLP receiver's URL, such as http://localhost:4318", &c.Endpoint) {
					if err := (tracing.Config{Endpoint: c.Endpoint}).Validate(); err != nil {
						d.errf(v, "%s: %q: want an http:// or https:// URL with a host, such as http://localhost:4318 (http) or http://localhost:4317 (grpc)", at, c.Endpoint)
					}
				}
			}},
		field{name: "protocol", accepts: "`http`, `grpc`", def: "`http`", doc: "the OTLP protocol (`--trace-protocol`)",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &c.Protocol, tracing.Protocols...) }},
		field{name: "sampleRatio", accepts: "a number above 0, at most 1", def: "1", doc: "share of inputs traced (`--trace-sample-ratio`)",
			fn: func(at string, _, v ast.Node) {
				s, ok := scalarText(v)
				f, err := strconv.ParseFloat(s, 64)
				if _, isStr := v.(*ast.StringNode); !ok || isStr || err != nil {
					d.errf(v, "%s: got %s, want a number above 0 and at most 1, such as 0.01 or 1", at, describe(v))
					return
				}
				if !(f > 0 && f <= 1) {
					d.errf(v, "%s: %s: want a number above 0 and at most 1, such as 0.01 or 1", at, s)
					return
				}
				c.SampleRatio = f
			}},
		field{name: "content", accepts: "true or false", def: "`false`", doc: "put prompts, completions, tool arguments and results on spans (`--trace-content`)",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &c.Content) }},
	)
	return t
}

// traceAgent sets o to trace into the job's tracer provider, started on
// the first agent step that asks and shut down (flushed) when the job
// closes. Nothing without job.tracing.
func (b *builder) traceAgent(ctx context.Context, o *agent.Options) error {
	t := b.j.Spec.Job.Tracing
	if t == nil {
		return nil
	}
	if b.j.tracer == nil {
		c := t.Config
		c.ServiceName = "weir"
		tp, err := tracing.NewProvider(ctx, c)
		if err != nil {
			return fmt.Errorf("%s: job.tracing: %w", t.Pos, err)
		}
		b.j.tracer = tp
		b.j.closers = append(b.j.closers, func() error {
			// Bounded: an unreachable receiver must not hold the close.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return tp.Shutdown(ctx)
		})
	}
	o.TracerProvider, o.TraceContent = b.j.tracer, t.Config.Content
	return nil
}
