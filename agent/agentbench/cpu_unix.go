//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package agentbench

import "syscall"

const cpuSupported = true

// cpuTime returns the process's user + system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
