//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Supported reports whether Process reads the CPU time on this platform.
const Supported = true

// Process is the user and system CPU time the process has used so far; 0
// where getrusage fails.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
