package runtime

// The choice of keyed-state backend for a job's keyed operators.
//
// Invariant: every keyed operator subtask of a job gets the same backend
// kind, and a Pebble backend gets a working directory of its own,
// Dir/<uid>-<subtask>, which its Close removes (the working database is not
// a source of truth: restarts restore from checkpoints).

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/weirproject/weir/state"
)

// StateBackendConfig selects the keyed-state backend of a job's keyed
// operators (Process on a keyed stream, KeyedCoProcess, windows, agents).
type StateBackendConfig struct {
	// Kind is state.BackendMemory ("memory", the default when empty) or
	// state.BackendPebble ("pebble").
	Kind string
	// Dir is the parent of the Pebble working directories, one per keyed
	// operator subtask (Dir/<uid>-<subtask>). Two running jobs must not
	// share it. Empty means a new directory under os.TempDir per subtask.
	Dir string
	// CacheBytes bounds each Pebble backend's write-back cache (see
	// state.Options.CacheBytes): 0 is the default, 4 MiB; state.NoCache
	// (-1) turns it off.
	CacheBytes int64
}

// The configuration is checked once, by Config.validate at Start (Kind,
// CacheBytes, a writable Dir); state.Open checks Kind again for its other
// callers.

// StateOptions returns the options with which a keyed operator subtask opens
// its state backend: state.Open[K](ctx.StateOptions(), ctx.KeyGroups).
func (c *Context) StateOptions() state.Options {
	o := state.Options{Kind: c.stateBackend.Kind, CacheBytes: c.stateBackend.CacheBytes}
	if o.Kind == state.BackendPebble && c.stateBackend.Dir != "" {
		o.Dir = filepath.Join(c.stateBackend.Dir, fmt.Sprintf("%s-%d", safeName(c.UID), c.Subtask))
	}
	return o
}

// safeName maps a uid to a file name: characters other than letters,
// digits, '.', '-' and '_' become '_'.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
