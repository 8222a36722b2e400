package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// signalContext is the command's context (context.Background when it has
// none) ended by the first SIGINT or SIGTERM: what the commands that run
// until they are interrupted (an experiment, a broker, an agent log
// follower) run under. Call stop when the command ends; a second signal
// after the first then kills the process as usual. `weir run` and `weir
// demo` stop with a savepoint instead (internal/shutdown).
func signalContext(cmd *cobra.Command) (ctx context.Context, stop context.CancelFunc) {
	ctx = cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
}
