//go:build !unix

package agentbench

const cpuSupported = false

func cpuTime() int64 { return 0 }
