package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
)

// TestHealthEndpoints: a running job answers /readyz 200 ("running,
// started fresh") and /healthz 200 on its health address and beside
// /metrics, which still serves the metrics; once the job has ended the
// probe says not ready, alive. Bad addresses are refused at parse time.
func TestHealthEndpoints(t *testing.T) {
	src := `kafka:
  embedded: {topics: {orders: 1}}
source:
  kafka: {topics: [orders]}
sink:
  stdout: {}
job:
  healthAddr: 127.0.0.1:0
  metricsAddr: 127.0.0.1:0
`
	spec, err := pipeline.Parse("h.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var job *pipeline.Job
	var checked error
	var log strings.Builder
	opts := pipeline.Options{Stdout: io.Discard, OnStart: func(j *pipeline.Job, _ *runtime.Job) {
		job = j
		defer cancel()
		for _, c := range []struct{ url, want string }{
			{"http://" + j.HealthAddr() + "/readyz", "ready: running, started fresh"},
			{"http://" + j.HealthAddr() + "/healthz", "ok"},
			{"http://" + j.MetricsAddr() + "/readyz", "ready: running, started fresh"},
			{"http://" + j.MetricsAddr() + "/livez", "ok"},
		} {
			code, body := httpGet(t, c.url)
			if code != 200 || body != c.want {
				checked = fmt.Errorf("GET %s: %d %q; want 200 %q", c.url, code, body, c.want)
				return
			}
		}
		if code, body := httpGet(t, "http://"+j.MetricsAddr()+"/metrics"); code != 200 || !strings.Contains(body, "weir_records_in") {
			checked = fmt.Errorf("GET /metrics: %d, no weir_records_in in %.200q", code, body)
		}
	}}
	if _, err := pipeline.Run(ctx, spec, opts, &log); err != nil {
		t.Fatal(err)
	}
	if checked != nil {
		t.Fatal(checked)
	}
	if !regexp.MustCompile(`health on http://127\.0\.0\.1:\d+/healthz and /readyz`).MatchString(log.String()) {
		t.Errorf("the start line does not name the health address:\n%s", log.String())
	}
	st := job.Health().Status()
	if !st.Alive || st.Ready || st.Reason != "the job has ended" {
		t.Errorf("after the run the probe says %+v; want alive, not ready, the job has ended", st)
	}
	_, err = pipeline.Parse("h.yaml", []byte("source: {generate: {count: 1, fields: {a: i}}}\nsink: {stdout: {}}\njob: {healthAddr: nohostport}\n"))
	if err == nil || !strings.Contains(err.Error(), `h.yaml:3:19: job.healthAddr: "nohostport": want host:port`) {
		t.Errorf("a bad job.healthAddr: %v; want it refused at its position", err)
	}
}
