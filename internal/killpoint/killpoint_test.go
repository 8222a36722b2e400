package killpoint

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestArmRejectsBadSpecs(t *testing.T) {
	for _, bad := range []string{"x", "@3", "x@0", "x@-1", "x@y"} {
		if err := Arm(bad); err == nil || !strings.Contains(err.Error(), "want name@n") {
			t.Errorf("Arm(%q) = %v, want an error saying what is accepted", bad, err)
		}
	}
	if err := Arm(""); err != nil {
		t.Fatal(err)
	}
	if _, ok := Armed(); ok {
		t.Fatal("an empty spec left the process armed")
	}
}

// TestHitKillsAtTheNthHit runs a child armed for p@3 that hits p five
// times, printing before each hit: it must die by SIGKILL after printing
// three times.
func TestHitKillsAtTheNthHit(t *testing.T) {
	if os.Getenv("KILLPOINT_CHILD") == "1" {
		for i := range 5 {
			os.Stdout.WriteString(string(rune('0' + i)))
			Hit("other")
			Hit("p")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsAtTheNthHit$")
	cmd.Env = append(os.Environ(), "KILLPOINT_CHILD=1", Env+"=p@3")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child ended with %v, output %q: want killed", err, out)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child status %v: want SIGKILL", ws)
	}
	if string(out) != "012" {
		t.Fatalf("child printed %q before dying: want 012 (killed at the third hit)", out)
	}
}
