package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
)

// Source is a webhook source. Create it with New and add it to a job with
// weir.FromSource; it is a runtime.Source.
type Source[T any] struct {
	opts    Options[T]
	optsErr error

	mu struct {
		sync.Mutex
		addr string // "" while no reader listens
	}
}

// New returns a webhook source with opts (checked when the job starts).
func New[T any](opts Options[T]) *Source[T] {
	return &Source[T]{opts: opts.withDefaults(), optsErr: opts.Validate()}
}

// Validate implements runtime.Validator.
func (s *Source[T]) Validate() error { return s.optsErr }

// Addr returns the address the source listens on (host:port), or "" when
// no job runs it. After a restart it may change if Listen had port 0.
func (s *Source[T]) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.addr
}

// URL returns the URL requests go to, or "" when no job runs the source.
func (s *Source[T]) URL() string {
	a := s.Addr()
	if a == "" {
		return ""
	}
	return "http://" + a + s.opts.Path
}

// CreateReader implements runtime.Source. Subtask 0 listens; the others
// have nothing to read and stay idle (W1).
func (s *Source[T]) CreateReader(ctx runtime.SourceContext) (runtime.Reader[T], error) {
	if s.optsErr != nil {
		return nil, s.optsErr
	}
	if ctx.Subtask > 0 {
		return idleReader[T]{}, nil
	}
	clk := ctx.Clock
	if clk == nil {
		clk = clock.Real
	}
	r := &reader[T]{src: s, opts: s.opts, clk: clk, ready: make(chan struct{}, 1)}
	if ctx.Counter != nil {
		r.requests, r.refused, r.acked = ctx.Counter("requests"), ctx.Counter("requestsRefused"), ctx.Counter("requestsAcknowledged")
	} else {
		r.requests, r.refused, r.acked = new(runtime.Counter), new(runtime.Counter), new(runtime.Counter)
	}
	r.tokenHash = sha256.Sum256([]byte(s.opts.Token))
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("webhook: listening on %s: %w", s.opts.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(s.opts.Path, r)
	// Reading a request is bounded; waiting for its answer is not (the
	// client's time-out decides).
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	r.served = make(chan struct{})
	go func() {
		defer close(r.served)
		_ = r.srv.Serve(ln) // ends with ErrServerClosed at Close
	}()
	s.mu.Lock()
	s.mu.addr = ln.Addr().String()
	s.mu.Unlock()
	if ctx.Logger != nil {
		ctx.Logger.Info("webhook: listening", "url", "http://"+ln.Addr().String()+s.opts.Path, "auth", s.opts.Token != "")
	}
	return r, nil
}

// request is one accepted request: its records, and how to answer it.
type request[T any] struct {
	recs []rec[T] // dropped once emitted
	n    int      // number of records
	// answer gets the status (and reason) once; buffered, so the reader
	// never waits for the handler.
	answer chan answer
	// checkpoint is the id of the first checkpoint taken after all its
	// records were emitted (0: none yet).
	checkpoint int64
}

type rec[T any] struct {
	v  T
	ts int64
}

type answer struct {
	status int
	msg    string
}

// reader is subtask 0 of a webhook source: an HTTP server whose handlers
// queue requests, and the Poll that emits them.
//
//	handler: check method, token, size; decode every record (400 if one
//	    does not); reserve room (429 if the held records would pass Queue);
//	    queue the request, wake Poll; wait for its answer or the client
//	    going away.
//	Poll: emit whole queued requests (W4); with AckOnEmit answer them,
//	    else move them to emitted.
//	SnapshotSplits(n): every emitted request without a checkpoint gets n.
//	NotifyCheckpointComplete(n): answer 200 every emitted request with a
//	    checkpoint <= n (a later checkpoint covers an aborted one), free its
//	    room.
//	Close: answer 503 to everything held, stop the server.
type reader[T any] struct {
	src       *Source[T]
	opts      Options[T]
	clk       clock.Clock
	tokenHash [32]byte
	srv       *http.Server
	served    chan struct{}
	ready     chan struct{} // a token when the queue may have something

	mu struct {
		sync.Mutex
		queue  []*request[T]
		held   int // records queued or emitted and not answered
		closed bool
	}
	// emitted: requests whose records were all emitted, not yet answered
	// (subtask goroutine only).
	emitted []*request[T]

	requests, refused, acked *runtime.Counter
}

func (r *reader[T]) fail(w http.ResponseWriter, status int, format string, args ...any) {
	r.refused.Add(1)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((r.opts.RetryAfter+time.Second-1)/time.Second))))
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
	}
	http.Error(w, "webhook: "+fmt.Sprintf(format, args...), status)
}

// ServeHTTP handles one request (W2-W7).
func (r *reader[T]) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if req.URL.Path != r.opts.Path {
		r.fail(w, http.StatusNotFound, "no such path; records go to %s", r.opts.Path)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.fail(w, http.StatusMethodNotAllowed, "want POST")
		return
	}
	if r.opts.Token != "" {
		got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		h := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(h[:], r.tokenHash[:]) != 1 || !ok {
			r.fail(w, http.StatusUnauthorized, "want Authorization: Bearer and the source's token")
			return
		}
	}
	if req.ContentLength > r.opts.MaxBody {
		r.fail(w, http.StatusRequestEntityTooLarge, "body of %d bytes is larger than the maximum of %d", req.ContentLength, r.opts.MaxBody)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.opts.MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			r.fail(w, http.StatusRequestEntityTooLarge, "body larger than the maximum of %d bytes", r.opts.MaxBody)
			return
		}
		r.fail(w, http.StatusBadRequest, "reading the body: %v", err)
		return
	}
	arrival := clock.NowMillis(r.clk)
	recs, err := r.decode(body, arrival)
	if err != nil {
		r.fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if len(recs) > r.opts.Queue {
		r.fail(w, http.StatusRequestEntityTooLarge, "%d records is more than the queue of %d holds; send fewer per request", len(recs), r.opts.Queue)
		return
	}
	rq := &request[T]{recs: recs, n: len(recs), answer: make(chan answer, 1)}
	r.mu.Lock()
	switch {
	case r.mu.closed:
		r.mu.Unlock()
		r.fail(w, http.StatusServiceUnavailable, "the job is stopping; retry")
		return
	case r.mu.held+len(recs) > r.opts.Queue:
		held := r.mu.held
		r.mu.Unlock()
		r.fail(w, http.StatusTooManyRequests, "the job is behind (%d records held of %d); retry later", held, r.opts.Queue)
		return
	}
	r.mu.held += len(recs)
	r.mu.queue = append(r.mu.queue, rq)
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
	select {
	case a := <-rq.answer:
		if a.status == http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, "{\"records\":%d}\n", len(recs))
			return
		}
		r.fail(w, a.status, "%s", a.msg)
	case <-req.Context().Done():
		// The client went away: its records go on (W6).
	}
}

// decode reads a JSON object, a JSON array of values, or JSON lines.
func (r *reader[T]) decode(body []byte, arrival int64) ([]rec[T], error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("empty body; want a JSON object, a JSON array, or JSON lines")
	}
	var raws []json.RawMessage
	if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, fmt.Errorf("body is not a JSON array: %v", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for {
			var m json.RawMessage
			err := dec.Decode(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("value %d: %v", len(raws)+1, err)
			}
			raws = append(raws, m)
		}
	}
	if len(raws) == 0 {
		return nil, errors.New("no records in the body")
	}
	out := make([]rec[T], 0, len(raws))
	for i, m := range raws {
		var v T
		var err error
		if r.opts.Decode != nil {
			v, err = r.opts.Decode(m)
		} else {
			err = json.Unmarshal(m, &v)
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %v", i+1, err)
		}
		ts := arrival
		if r.opts.Timestamp != nil {
			t, ok := r.opts.Timestamp(v)
			if !ok {
				return nil, fmt.Errorf("record %d has no usable event time", i+1)
			}
			ts = t
		}
		out = append(out, rec[T]{v: v, ts: ts})
	}
	return out, nil
}

// maxPerPoll is how many records one Poll emits at least before it returns
// (whole requests are emitted, W4).
const maxPerPoll = 256

func (r *reader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	r.mu.Lock()
	var take []*request[T]
	n := 0
	for len(r.mu.queue) > 0 && n < maxPerPoll {
		rq := r.mu.queue[0]
		r.mu.queue[0] = nil
		r.mu.queue = r.mu.queue[1:]
		take = append(take, rq)
		n += len(rq.recs)
	}
	more := len(r.mu.queue) > 0
	r.mu.Unlock()
	// Held in emitted before their records go, so that Close answers them
	// if an operator downstream fails in the middle.
	r.emitted = append(r.emitted, take...)
	for _, rq := range take {
		for _, x := range rq.recs {
			out.Collect(0, x.v, x.ts)
		}
		rq.recs = nil
	}
	if r.opts.Ack == AckOnEmit {
		for _, rq := range r.emitted {
			r.answer(rq, answer{status: http.StatusOK})
		}
		clear(r.emitted)
		r.emitted = r.emitted[:0]
	}
	if r.opts.Timestamp == nil {
		// Arrival time: every request still to come arrives later (W5).
		out.EmitWatermark(0, clock.NowMillis(r.clk)-1)
	}
	if more {
		return runtime.More, nil
	}
	return runtime.Wait, nil
}

// answer answers rq and frees its room in the queue.
func (r *reader[T]) answer(rq *request[T], a answer) {
	rq.answer <- a
	r.mu.Lock()
	r.mu.held -= rq.n
	r.mu.Unlock()
	if a.status == http.StatusOK {
		r.acked.Add(1)
	}
}

func (r *reader[T]) Ready() <-chan struct{} { return r.ready }

// SnapshotSplits marks the emitted requests as covered by checkpoint id
// (W2). The source keeps no position: nothing is read again after a
// restore (W6).
func (r *reader[T]) SnapshotSplits(id int64) ([][]byte, error) {
	for _, rq := range r.emitted {
		if rq.checkpoint == 0 {
			rq.checkpoint = id
		}
	}
	return nil, nil
}

// NotifyCheckpointComplete answers the requests checkpoint id covers.
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	kept := r.emitted[:0]
	for _, rq := range r.emitted {
		if rq.checkpoint != 0 && rq.checkpoint <= id {
			r.answer(rq, answer{status: http.StatusOK})
		} else {
			kept = append(kept, rq)
		}
	}
	clear(r.emitted[len(kept):])
	r.emitted = kept
	return nil
}

// NotifyCheckpointAborted leaves the requests to the next checkpoint that
// completes (it covers them too).
func (r *reader[T]) NotifyCheckpointAborted(int64) {}

// Close answers 503 to every request not answered yet (W6) and stops the
// server.
func (r *reader[T]) Close() error {
	r.mu.Lock()
	r.mu.closed = true
	queued := r.mu.queue
	r.mu.queue = nil
	r.mu.Unlock()
	stopped := answer{status: http.StatusServiceUnavailable, msg: "the job stopped before the records were in a completed checkpoint; send them again"}
	for _, rq := range queued {
		r.answer(rq, stopped)
	}
	for _, rq := range r.emitted {
		r.answer(rq, stopped)
	}
	r.emitted = nil
	r.src.mu.Lock()
	r.src.mu.addr = ""
	r.src.mu.Unlock()
	// Let the handlers write their answers, then close what is left.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if err != nil {
		err = r.srv.Close()
	}
	<-r.served
	return err
}

// idleReader is a subtask other than 0: no splits, never ready.
type idleReader[T any] struct{}

func (idleReader[T]) Poll(runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	return runtime.Wait, nil
}
func (idleReader[T]) Ready() <-chan struct{} { return nil }
func (idleReader[T]) Close() error           { return nil }
