// Package health answers an orchestrator's two questions about a weir
// process over HTTP, as Kubernetes probes ask them:
//
//	GET /healthz  200 while the process is alive and its job has not
//	              failed; 503 with the failure once it has (restart me).
//	              (/livez is the same.)
//	GET /readyz   200 once the job has restored its state and runs (and,
//	              in group mode, runs every task the group gave this
//	              process); 503 with the reason before that, while the
//	              job restarts after a failure or a task is handed over,
//	              and after the job has ended.
//
// The body is one line of text: "ok", or "ready: <why>", or "not ready:
// <why>", or the failure. A Probe is set by whoever runs the job (package
// pipeline for `weir run`) and served on the metrics address beside
// /metrics (job.metricsAddr, `--metrics-addr`) and on an address of its own
// if one is given (`--health-addr`); nothing is served unless an address
// is given. docs/deploy.md shows the Kubernetes probes that use them.
//
// A Probe is safe for concurrent use; its zero value is alive and not
// ready ("starting").
package health

import (
	"net/http"
	"sync"
)

// Status is what the endpoints answer.
type Status struct {
	// Alive is false once the job has failed for good.
	Alive bool
	// Ready is true while the job runs as it should.
	Ready bool
	// Reason is printed after the state: "running, restored from
	// checkpoint 12", "restoring", the failure.
	Reason string
}

// Probe is a process's liveness and readiness.
type Probe struct {
	mu     sync.Mutex
	status Status
	watch  func() Status
	set    bool
}

// Set sets the status, replacing any function given to Watch.
func (p *Probe) Set(s Status) {
	p.mu.Lock()
	p.status, p.watch, p.set = s, nil, true
	p.mu.Unlock()
}

// Watch makes the probe ask f at every request (from the request's
// goroutine): for a status that follows a running job.
func (p *Probe) Watch(f func() Status) {
	p.mu.Lock()
	p.watch, p.set = f, true
	p.mu.Unlock()
}

// Status returns what the endpoints would answer now.
func (p *Probe) Status() Status {
	p.mu.Lock()
	s, f, set := p.status, p.watch, p.set
	p.mu.Unlock()
	if f != nil {
		return f()
	}
	if !set {
		return Status{Alive: true, Reason: "starting"}
	}
	return s
}

// ServeHTTP serves /healthz, /livez and /readyz (any other path: 404).
func (p *Probe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s := p.Status()
	var ok bool
	var line string
	switch r.URL.Path {
	case "/healthz", "/livez":
		ok, line = s.Alive, "ok"
		if !s.Alive {
			line = s.Reason
		}
	case "/readyz":
		ok = s.Alive && s.Ready
		switch {
		case !s.Alive:
			line = s.Reason
		case s.Ready:
			line = "ready: " + s.Reason
		default:
			line = "not ready: " + s.Reason
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write([]byte(line + "\n"))
}

// Mux serves p's endpoints and every other path with other (if not nil):
// what a process serves on its metrics address, other being the
// Prometheus handler.
func Mux(p *Probe, other http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", p)
	mux.Handle("/livez", p)
	mux.Handle("/readyz", p)
	if other != nil {
		mux.Handle("/", other)
	}
	return mux
}
