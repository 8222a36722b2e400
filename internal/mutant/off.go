//go:build !weir_mutants

package mutant

import "fmt"

// Enabled reports whether this build can plant bugs (the tag weir_mutants).
const Enabled = false

// On reports whether the planted bug name is active: never, in a build
// without the tag weir_mutants (M1). It is inlined to false, and the
// branch it guards is removed.
func On(Name) bool { return false }

// Set activates the planted bug name ("" for none). Without the tag
// weir_mutants it refuses every name but "" (M1).
func Set(name Name) error {
	if name != "" {
		return fmt.Errorf("mutant: %q: this build has no planted bugs (build with -tags weir_mutants)", name)
	}
	return nil
}
