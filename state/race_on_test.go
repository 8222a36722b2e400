//go:build race

package state_test

// raceEnabled reports whether the tests run under the race detector, which
// changes what is allocated on the Go heap (Pebble's manually managed
// memory among it), so heap comparisons do not hold there.
const raceEnabled = true
