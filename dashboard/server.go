package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/internal/buildinfo"
	"github.com/weirproject/weir/runtime"
)

// Job is what the dashboard reads of a running job; *runtime.Job is one.
type Job interface {
	Metrics() *runtime.Metrics
	Topology() runtime.Topology
	Checkpoints() []runtime.CheckpointStats
	// Done is closed when the job has ended.
	Done() <-chan struct{}
}

var _ Job = (*runtime.Job)(nil)

// Source is what the dashboard reads: one job (Start adapts a Job), or
// several shown as one (StartSource), such as the tasks of a clustered
// job that one process runs, their operators named apart.
type Source interface {
	// Snapshot and Notes are the metrics and notes (runtime.Metrics).
	Snapshot() []runtime.Metric
	Notes() []runtime.Note
	Topology() runtime.Topology
	Checkpoints() []runtime.CheckpointStats
	// Done is closed when the jobs have ended (no more frames are taken).
	Done() <-chan struct{}
}

// jobSource is the Source of one Job.
type jobSource struct{ Job }

func (j jobSource) Snapshot() []runtime.Metric { return j.Metrics().Snapshot() }
func (j jobSource) Notes() []runtime.Note      { return j.Metrics().Notes() }

// Options tune a Server. The zero value is usable.
type Options struct {
	// Interval is how often the job is sampled into a frame; 0 means 1s.
	// At least 50ms.
	Interval time.Duration
	// History is how many frames are kept (for /api/frame?seq= and the
	// page's charts); 0 means 300.
	History int
	// AgentStatus reads the status of the agent operators named in ops
	// (the dashboard asks only when the job has agent operators); nil
	// means agent.Status, which each subtask answers between records,
	// waited for at most StatusTimeout.
	AgentStatus func(ctx context.Context, ops []string) []agent.SubtaskStatus
	// StatusTimeout bounds the wait for agent.Status; 0 means 250ms.
	StatusTimeout time.Duration
	// Group, if set, describes the clustered job this process is a
	// member of (weir run --group): GET /api/group serves it and the page
	// group.html shows it. nil: /api/group answers 404.
	Group func(ctx context.Context) (Group, error)
	// Now is the wall clock of frames (watermark lag, ages); nil means
	// time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.History == 0 {
		o.History = 300
	}
	if o.StatusTimeout == 0 {
		o.StatusTimeout = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AgentStatus == nil {
		o.AgentStatus = func(ctx context.Context, ops []string) []agent.SubtaskStatus {
			var out []agent.SubtaskStatus
			for _, op := range ops {
				out = append(out, agent.Status(ctx, op)...)
			}
			return out
		}
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Interval != 0 && o.Interval < 50*time.Millisecond:
		return fmt.Errorf("dashboard: Options.Interval %v: want 0 (1s) or at least 50ms", o.Interval)
	case o.History < 0:
		return fmt.Errorf("dashboard: Options.History %d: want 0 (300) or more", o.History)
	case o.StatusTimeout < 0:
		return fmt.Errorf("dashboard: Options.StatusTimeout %v: want 0 (250ms) or more", o.StatusTimeout)
	}
	return nil
}

// ParseAddr checks a listen address given as host:port and returns the
// address Start listens on: an empty host (":8081") becomes the loopback
// address 127.0.0.1 (D1). Port 0 picks a free port.
func ParseAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("dashboard: address %q: want host:port, such as 127.0.0.1:8081 (a host of 0.0.0.0 listens on every interface)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("dashboard: address %q: the port must be a number from 0 to 65535", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

//go:embed assets
var assets embed.FS

// Server serves the dashboard of one job (or Source).
type Server struct {
	job  Source
	opts Options
	ln   net.Listener
	http *http.Server
	stop chan struct{}
	wg   sync.WaitGroup
	// agentOps are the job's agent operators (from the first frame on).
	agentOps []string

	mu struct {
		sync.Mutex
		frames []*Frame // oldest first, at most opts.History
		seq    int64
	}
}

// Start samples job and serves its dashboard on addr (checked by
// ParseAddr) until Close. It returns once the address is listened on and
// the first frame is taken.
func Start(addr string, job Job, opts Options) (*Server, error) {
	return StartSource(addr, jobSource{job}, opts)
}

// StartSource is Start for a Source.
func StartSource(addr string, src Source, opts Options) (*Server, error) {
	job := src
	if err := opts.validate(); err != nil {
		return nil, err
	}
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := newServer(job, opts)
	s.ln = ln
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.sample()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.run()
	}()
	go func() {
		defer s.wg.Done()
		// Serve returns ErrServerClosed on Close; any other error means
		// the listener failed: the page is gone, and the job goes on.
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

func newServer(job Source, opts Options) *Server {
	return &Server{job: job, opts: opts.withDefaults(), stop: make(chan struct{})}
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the page's address.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Close stops sampling and serving and waits for both (D5).
func (s *Server) Close() error {
	close(s.stop)
	err := s.http.Close()
	s.wg.Wait()
	return err
}

// run samples every Interval until Close; after the job ends it takes one
// last frame and stops sampling (the page keeps showing it).
func (s *Server) run() {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.sample() {
				return
			}
		}
	}
}

// sample takes a frame; it reports whether the job had ended.
func (s *Server) sample() (done bool) {
	select {
	case <-s.job.Done():
		done = true
	default:
	}
	in := sampleInput{atMs: s.opts.Now().UnixMilli(), done: done, weir: buildinfo.Get()}
	in.metrics = s.job.Snapshot()
	in.notes = s.job.Notes()
	in.topology = s.job.Topology()
	in.checkpoints = s.job.Checkpoints()
	if s.agentOps == nil {
		s.agentOps = agentOperators(in.topology, in.metrics)
	}
	if len(s.agentOps) > 0 && !done {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.StatusTimeout)
		in.agents = s.opts.AgentStatus(ctx, s.agentOps)
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var prev *Frame
	if n := len(s.mu.frames); n > 0 {
		prev = s.mu.frames[n-1]
	}
	s.mu.seq++
	f := buildFrame(s.mu.seq, prev, in)
	if len(s.mu.frames) == s.opts.History {
		s.mu.frames = append(s.mu.frames[:0], s.mu.frames[1:]...)
	}
	s.mu.frames = append(s.mu.frames, f)
	return done
}

// agentOperators names the operators that keep the agent's counters.
func agentOperators(t runtime.Topology, ms []runtime.Metric) []string {
	seen := map[string]bool{}
	for _, m := range ms {
		if m.Name == mAgentActions {
			seen[m.Operator] = true
		}
	}
	ops := []string{}
	for _, op := range t.Operators {
		if seen[op.Name] {
			ops = append(ops, op.Name)
		}
	}
	return ops
}

// frame returns frame seq (the newest when seq is 0), nil when it is not
// kept.
func (s *Server) frame(seq int64) *Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.mu.frames)
	if n == 0 {
		return nil
	}
	if seq == 0 {
		return s.mu.frames[n-1]
	}
	first := s.mu.frames[0].Seq
	if seq < first || seq > s.mu.frames[n-1].Seq {
		return nil
	}
	return s.mu.frames[seq-first]
}

// Handler returns the dashboard's HTTP handler: the page at /, the API
// under /api/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/frame", s.serveFrame)
	mux.HandleFunc("GET /api/history", s.serveHistory)
	mux.HandleFunc("GET /api/topology", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.job.Topology())
	})
	mux.HandleFunc("GET /api/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		cps := s.job.Checkpoints()
		if cps == nil {
			cps = []runtime.CheckpointStats{}
		}
		writeJSON(w, cps)
	})
	mux.HandleFunc("GET /api/metrics", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.job.Snapshot())
	})
	mux.HandleFunc("GET /api/notes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.job.Notes())
	})
	mux.HandleFunc("GET /api/group", s.serveGroup)
	mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("dashboard: no API %s %s; the API is GET /api/frame[?seq=N], /api/history[?since=N], /api/topology, /api/checkpoints, /api/metrics, /api/notes, /api/group", r.Method, r.URL.Path), http.StatusNotFound)
	})
	return mux
}

func (s *Server) serveFrame(w http.ResponseWriter, r *http.Request) {
	var seq int64
	if v := r.URL.Query().Get("seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			http.Error(w, fmt.Sprintf("dashboard: seq %q: want a frame number from 1", v), http.StatusBadRequest)
			return
		}
		seq = n
	}
	f := s.frame(seq)
	if f == nil {
		http.Error(w, fmt.Sprintf("dashboard: frame %d is not kept (the server keeps the last %d)", seq, s.opts.History), http.StatusNotFound)
		return
	}
	writeJSON(w, f)
}

// Point is one frame in /api/history: the throughput of every operator.
type Point struct {
	Seq  int64 `json:"seq"`
	AtMs int64 `json:"atMs"`
	// In and Out are records per second by operator, in the order of
	// /api/topology.
	In  []float64 `json:"in"`
	Out []float64 `json:"out"`
	// BackPressure is each operator's back-pressure share.
	BackPressure []float64 `json:"backPressure"`
}

func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("dashboard: since %q: want a frame number (0: every frame kept)", v), http.StatusBadRequest)
			return
		}
		since = n
	}
	s.mu.Lock()
	var pts []Point
	for _, f := range s.mu.frames {
		if f.Seq <= since {
			continue
		}
		p := Point{Seq: f.Seq, AtMs: f.AtMs}
		for _, o := range f.Operators {
			p.In = append(p.In, o.InPerSec)
			p.Out = append(p.Out, o.OutPerSec)
			p.BackPressure = append(p.BackPressure, o.BackPressure)
		}
		pts = append(pts, p)
	}
	s.mu.Unlock()
	if pts == nil {
		pts = []Point{}
	}
	writeJSON(w, pts)
}

// Group is the membership of a clustered job, as /api/group serves it.
type Group struct {
	// Group is the job's group (weir run --group).
	Group string `json:"group"`
	// Self is the member whose dashboard answered.
	Self string `json:"self"`
	// Members are the processes of the job, by name.
	Members []GroupMember `json:"members"`
}

// GroupMember is one process of a clustered job.
type GroupMember struct {
	Member string `json:"member"`
	// Host is the address the brokers see the process connect from.
	Host string `json:"host"`
	// URL is the process's dashboard ("" if it serves none).
	URL string `json:"url"`
	// Tasks are the tasks the group assigned to the process.
	Tasks []string `json:"tasks"`
}

func (s *Server) serveGroup(w http.ResponseWriter, r *http.Request) {
	if s.opts.Group == nil {
		http.Error(w, "dashboard: this job is not a group member (/api/group is served by weir run --group with --ui-addr)", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	g, err := s.opts.Group(ctx)
	if err != nil {
		http.Error(w, "dashboard: describe the group: "+err.Error(), http.StatusBadGateway)
		return
	}
	if g.Members == nil {
		g.Members = []GroupMember{}
	}
	writeJSON(w, g)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "dashboard: "+err.Error(), http.StatusInternalServerError)
	}
}
