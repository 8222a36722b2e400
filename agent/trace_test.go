package agent

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every
// ExportTraceServiceRequest with the protocol's own types and keeps the
// spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces of application/x-protobuf", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				if ss.Scope.GetName() == TracerName {
					r.spans = append(r.spans, ss.Spans...)
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// provider returns a tracer provider exporting to the receiver, sampling
// everything.
func (r *otlpReceiver) provider(t *testing.T) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
}

// take returns the spans received so far and forgets them.
func (r *otlpReceiver) take() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans
	r.spans = nil
	return s
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = anyValue(kv.Value)
	}
	return m
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyValue(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v)
}

// tree renders the spans as an indented tree ("name{attrs}"), children in
// start order, the given attributes only.
func tree(spans []*tracepb.Span, keys ...string) string {
	byParent := map[string][]*tracepb.Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[hex.EncodeToString(s.SpanId)] = true
	}
	for _, s := range spans {
		p := hex.EncodeToString(s.ParentSpanId)
		if !ids[p] {
			p = "" // a root, or a child of a span not exported
		}
		byParent[p] = append(byParent[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := byParent[parent]
		slices.SortStableFunc(kids, func(x, y *tracepb.Span) int {
			if x.StartTimeUnixNano != y.StartTimeUnixNano {
				return int(int64(x.StartTimeUnixNano - y.StartTimeUnixNano))
			}
			return strings.Compare(x.Name, y.Name)
		})
		for _, s := range kids {
			a := attrs(s)
			var shown []string
			for _, k := range keys {
				if v, ok := a[k]; ok {
					shown = append(shown, k+"="+v)
				}
			}
			if s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				shown = append(shown, "ERROR")
			}
			fmt.Fprintf(&b, "%s%s{%s}\n", strings.Repeat("  ", depth), s.Name, strings.Join(shown, " "))
			walk(hex.EncodeToString(s.SpanId), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

// TestTracesOverOTLP runs an agent whose first action calls the offline
// model, a Go tool and an MCP tool and whose second calls the model, crashes it while
// the second waits, and restores it: the OTLP receiver gets the input's
// execution tree of each run, the second one with the completed first
// action and the second action's model call marked replayed.
func TestTracesOverOTLP(t *testing.T) {
	ctx := testCtx(t)
	recv := newOTLPReceiver(t)
	store := NewMemoryStore()
	lookup := tool.MustFunc("lookup", "looks a word up", func(_ context.Context, a struct {
		Word string `json:"word"`
	}) (string, error) {
		return "definition of " + a.Word, nil
	})
	var g *gates
	a := &Agent{
		Models: map[string]model.ChatModel{"llm": &model.Offline{}},
		Tools:  append([]tool.Tool{lookup}, (&mcpMailer{}).connect(t, ctx).Tools()...),
		Actions: []Action{
			NewAction("first", func(c *RunnerContext, ev Event) error {
				if err := g.wait(c.Context(), "first"); err != nil {
					return err
				}
				if _, err := c.Chat("llm", model.Request{Messages: []model.Message{model.User("define weir")}}); err != nil {
					return err
				}
				res, err := c.CallTool("lookup", json.RawMessage(`{"word":"weir"}`))
				if err != nil {
					return err
				}
				// An MCP tool, reporting an error (IsError).
				if mail, err := c.CallTool("email", json.RawMessage(`{"to":"nobody"}`)); err != nil || !mail.IsError {
					return fmt.Errorf("email: %v, %+v", err, mail)
				}
				c.Output(res.Content)
				return c.Send(NewEvent("next", "payload", nil))
			}, TypeInput),
			NewAction("second", func(c *RunnerContext, ev Event) error {
				resp, err := c.Chat("llm", model.Request{Model: "offline-large", Messages: []model.Message{model.User("summarise")}})
				if err != nil {
					return err
				}
				if err := g.wait(c.Context(), "second"); err != nil {
					return err
				}
				c.Output(resp.Message.Content)
				return nil
			}, "next"),
		},
	}
	job := func(tp *sdktrace.TracerProvider, content bool, dir, restore string, steps ...step[msg]) *weir.Environment {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]()).UID("src")
		out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a,
			Options{Store: store.Factory(), TracerProvider: tp, TraceContent: content}).UID("agent")
		record(out)
		return env
	}
	keys := []string{"weir.agent.key", "weir.agent.seq", "weir.agent.restored", "weir.agent.replayed", "weir.agent.event.type",
		"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.response.finish_reasons",
		"gen_ai.tool.name"}

	// The first run: checkpoint while "first" waits, then let it finish;
	// "second" calls the model and waits at its gate when the job is
	// cancelled.
	g = newGates("first", "second")
	tp1 := recv.provider(t)
	env := job(tp1, true, filepath.Join(t.TempDir(), "cp"), "", rec(msg{Key: "A"}, 1), pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env,
		func() { g.waitArrived(t, ctx, "first") },
		func() { g.release("first"); g.waitArrived(t, ctx, "second") })
	if err := tp1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := recv.take()
	// The input span never ends (the job was cancelled mid-input), so
	// the action spans are the roots the receiver sees; the second's
	// ends with the cancellation.
	want := `action first{weir.agent.key=A weir.agent.seq=0 weir.agent.event.type=input}
  chat llm{gen_ai.operation.name=chat gen_ai.request.model=llm gen_ai.response.model=offline gen_ai.response.finish_reasons=[stop]}
  execute_tool lookup{gen_ai.operation.name=execute_tool gen_ai.tool.name=lookup}
  execute_tool email{gen_ai.operation.name=execute_tool gen_ai.tool.name=email ERROR}
action second{weir.agent.key=A weir.agent.seq=0 weir.agent.event.type=next ERROR}
  chat offline-large{gen_ai.operation.name=chat gen_ai.request.model=offline-large gen_ai.response.model=offline gen_ai.response.finish_reasons=[stop]}
`
	if got := tree(spans, keys...); got != want {
		t.Fatalf("first run's spans:\n%s\nwant:\n%s", got, want)
	}
	// All of one trace (the input's), with token counts and, opted in,
	// the content.
	for _, s := range spans {
		if !slices.Equal(s.TraceId, spans[0].TraceId) {
			t.Fatalf("span %s is in trace %x, not the input's %x", s.Name, s.TraceId, spans[0].TraceId)
		}
		a := attrs(s)
		switch s.Name {
		case "chat llm":
			if a["gen_ai.usage.input_tokens"] == "" || a["gen_ai.usage.output_tokens"] != "16" {
				t.Fatalf("chat span's token counts: %v", a)
			}
			if !strings.Contains(a["gen_ai.input.messages"], "define weir") || !strings.Contains(a["gen_ai.output.messages"], "define weir") {
				t.Fatalf("chat span's content: %v", a)
			}
		case "execute_tool lookup":
			if a["gen_ai.tool.call.arguments"] != `{"word":"weir"}` || a["gen_ai.tool.call.result"] != "definition of weir" {
				t.Fatalf("tool span's content: %v", a)
			}
		}
	}

	// The restored run, content off: the input span is the root, marked
	// restored; "first" completed before the crash and is replayed from
	// the store (no model or tool span under it); "second" runs again and
	// its model call is answered from the store.
	g = newGates()
	done := make(chan struct{})
	close(done)
	tp2 := recv.provider(t)
	env2 := job(tp2, false, filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A"}, 1), pause[msg](done))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans = recv.take()
	want = `invoke_agent agent{weir.agent.key=A weir.agent.seq=0 weir.agent.restored=true gen_ai.operation.name=invoke_agent}
  action first{weir.agent.key=A weir.agent.seq=0 weir.agent.replayed=true weir.agent.event.type=input}
  action second{weir.agent.key=A weir.agent.seq=0 weir.agent.event.type=next}
    chat offline-large{weir.agent.replayed=true gen_ai.operation.name=chat gen_ai.request.model=offline-large gen_ai.response.model=offline gen_ai.response.finish_reasons=[stop]}
`
	if got := tree(spans, keys...); got != want {
		t.Fatalf("restored run's spans:\n%s\nwant:\n%s", got, want)
	}
	for _, s := range spans {
		for k := range attrs(s) {
			if k == "gen_ai.input.messages" || k == "gen_ai.output.messages" || strings.HasPrefix(k, "gen_ai.tool.call.") {
				t.Fatalf("span %s carries %s with content off", s.Name, k)
			}
		}
	}
}

type kafkaMsg struct{ off int64 }

func (m kafkaMsg) KafkaOrigin() (string, int32, int64) { return "questions", 3, m.off }

// TestSpanAttributesOfOriginAndRetries: an input that knows its Kafka
// record carries its topic, partition and offset; a model client's
// retries and rate-limit waits become events of the call's span.
func TestSpanAttributesOfOriginAndRetries(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := newTracing(tp, false, "agent", 0)
	in := tr.startInput("K", 4, kafkaMsg{off: 42}, false)
	ctx, call := tr.t.Start(trace.ContextWithSpan(context.Background(), in), "chat")
	obs := retryEvents(ctx, nil)
	obs(errors.New("503"), 250*time.Millisecond, false)
	obs(errors.New("429"), 2*time.Second, true)
	call.End()
	in.End()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	got := map[string]string{}
	for _, kv := range spans[1].Attributes {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"messaging.system": "kafka", "messaging.destination.name": "questions",
		"messaging.destination.partition.id": "3", "messaging.kafka.offset": "42", "weir.agent.key": "K", "weir.agent.seq": "4"} {
		if got[k] != v {
			t.Fatalf("input span's %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	var evs []string
	for _, e := range spans[0].Events {
		evs = append(evs, fmt.Sprintf("%s %v", e.Name, e.Attributes[0].Value.Emit()))
	}
	if want := []string{"retry 250", "rate_limited 2000"}; !slices.Equal(evs, want) {
		t.Fatalf("call span's events %v, want %v", evs, want)
	}
	// Without a recording span the observer is the one given.
	if retryEvents(context.Background(), nil) != nil {
		t.Fatal("retryEvents wrapped the observer of a context without a span")
	}
}

type tracedMsg struct{ parent, state string }

func (m tracedMsg) TraceContext() (string, string) { return m.parent, m.state }

// TestInputContinuesRemoteTrace: an input carrying a W3C traceparent (the
// header of its Kafka record) is traced as a child of that remote span, in
// its trace, with its tracestate; a malformed one starts a trace of its
// own.
func TestInputContinuesRemoteTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := newTracing(tp, false, "agent", 0)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tr.startInput("K", 0, tracedMsg{"00-" + traceID + "-" + parentID + "-01", "vendor=1"}, false).End()
	tr.startInput("K", 1, tracedMsg{"garbage", ""}, false).End()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parentID || !s.Parent.IsRemote() || s.SpanContext.TraceState().String() != "vendor=1" {
		t.Fatalf("span of the traced input: trace %s parent %s (remote %v) state %q; want trace %s parent %s, remote, vendor=1",
			s.SpanContext.TraceID(), s.Parent.SpanID(), s.Parent.IsRemote(), s.SpanContext.TraceState().String(), traceID, parentID)
	}
	if s := spans[1]; s.Parent.IsValid() || s.SpanContext.TraceID().String() == traceID {
		t.Fatalf("a malformed traceparent made a parent: %v", s.Parent)
	}
	// Options.TraceContextOf finds it in a value that is no carrier (a
	// pipeline's record with the headers in its metadata field).
	tr.contextOf = func(v any) (string, string) {
		m, _ := v.(map[string]any)["meta"].(map[string]any)
		tp, _ := m["traceparent"].(string)
		return tp, ""
	}
	tr.startInput("K", 2, map[string]any{"meta": map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}}, false).End()
	if s := exp.GetSpans()[2]; s.Parent.SpanID().String() != parentID {
		t.Fatalf("with TraceContextOf: parent %s, want %s", s.Parent.SpanID(), parentID)
	}
}
