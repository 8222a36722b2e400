//go:build !unix

package cputime

import "time"

// Supported reports whether Process reads the CPU time on this platform.
const Supported = false

// Process is 0 where the process's CPU time cannot be read.
func Process() time.Duration { return 0 }
