// Command weir runs weir's demo, experiments and tools.
//
//	weir demo            run the embedded demo job
//	weir keys ...        show the key group and subtask of keys
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/durability"
)

func main() {
	// A child process of `weir experiment durability` runs its job and exits.
	durability.MaybeRunChild()
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir: event-time-correct, exactly-once stream processing in Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(keysCmd(), demoCmd(), benchCmd(), savepointCmd(), brokerCmd(), experimentCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}
