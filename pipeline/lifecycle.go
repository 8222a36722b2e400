package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/weirproject/weir/health"
	"github.com/weirproject/weir/metrics"
	"github.com/weirproject/weir/runtime"
)

// Start starts the job (and the metrics server, if an address is set) and
// returns the running job: the caller may trigger savepoints, cancel it,
// read its metrics, attach a dashboard, and must Wait for it and then
// Close the Job.
func (j *Job) Start(ctx context.Context) (*runtime.Job, error) {
	j.probe.Set(health.Status{Alive: true, Reason: "restoring"})
	if err := j.startServers(); err != nil {
		return nil, err
	}
	job, err := j.Env.Start(ctx)
	if err != nil {
		j.probe.Set(health.Status{Reason: "failed: " + err.Error()})
		return nil, err
	}
	j.probe.Watch(func() health.Status { return jobStatus(job) })
	return job, nil
}

// startServers starts the job's HTTP servers that have an address: the
// metrics server (with /healthz and /readyz), the approvals endpoint and
// the dedicated health server. Close stops them.
func (j *Job) startServers() error {
	if j.metricsAddr != "" {
		srv, addr, err := serve(j.metricsAddr, health.Mux(&j.probe, metrics.Handler(j.Env.Metrics())))
		if err != nil {
			return fmt.Errorf("pipeline: metrics: %w", err)
		}
		j.srv, j.metricsAddr = srv, addr
	}
	if j.approvalsAddr != "" && j.approvals == nil {
		if err := j.startApprovals(j.approvalsAddr); err != nil {
			return err
		}
	}
	if j.healthAddr != "" {
		srv, addr, err := serve(j.healthAddr, health.Mux(&j.probe, nil))
		if err != nil {
			return fmt.Errorf("pipeline: health: %w", err)
		}
		j.healthSrv, j.healthAddr = srv, addr
	}
	return nil
}

// serve listens on addr and serves h there until the server is closed; it
// returns the server and the address it listens on (the port chosen for
// ":0").
func serve(addr string, h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// jobStatus is the health of a running job: ready while it runs, not
// while it restarts after a failure or after it has ended; not alive once
// it has failed.
func jobStatus(job *runtime.Job) health.Status {
	select {
	case <-job.Done():
		if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			return health.Status{Reason: "failed: " + err.Error()}
		}
		return health.Status{Alive: true, Reason: "the job has ended"}
	default:
	}
	if err := job.Restarting(); err != nil {
		return health.Status{Alive: true, Reason: "restarting after a failure: " + err.Error()}
	}
	why := "running, started fresh"
	if r := job.Restored(); r.Path != "" {
		why = "running, restored from " + r.Path
	}
	return health.Status{Alive: true, Ready: true, Reason: why}
}

// HealthAddr is the address of the dedicated health server, once started
// ("" without one).
func (j *Job) HealthAddr() string {
	if j.healthSrv == nil {
		return ""
	}
	return j.healthAddr
}

// Health is the job's probe, served as /healthz and /readyz.
func (j *Job) Health() *health.Probe { return &j.probe }

// MetricsAddr is the address the metrics server listens on, once started
// ("" without one).
func (j *Job) MetricsAddr() string {
	if j.srv == nil {
		return ""
	}
	return j.metricsAddr
}

// CaughtUp reports whether the Kafka source has caught up with the end
// offsets it listed at start (false without a Kafka source).
func (j *Job) CaughtUp() bool { return j.kafkaSource != nil && j.kafkaSource.CaughtUp() }

// Close stops the HTTP servers, disconnects MCP servers and stops the
// embedded broker, the closers in the reverse order of their opening. It
// returns the errors of all of them, joined (errors.Join): one that fails
// does not keep the others open. Call it after the running job's Wait has
// returned; a second call returns the first one's result.
func (j *Job) Close() error {
	j.closeOnce.Do(func() {
		var errs []error
		if j.srv != nil {
			errs = append(errs, j.srv.Close())
		}
		if j.healthSrv != nil {
			errs = append(errs, j.healthSrv.Close())
		}
		if j.approvals != nil {
			j.approvals.close()
		}
		for i := len(j.closers) - 1; i >= 0; i-- {
			errs = append(errs, j.closers[i]())
		}
		j.closeErr = errors.Join(errs...)
	})
	return j.closeErr
}
