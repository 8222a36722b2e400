// Command weir runs weir's demo, experiments and tools.
//
//	weir demo            run the embedded demo job
//	weir keys ...        show the key group and subtask of keys
//
// A bad flag value or argument is reported as one line naming the flag and
// what it accepts, with exit status 2, before the command does any work.
package main

import (
	"os"

	"github.com/weirproject/weir/internal/durability"
	"github.com/weirproject/weir/internal/scaleout"
)

func main() {
	// A child process of `weir experiment durability` runs its job and exits.
	durability.MaybeRunChild()
	// So does a worker of `weir experiment scaleout`.
	scaleout.MaybeRunWorker()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
