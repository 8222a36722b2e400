package health_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirproject/weir/health"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, strings.TrimSpace(string(b))
}

// TestProbe: each state answers as documented, on both endpoints.
func TestProbe(t *testing.T) {
	var p health.Probe
	other := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") })
	h := health.Mux(&p, other)
	type want struct {
		healthz int
		hbody   string
		readyz  int
		rbody   string
	}
	check := func(name string, w want) {
		t.Helper()
		if c, b := get(t, h, "/healthz"); c != w.healthz || b != w.hbody {
			t.Errorf("%s: /healthz %d %q, want %d %q", name, c, b, w.healthz, w.hbody)
		}
		if c, b := get(t, h, "/livez"); c != w.healthz || b != w.hbody {
			t.Errorf("%s: /livez %d %q, want %d %q", name, c, b, w.healthz, w.hbody)
		}
		if c, b := get(t, h, "/readyz"); c != w.readyz || b != w.rbody {
			t.Errorf("%s: /readyz %d %q, want %d %q", name, c, b, w.readyz, w.rbody)
		}
	}
	check("zero", want{200, "ok", 503, "not ready: starting"})
	p.Set(health.Status{Alive: true, Ready: true, Reason: "running"})
	check("running", want{200, "ok", 200, "ready: running"})
	ready := false
	p.Watch(func() health.Status { return health.Status{Alive: true, Ready: ready, Reason: "watched"} })
	check("watched, not ready", want{200, "ok", 503, "not ready: watched"})
	ready = true
	check("watched, ready", want{200, "ok", 200, "ready: watched"})
	p.Set(health.Status{Reason: "failed: boom"})
	check("failed", want{503, "failed: boom", 503, "failed: boom"})
	if c, b := get(t, h, "/metrics"); c != 200 || b != "metrics" {
		t.Errorf("/metrics: %d %q: want the other handler", c, b)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", rec.Code)
	}
	if c, _ := get(t, &p, "/other"); c != 404 {
		t.Errorf("the probe alone on /other: %d, want 404", c)
	}
}
