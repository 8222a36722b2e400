package cputime

import "testing"

// TestProcessGrows: busy work raises the process's CPU time, and it never
// goes back.
func TestProcessGrows(t *testing.T) {
	if !Supported {
		t.Skip("no getrusage on this platform")
	}
	before := Process()
	x := uint64(1)
	for Process() == before {
		for range 1_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if after := Process(); after < before {
		t.Fatalf("CPU time went back: %v, then %v (%d)", before, after, x)
	}
}
