// Package tracing builds the OpenTelemetry tracer provider that exports an
// agent's traces (agent.Options.TracerProvider) over OTLP, from a Config
// that a pipeline file's job.tracing and `weir run`'s flags fill.
//
// # Guarantees
//
//	T1. Validated at the edge: Config.Validate names, in one line, what is
//	    wrong and what is accepted; NewProvider builds nothing from a Config
//	    that does not validate.
//	T2. Bounded: spans are batched (the SDK's batch span processor: a queue
//	    of 2048 spans, dropped beyond it, never blocking the operator) and
//	    sent by the exporter's own goroutine.
//	T3. Flushed on shutdown: Provider.Shutdown sends what is queued (bounded
//	    by its context) before it returns.
//
// It does not start a collector, and does not propagate trace context
// into model or tool requests.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols are the accepted values of Config.Protocol.
var Protocols = []string{"http", "grpc"}

// Config says where an agent's traces go. The zero value is usable once
// Endpoint is set.
type Config struct {
	// Endpoint is the OTLP receiver's URL, http:// (no TLS) or https://:
	// for protocol http the collector's base URL (http://localhost:4318;
	// the path /v1/traces is added when the URL has none), for grpc its
	// address as a URL (http://localhost:4317). Required.
	Endpoint string
	// Protocol is "http" (OTLP/HTTP with protobuf bodies) or "grpc";
	// "" means http.
	Protocol string
	// SampleRatio is the share of inputs traced, in (0, 1], decided per
	// trace (an input's whole execution tree is kept or dropped); 0
	// means 1, every input. To trace nothing, set no Config.
	SampleRatio float64
	// Content puts prompts, completions and tool arguments and results
	// on the spans (agent.Options.TraceContent); false means none.
	Content bool
	// ServiceName is the resource's service.name; "" means "weir".
	ServiceName string
}

// Validate reports what is wrong with c, one line per field.
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, errors.New("tracing: endpoint is empty; want the OTLP receiver's URL, such as http://localhost:4318 (http) or http://localhost:4317 (grpc)"))
	} else if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("tracing: endpoint %q: want an http:// or https:// URL with a host, such as http://localhost:4318", c.Endpoint))
	}
	switch c.Protocol {
	case "", "http", "grpc":
	default:
		errs = append(errs, fmt.Errorf("tracing: protocol %q: want http or grpc", c.Protocol))
	}
	if !(c.SampleRatio >= 0 && c.SampleRatio <= 1) {
		errs = append(errs, fmt.Errorf("tracing: sampleRatio %v: want a number from 0 to 1 (0 meaning 1: every input)", c.SampleRatio))
	}
	return errors.Join(errs...)
}

// NewProvider returns a tracer provider exporting to c.Endpoint, sampling
// c.SampleRatio of the traces (a child span follows its parent's
// decision). Call its Shutdown when the job has ended: it flushes the
// spans still queued. It connects lazily: an unreachable receiver makes
// exports fail later (the SDK logs them), never NewProvider.
func NewProvider(ctx context.Context, c Config) (*sdktrace.TracerProvider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	var err error
	switch c.Protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(c.Endpoint))
	default:
		ep := c.Endpoint
		if u, _ := url.Parse(ep); u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
			ep = u.String()
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(ep))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	ratio := c.SampleRatio
	if ratio == 0 {
		ratio = 1
	}
	name := c.ServiceName
	if name == "" {
		name = "weir"
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	), nil
}
