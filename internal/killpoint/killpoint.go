// Package killpoint kills the process at a named point of weir's code, for
// crash tests that must stop a process at an exact step (between a side
// effect and its record, in the middle of a checkpoint) rather than at a
// random moment.
//
// A process is armed by the environment variable WEIR_KILLPOINT=name@n:
// the n-th time Hit(name) runs (n >= 1), the process sends itself SIGKILL,
// exactly as `kill -9` from outside would stop it: no deferred function,
// no flush, no exit handler runs. With WEIR_KILLPOINT=name@n:stop the
// process stops itself with SIGSTOP instead, and goes on from that point
// when continued (SIGCONT): a pause at an exact step, for tests of what a
// process that lost its leases does when it wakes. An unarmed process pays
// one atomic load per Hit.
//
// Points used by weir (each at most a few per action or checkpoint, never
// per record on the hot path):
//
//	agent.before-call    a durable call is about to run its function
//	agent.after-call     the function returned; its result is not recorded
//	agent.after-record   the call's result is recorded; the action has not completed
//	sink.after-write     a record was written to the two-phase sink's open transaction
//	checkpoint.before-manifest  a checkpoint's files are written; its manifest is not
//	agent.rebuild        a restored action-state store is being rebuilt
package killpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms a process.
const Env = "WEIR_KILLPOINT"

type armedPoint struct {
	name string
	left atomic.Int64
	stop bool // SIGSTOP rather than SIGKILL
}

var armed atomic.Pointer[armedPoint]

func init() {
	if v := os.Getenv(Env); v != "" {
		if err := Arm(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// Arm arms the process with a spec of the form name@n or name@n:stop
// (n >= 1), as the environment variable does; an empty spec disarms it.
func Arm(spec string) error {
	if spec == "" {
		armed.Store(nil)
		return nil
	}
	name, count, ok := strings.Cut(spec, "@")
	count, stop := strings.CutSuffix(count, ":stop")
	n, err := strconv.ParseInt(count, 10, 64)
	if !ok || name == "" || err != nil || n < 1 {
		return fmt.Errorf("killpoint: %s=%q: want name@n or name@n:stop with n >= 1, such as agent.after-call@3", Env, spec)
	}
	p := &armedPoint{name: name, stop: stop}
	p.left.Store(n)
	armed.Store(p)
	return nil
}

// Hit marks that the process reached point name. If the process is armed
// for name and this is the n-th hit, the process kills itself with
// SIGKILL and Hit never returns (or, armed with :stop, stops itself with
// SIGSTOP and Hit returns once the process is continued).
func Hit(name string) {
	p := armed.Load()
	if p == nil || p.name != name {
		return
	}
	if p.left.Add(-1) == 0 {
		if p.stop {
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			return
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// Armed reports the point the process is armed for, if any.
func Armed() (name string, ok bool) {
	p := armed.Load()
	if p == nil {
		return "", false
	}
	return p.name, true
}
