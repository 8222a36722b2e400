package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// TracerName is the instrumentation scope of the agent operator's spans.
const TracerName = "github.com/weirproject/weir/agent"

// KafkaOrigin is implemented by input values that know the Kafka record
// they were read from (kafka.Message, the value of a source read
// WithMetadata): with tracing on, an input's span carries the record's
// topic, partition and offset.
type KafkaOrigin interface {
	KafkaOrigin() (topic string, partition int32, offset int64)
}

// TraceContextCarrier is implemented by input values that carry a W3C
// trace context (kafka.Message: the traceparent and tracestate headers of
// its Kafka record): with tracing on, the input's trace continues it, the
// input's span a child of the remote span (a malformed traceparent is
// ignored: the input's span starts a trace of its own).
type TraceContextCarrier interface {
	TraceContext() (traceparent, tracestate string)
}

// w3c extracts W3C trace contexts.
var w3c = propagation.TraceContext{}

// remoteParent returns ctx with the trace context value carries, if any
// (contextOf, else TraceContextCarrier).
func remoteParent(ctx context.Context, value any, contextOf func(any) (string, string)) context.Context {
	var tp, ts string
	if contextOf != nil {
		tp, ts = contextOf(value)
	} else if c, ok := value.(TraceContextCarrier); ok {
		tp, ts = c.TraceContext()
	}
	if tp == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
}

// The attributes of the agent's spans beyond the OpenTelemetry semantic
// conventions (docs/tracing.md lists them all).
const (
	attrOperator = attribute.Key("weir.agent.operator")
	attrSubtask  = attribute.Key("weir.agent.subtask")
	attrKey      = attribute.Key("weir.agent.key")
	attrSeq      = attribute.Key("weir.agent.seq")
	attrRestored = attribute.Key("weir.agent.restored")
	attrAction   = attribute.Key("weir.agent.action")
	attrEventID  = attribute.Key("weir.agent.event.id")
	attrEvType   = attribute.Key("weir.agent.event.type")
	attrReplayed = attribute.Key("weir.agent.replayed")
	attrModel    = attribute.Key("weir.agent.model")
	attrWaitMs   = attribute.Key("weir.retry.wait_ms")

	attrGenOp         = attribute.Key("gen_ai.operation.name")
	attrGenReqModel   = attribute.Key("gen_ai.request.model")
	attrGenRespModel  = attribute.Key("gen_ai.response.model")
	attrGenInTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrGenOutTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrGenFinish     = attribute.Key("gen_ai.response.finish_reasons")
	attrGenInMsgs     = attribute.Key("gen_ai.input.messages")
	attrGenOutMsgs    = attribute.Key("gen_ai.output.messages")
	attrGenToolName   = attribute.Key("gen_ai.tool.name")
	attrGenToolArgs   = attribute.Key("gen_ai.tool.call.arguments")
	attrGenToolResult = attribute.Key("gen_ai.tool.call.result")

	attrMsgSystem    = attribute.Key("messaging.system")
	attrMsgDest      = attribute.Key("messaging.destination.name")
	attrMsgPartition = attribute.Key("messaging.destination.partition.id")
	attrMsgOffset    = attribute.Key("messaging.kafka.offset")
	attrErrorType    = attribute.Key("error.type")
)

// tracing makes the spans of one operator subtask; nil when
// Options.TracerProvider is nil, so that tracing off costs a nil check at
// each place a span would start.
//
// The spans of an input form its execution tree: the input span (started
// when the input starts, ended when its last action has been applied, on
// the subtask goroutine) is the parent of a span per action run (on the
// action's goroutine), which is the parent of a span per model and tool
// call the action makes through its RunnerContext. An action run taken
// from the action-state store after a restore, and a call answered from
// it, are spans marked weir.agent.replayed: nothing was asked of the
// model or tool. Attributes are set only on spans that are recording, and
// an input whose span the sampler drops gets no spans under it, so such an
// input costs one span's start and end.
type tracing struct {
	t        trace.Tracer
	content  bool
	operator string
	subtask  int
	// contextOf is Options.TraceContextOf (nil: none).
	contextOf func(input any) (traceparent, tracestate string)
}

func newTracing(tp trace.TracerProvider, content bool, operator string, subtask int) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{t: tp.Tracer(TracerName), content: content, operator: operator, subtask: subtask}
}

// startInput starts the span of the input with sequence number seq of key
// (on the subtask goroutine); restored says the input was restored from a
// checkpoint unfinished.
func (t *tracing) startInput(key any, seq int64, value any, restored bool) trace.Span {
	_, span := t.t.Start(remoteParent(context.Background(), value, t.contextOf), "invoke_agent "+t.operator, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(attrGenOp.String("invoke_agent"), attrOperator.String(t.operator), attrSubtask.Int(t.subtask),
		attrKey.String(fmt.Sprint(key)), attrSeq.Int64(seq))
	if restored {
		span.SetAttributes(attrRestored.Bool(true))
	}
	if ko, ok := value.(KafkaOrigin); ok {
		topic, p, off := ko.KafkaOrigin()
		span.SetAttributes(attrMsgSystem.String("kafka"), attrMsgDest.String(topic),
			attrMsgPartition.String(fmt.Sprint(p)), attrMsgOffset.Int64(off))
	}
	return span
}

// startAction starts the span of rc's action run under the input's span
// parent and returns the context the action runs under (carrying the
// span, so that the action's own instrumentation nests under it).
func (t *tracing) startAction(ctx context.Context, parent trace.Span, rc *RunnerContext) (context.Context, trace.Span) {
	ctx, span := t.t.Start(trace.ContextWithSpan(ctx, parent), "action "+rc.action.Name)
	if span.IsRecording() {
		span.SetAttributes(attrAction.String(rc.action.Name), attrKey.String(fmt.Sprint(rc.key)), attrSeq.Int64(rc.seq),
			attrEventID.Int64(rc.ev.ID), attrEvType.String(rc.ev.Type))
	}
	return ctx, span
}

// endSpan ends span, with err (if any) as its status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tracedChat is RunnerContext.Chat with a span around the call.
func (t *tracing) chat(c *RunnerContext, name string, req model.Request, call func() (*model.Response, error)) (*model.Response, error) {
	reqModel := req.Model
	if reqModel == "" {
		reqModel = name
	}
	parent := c.ctx
	ctx, span := t.t.Start(parent, "chat "+reqModel, trace.WithSpanKind(trace.SpanKindClient))
	rec := span.IsRecording()
	if rec {
		span.SetAttributes(attrGenOp.String("chat"), attrGenReqModel.String(reqModel), attrModel.String(name))
		if t.content {
			span.SetAttributes(attrGenInMsgs.String(jsonText(req.Messages)))
		}
	}
	c.ctx = ctx
	resp, err := call()
	c.ctx = parent
	if rec {
		if c.replayedCall {
			span.SetAttributes(attrReplayed.Bool(true))
		}
		if err == nil && resp != nil {
			span.SetAttributes(attrGenInTokens.Int(resp.Usage.PromptTokens), attrGenOutTokens.Int(resp.Usage.CompletionTokens))
			if resp.Model != "" {
				span.SetAttributes(attrGenRespModel.String(resp.Model))
			}
			if resp.FinishReason != "" {
				span.SetAttributes(attrGenFinish.StringSlice([]string{resp.FinishReason}))
			}
			if t.content {
				span.SetAttributes(attrGenOutMsgs.String(jsonText([]model.Message{resp.Message})))
			}
		}
		if err != nil {
			span.SetAttributes(attrErrorType.String(fmt.Sprintf("%T", err)))
		}
	}
	endSpan(span, err)
	return resp, err
}

// callTool is RunnerContext.CallTool with a span around the call.
func (t *tracing) callTool(c *RunnerContext, name string, args json.RawMessage, call func() (tool.Result, error)) (tool.Result, error) {
	parent := c.ctx
	ctx, span := t.t.Start(parent, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal))
	rec := span.IsRecording()
	if rec {
		span.SetAttributes(attrGenOp.String("execute_tool"), attrGenToolName.String(name))
		if t.content {
			span.SetAttributes(attrGenToolArgs.String(string(args)))
		}
	}
	c.ctx = ctx
	res, err := call()
	c.ctx = parent
	if rec {
		if c.replayedCall {
			span.SetAttributes(attrReplayed.Bool(true))
		}
		if t.content && err == nil {
			span.SetAttributes(attrGenToolResult.String(res.Content))
		}
		if err == nil && res.IsError {
			span.SetAttributes(attrErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "the tool reported an error")
		}
	}
	endSpan(span, err)
	return res, err
}

// retryEvents returns obs extended to add a span event to the span in ctx
// for every retry the model client reports: "rate_limited" for a 429
// waited out through a rate limiter, else "retry", with the wait and the
// failed attempt's error. obs itself when ctx has no recording span.
func retryEvents(ctx context.Context, obs model.RetryObserver) model.RetryObserver {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return obs
	}
	return func(err error, wait time.Duration, rateLimited bool) {
		if obs != nil {
			obs(err, wait, rateLimited)
		}
		name := "retry"
		if rateLimited {
			name = "rate_limited"
		}
		attrs := []attribute.KeyValue{attrWaitMs.Int64(wait.Milliseconds())}
		if err != nil {
			attrs = append(attrs, attribute.String("exception.message", err.Error()))
		}
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	return string(b)
}
