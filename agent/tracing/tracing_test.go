package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoint: "http://localhost:4318"}, ""},
		{Config{Endpoint: "https://otel.example:4317", Protocol: "grpc", SampleRatio: 0.01}, ""},
		{Config{}, "endpoint is empty"},
		{Config{Endpoint: "localhost:4318"}, `endpoint "localhost:4318": want an http:// or https:// URL`},
		{Config{Endpoint: "http://x:1", Protocol: "thrift"}, `protocol "thrift": want http or grpc`},
		{Config{Endpoint: "http://x:1", SampleRatio: 1.5}, "sampleRatio 1.5: want a number from 0 to 1"},
		{Config{Endpoint: "http://x:1", SampleRatio: -0.1}, "sampleRatio -0.1"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want an error containing %q", c.cfg, err, c.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%+v: the error is not one line: %q", c.cfg, err)
		}
	}
	if _, err := NewProvider(context.Background(), Config{}); err == nil {
		t.Fatal("NewProvider took a config without an endpoint")
	}
}

// exportOne makes one span through c's provider and shuts it down (which
// flushes it).
func exportOne(t *testing.T, c Config) {
	t.Helper()
	tp, err := NewProvider(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "one")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func spanNames(req *collectortrace.ExportTraceServiceRequest) (service string, names []string) {
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.Resource.GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	return service, names
}

// TestHTTPExport: protocol http sends to the base URL's /v1/traces.
func TestHTTPExport(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- &req
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	exportOne(t, Config{Endpoint: srv.URL, ServiceName: "svc"})
	service, names := spanNames(<-got)
	if service != "svc" || len(names) != 1 || names[0] != "one" {
		t.Fatalf("received service %q, spans %v", service, names)
	}
}

type grpcReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	got chan *collectortrace.ExportTraceServiceRequest
}

func (r *grpcReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.got <- req
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestGRPCExport: protocol grpc sends to an OTLP/gRPC receiver.
func TestGRPCExport(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	recv := &grpcReceiver{got: make(chan *collectortrace.ExportTraceServiceRequest, 1)}
	collectortrace.RegisterTraceServiceServer(s, recv)
	go s.Serve(l)
	defer s.Stop()
	exportOne(t, Config{Endpoint: "http://" + l.Addr().String(), Protocol: "grpc"})
	service, names := spanNames(<-recv.got)
	if service != "weir" || len(names) != 1 || names[0] != "one" {
		t.Fatalf("received service %q, spans %v", service, names)
	}
}
