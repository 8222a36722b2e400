//go:build weir_mutants

package mutant

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Enabled reports whether this build can plant bugs (the tag weir_mutants).
const Enabled = true

// Env names the planted bug active from the start of the process.
const Env = "WEIR_MUTANT"

var active atomic.Pointer[Name]

func init() {
	if v := os.Getenv(Env); v != "" {
		if err := Set(Name(v)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// On reports whether name is the active planted bug (M2).
func On(name Name) bool {
	p := active.Load()
	return p != nil && *p == name
}

// Set activates the planted bug name, or none with "" (M2).
func Set(name Name) error {
	if name == "" {
		active.Store(nil)
		return nil
	}
	for _, m := range All {
		if m.Name == name {
			active.Store(&name)
			return nil
		}
	}
	return fmt.Errorf("mutant: %s=%q: no such planted bug (internal/mutant.All lists them)", Env, name)
}
