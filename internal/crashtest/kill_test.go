package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary run the job as a child process that the
// kill -9 test kills.
func TestMain(m *testing.M) {
	if spec := os.Getenv("WEIR_CRASH_CHILD"); spec != "" {
		var o Options
		if err := json.Unmarshal([]byte(spec), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := Run(context.Background(), o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKill9 runs the job in a child process, kills it with SIGKILL at a
// random moment, restarts it from its latest checkpoint, and so on until a
// child completes; the exactly-once sink's output must equal that of a
// failure-free run.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := Options{Records: 6000, Keys: 11, Parallelism: 2, Interval: 10 * time.Millisecond, Throttle: 30}
	ref := base
	ref.Out, ref.Checkpoints = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "chk")
	if err := Run(ctx, ref); err != nil {
		t.Fatal(err)
	}
	want := sortedLines(committed(t, ref.Out))
	totalKills := 0
	for trial := range trials(3) {
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		o := base
		o.Out, o.Checkpoints = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "chk")
		spec, _ := json.Marshal(o)
		kills := 0
		for attempt := 0; ; attempt++ {
			if attempt > 20 {
				t.Fatalf("trial %d: no child completed in 20 attempts", trial)
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "WEIR_CRASH_CHILD="+string(spec))
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			if kills < 3 {
				select {
				case err = <-done:
				case <-time.After(time.Duration(10+rng.IntN(100)) * time.Millisecond):
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
					kills++
					continue
				}
			} else {
				err = <-done
			}
			if err != nil {
				t.Fatalf("trial %d: child failed: %v", trial, err)
			}
			break
		}
		if err := exactlyOnce(sortedLines(committed(t, o.Out)), want); err != nil {
			t.Fatalf("trial %d after %d kills: %v", trial, kills, err)
		}
		totalKills += kills
	}
	if totalKills == 0 {
		t.Fatal("no child was killed: the test did not exercise recovery")
	}
	t.Logf("%d kills across the trials", totalKills)
}
