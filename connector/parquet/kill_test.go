package parquet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// childJob is the job a child process runs (TestMain): orders into a
// Parquet sink, restored from the newest checkpoint when there is one.
type childJob struct {
	Records     int64
	Path        string
	Checkpoints string
}

// TestMain lets the test binary run childJob as a child process that
// TestKill9 kills.
func TestMain(m *testing.M) {
	if spec := os.Getenv("WEIR_PARQUET_CHILD"); spec != "" {
		var j childJob
		if err := json.Unmarshal([]byte(spec), &j); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := j.run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func (j childJob) run() error {
	cfg := weir.Config{Parallelism: 2, Checkpoint: runtime.CheckpointConfig{Interval: 10 * time.Millisecond, Dir: j.Checkpoints, Retain: 2}}
	if dir, _, err := checkpoint.Latest(j.Checkpoints); err == nil {
		cfg.Checkpoint.RestoreFrom = dir
	}
	env := weir.NewEnvironment(cfg)
	src := weir.Generate(env, "orders", j.Records, makeOrder, watermark.ForMonotonous[order]()).UID("orders")
	var n atomic.Int64
	slow := weir.Map(src, "throttle", func(o order) order {
		if n.Add(1)%20 == 0 {
			time.Sleep(time.Millisecond) // spread the run over many checkpoints
		}
		return o
	}).UID("throttle")
	parquet.Sink(slow, "sink", parquet.Options{Path: j.Path, RollSize: 4096}).UID("sink")
	return env.Execute(context.Background())
}

// TestKill9: the job runs in a child process killed with SIGKILL at
// random moments, each time started again from its newest checkpoint,
// until a child completes; the committed files then hold every order
// once, on a local directory and on s3:// (the S3 server lives in this
// process, so it outlives the children).
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, store := range []string{"dir", "s3"} {
		t.Run(store, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if *seedFlag != 0 {
				seed = *seedFlag
			}
			rng := rand.New(rand.NewPCG(seed, 9))
			j := childJob{Records: 3000, Path: filepath.Join(t.TempDir(), "out"), Checkpoints: filepath.Join(t.TempDir(), "chk")}
			if store == "s3" {
				j.Path = s3test.Start(t, "kill9/orders")
			}
			spec, _ := json.Marshal(j)
			kills := 0
			for attempt := 0; ; attempt++ {
				if attempt > 20 {
					t.Fatalf("seed %d: no child completed in 20 attempts", seed)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "WEIR_PARQUET_CHILD="+string(spec))
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				if kills < 3 {
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("seed %d: child failed: %v", seed, err)
						}
					case <-time.After(time.Duration(30+rng.IntN(150)) * time.Millisecond):
						cmd.Process.Signal(syscall.SIGKILL)
						<-done
						kills++
						continue
					}
				} else if err := <-done; err != nil {
					t.Fatalf("seed %d: child failed: %v", seed, err)
				}
				break
			}
			if kills == 0 {
				t.Fatalf("seed %d: the child completed before any kill: the test did not exercise recovery", seed)
			}
			checkOnce(t, committedOrders(t, j.Path, "dt=2006-01-02/hour=15"), j.Records, seed)
			t.Logf("seed %d: %d kills", seed, kills)
		})
	}
}
