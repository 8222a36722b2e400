package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// usageError is a bad command line: main prints it as one line and exits
// with status 2, before the command does any work.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitStatusDropped is the exit status of a `weir run` that finished but
// lost records for want of a dead-letter output (docs/pipelines.md).
const exitStatusDropped = 3

// droppedError is a run that finished but dropped records: main prints it
// as one line and exits with status 3.
type droppedError struct{ msg string }

func (e *droppedError) Error() string { return e.msg }

// usagef returns a usageError prefixed with the command's path, such as
// "weir demo: --items -1: want an integer >= 1".
func usagef(c *cobra.Command, format string, args ...any) error {
	return &usageError{msg: c.CommandPath() + ": " + fmt.Sprintf(format, args...)}
}

// checks collects the flag checks of one command; the first failure is the
// command's usage error.
type checks struct {
	c   *cobra.Command
	err error
}

func (k *checks) fail(format string, args ...any) {
	if k.err == nil {
		k.err = usagef(k.c, format, args...)
	}
}

// intRange checks that flag holds lo <= v <= hi (hi < lo: no upper bound).
func (k *checks) intRange(flag string, v, lo, hi int64) {
	switch {
	case hi < lo && v < lo:
		k.fail("--%s %d: want an integer >= %d", flag, v, lo)
	case hi >= lo && (v < lo || v > hi):
		k.fail("--%s %d: want an integer from %d to %d", flag, v, lo, hi)
	}
}

// duration checks that flag holds a duration >= lo.
func (k *checks) duration(flag string, v, lo time.Duration) {
	if v < lo {
		if lo == 0 {
			k.fail("--%s %v: want a duration >= 0", flag, v)
		} else {
			k.fail("--%s %v: want a duration >= %v", flag, v, lo)
		}
	}
}

// fraction checks that flag holds a number from 0 to 1.
func (k *checks) fraction(flag string, v float64) {
	if !(v >= 0 && v <= 1) {
		k.fail("--%s %v: want a fraction from 0 to 1", flag, v)
	}
}

// oneOf checks that flag holds one of the accepted values.
func (k *checks) oneOf(flag, v string, accepted ...string) {
	if !slices.Contains(accepted, v) {
		k.fail("--%s %q: want one of %s", flag, v, strings.Join(accepted, ", "))
	}
}

// hostPort checks that flag holds host:port.
func (k *checks) hostPort(flag, v string) {
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		k.fail("--%s %q: want host:port, such as 127.0.0.1:9092", flag, v)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		k.fail("--%s %q: port %q: want a number from 0 to 65535", flag, v, port)
	}
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(c, "unexpected argument %q: this command takes flags only (see --help)", args[0])
	}
	return nil
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef(c, "got %d arguments: want %s", len(args), what)
		}
		return nil
	}
}

// newRoot builds the weir command.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir: event-time-correct, exactly-once stream processing in Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef(c, "%v", err)
	})
	root.AddCommand(keysCmd(), demoCmd(), benchCmd(), savepointCmd(), brokerCmd(), experimentCmd())
	root.AddCommand(runCmd(), validateCmd(), agentRootCmd(), versionCmd())
	root.AddCommand(simCmd())
	return root
}

// run runs weir with args, writing to stdout and stderr, and returns the
// exit status: 0, 1 for a failure of the command, 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, ue.Error())
		return 2
	}
	var de *droppedError
	if errors.As(err, &de) {
		fmt.Fprintln(stderr, de.Error())
		return exitStatusDropped
	}
	var ce *changedError
	if errors.As(err, &ce) {
		fmt.Fprintln(stderr, ce.Error())
		return exitStatusChanged
	}
	fmt.Fprintln(stderr, "weir:", err)
	return 1
}
