// Package shutdown gives weir's commands Flink's "stop": the first SIGINT
// (Ctrl-C) or SIGTERM asks the command to stop its job with a savepoint, the
// second aborts the process at once.
//
// Guarantees:
//
//	S1. Between Notify and Handler.Close, SIGINT and SIGTERM never kill the
//	    process by their default action: the first one closes the channel
//	    of Handler.Requested (once), and the command decides what to do.
//	S2. A second signal (of either kind) after the first writes one line to
//	    Options.Log and calls Options.Exit(130) at once (130 = 128 + SIGINT,
//	    what a shell reports for a process stopped by Ctrl-C). Nothing else
//	    runs first: no savepoint, no deferred function.
//	S3. After Close, the signals have their default action again.
//
// StopWithSavepoint is the stop itself for a runtime.Job: a savepoint, then
// the job is cancelled and waited for. The command prints where the
// savepoint is and how to resume; ResumeLine formats that part.
package shutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/weirproject/weir/runtime"
)

// ExitAborted is the exit status after a second signal.
const ExitAborted = 130

// Options configure Notify. The zero value is what a command wants.
type Options struct {
	// Signals that ask for the stop; nil means SIGINT and SIGTERM.
	Signals []os.Signal
	// Exit ends the process after a second signal; nil means os.Exit.
	Exit func(code int)
	// Log receives the one line printed on each signal; nil means
	// os.Stderr.
	Log io.Writer
	// Stopping says, after the signal's name, what the first signal does;
	// "" means "stopping with a savepoint (send the signal again to abort
	// at once, without one)".
	Stopping string
}

// Handler watches for the stop signals. Its methods are safe for concurrent
// use.
type Handler struct {
	o         Options
	ch        chan os.Signal
	requested chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	mu        struct {
		sync.Mutex
		sig os.Signal // the first signal, nil before it
	}
}

// Notify starts watching for the stop signals (S1).
func Notify(o Options) *Handler {
	if o.Signals == nil {
		o.Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Stopping == "" {
		o.Stopping = "stopping with a savepoint (send the signal again to abort at once, without one)"
	}
	h := &Handler{o: o, ch: make(chan os.Signal, 2), requested: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(h.ch, o.Signals...)
	go h.loop()
	return h
}

func (h *Handler) loop() {
	for {
		select {
		case <-h.done:
			return
		case sig := <-h.ch:
			h.mu.Lock()
			first := h.mu.sig == nil
			if first {
				h.mu.sig = sig
			}
			h.mu.Unlock()
			if first {
				fmt.Fprintf(h.o.Log, "\n%s: %s\n", signalName(sig), h.o.Stopping)
				close(h.requested)
				continue
			}
			fmt.Fprintf(h.o.Log, "\n%s again: aborting without a savepoint\n", signalName(sig))
			h.o.Exit(ExitAborted)
			return
		}
	}
}

// Requested is closed by the first signal.
func (h *Handler) Requested() <-chan struct{} { return h.requested }

// Signal returns the first signal received, or nil.
func (h *Handler) Signal() os.Signal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.sig
}

// Close stops watching: the signals have their default action again (S3).
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		signal.Stop(h.ch)
		close(h.done)
	})
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "interrupt (SIGINT)"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// DefaultDir is where a stop's savepoint goes when the command was given no
// directory: base/savepoint-<UTC time>, such as
// /tmp/weir-savepoints/savepoint-20261201-174210. base "" means
// os.TempDir()/weir-savepoints.
func DefaultDir(base string, now time.Time) string {
	if base == "" {
		base = filepath.Join(os.TempDir(), "weir-savepoints")
	}
	return filepath.Join(base, "savepoint-"+now.UTC().Format("20060102-150405"))
}

// ErrFinished is returned by StopWithSavepoint when the job ended before
// the savepoint was taken: there is nothing to resume.
var ErrFinished = errors.New("shutdown: the job ended before the savepoint; nothing to resume")

// StopWithSavepoint takes a savepoint of job into dir (which must not hold
// one) as a stop (runtime.Job.StopWithSavepoint: nothing is read or emitted
// after its barrier, so at-least-once outputs hold what it covers and no
// more), then cancels the job and waits for it. It returns the savepoint's
// id. If the job ended first it returns ErrFinished; if the savepoint
// fails, the job is still cancelled and the error says why.
func StopWithSavepoint(ctx context.Context, job *runtime.Job, dir string) (int64, error) {
	id, err := job.StopWithSavepoint(ctx, dir)
	job.Cancel()
	job.Wait()
	switch {
	case errors.Is(err, runtime.ErrJobStopped):
		return 0, ErrFinished
	case err != nil:
		return 0, fmt.Errorf("shutdown: savepoint into %s: %w", dir, err)
	}
	return id, nil
}

// ResumeLine is the message a command prints after a stop: where the
// savepoint is and the exact command that resumes from it.
func ResumeLine(id int64, dir, command string) string {
	return fmt.Sprintf("stopped with savepoint %d in %s; resume with:\n  %s\n", id, dir, command)
}
