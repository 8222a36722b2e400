// Package childproc runs a test binary again as a child process, for tests
// that kill a job with SIGKILL (a crash the job cannot see) and restart
// it: the test binary's TestMain recognises the environment variable the
// parent sets and runs the job instead of the tests.
//
// Guarantees:
//
//	C1. The child is os.Args[0] with -test.run=^$ (no test runs if its
//	    TestMain does not take over) and the parent's environment plus
//	    NAME=SPEC.
//	C2. Every line the child writes to its standard output or standard
//	    error is passed, in order, to the OnLine function, from one
//	    goroutine, before Wait returns.
//	C3. Wait reports whether the child ended by the SIGKILL of Kill; any
//	    other unsuccessful end is an error holding the child's last lines
//	    of output.
package childproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
)

// tailLines is how many of the child's last lines an error holds.
const tailLines = 40

// Process is a running child.
type Process struct {
	cmd    *exec.Cmd
	eof    chan struct{}
	killed atomic.Bool // set by Kill before its signal is sent
	tail   []string    // written by the reader goroutine until eof is closed
}

// Start starts the child with NAME=SPEC in its environment (C1), calling
// onLine (if not nil) with each line of its output (C2). The child is
// killed when ctx ends.
func Start(ctx context.Context, name, spec string, onLine func(line string)) (*Process, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), name+"="+spec)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("childproc: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close() // the child holds its copy; EOF comes when it exits
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("childproc: start %s: %w", os.Args[0], err)
	}
	p := &Process{cmd: cmd, eof: make(chan struct{})}
	go func() {
		defer close(p.eof)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if len(p.tail) == tailLines {
				p.tail = p.tail[1:]
			}
			p.tail = append(p.tail, line)
			if onLine != nil {
				onLine(line)
			}
		}
	}()
	return p, nil
}

// Exited is closed once the child's output has ended (it has exited).
func (p *Process) Exited() <-chan struct{} { return p.eof }

// Kill sends SIGKILL to the child, unless it has been waited for already.
// It may be called from any goroutine.
func (p *Process) Kill() {
	// Before the signal: Wait may see the child's end before Signal
	// returns.
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
}

// Wait waits for the child to end and reports whether Kill ended it (C3).
func (p *Process) Wait() (killed bool, err error) {
	<-p.eof
	werr := p.cmd.Wait()
	if werr == nil {
		return false, nil
	}
	var exit *exec.ExitError
	if errors.As(werr, &exit) && p.killed.Load() {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, fmt.Errorf("childproc: %v; the child's output ends:\n%s", werr, strings.Join(p.tail, "\n"))
}
