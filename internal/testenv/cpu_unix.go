//go:build unix

package testenv

import (
	"syscall"
	"time"
)

// CPUTime is the user and system CPU time the process has used: on a
// loaded machine it shows what an operation costs better than the wall
// clock. It is 0 where getrusage fails or does not exist.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
