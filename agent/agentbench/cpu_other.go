//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package agentbench

const cpuSupported = false

func cpuTime() int64 { return 0 }
