package sinkconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/childproc"
)

// childEnv carries a childSpec (JSON) to a child process of the kill9
// mode; MaybeChild runs the job it describes.
const childEnv = "WEIR_SINKCONFORMANCE_CHILD"

// The lines a child prints on its standard output, for the test.
const (
	lineKillPoint = "sinkconformance: kill point"
	lineDone      = "sinkconformance: done"
)

// childSpec is the job one child process runs.
type childSpec struct {
	Sink        string
	Dest        string
	Checkpoints string
	Options     Options // with defaults applied
	// KillAt is the count of passed records at which the child prints
	// lineKillPoint (0: never).
	KillAt int64
}

// MaybeChild runs the job of the kill9 mode and exits when the process is
// one of its children (the environment says so); otherwise it returns at
// once. Call it first in TestMain with every Sink the package's tests
// give Run:
//
//	func TestMain(m *testing.M) {
//		sinkconformance.MaybeChild(mySink)
//		os.Exit(m.Run())
//	}
func MaybeChild(sinks ...Sink) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	os.Exit(runChildJob(spec, sinks))
}

// runChildJob is the child's side: restore from the latest checkpoint,
// run the job to its end, say where the kill point passes and when done.
// The exit status: 0 done, 1 the job failed, 2 a bad spec.
func runChildJob(spec string, sinks []Sink) int {
	var c childSpec
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintf(os.Stderr, "sinkconformance: child spec: %v\n", err)
		return 2
	}
	i := slices.IndexFunc(sinks, func(s Sink) bool { return s.Name == c.Sink })
	if i < 0 {
		fmt.Fprintf(os.Stderr, "sinkconformance: no sink %q among those given to MaybeChild\n", c.Sink)
		return 2
	}
	at := func(n int64) error {
		if n == c.KillAt {
			fmt.Fprintln(os.Stdout, lineKillPoint)
		}
		return nil
	}
	if err := runJob(context.Background(), sinks[i], c.Options, c.Dest, c.Checkpoints, at); err != nil {
		fmt.Fprintf(os.Stderr, "sinkconformance: child job: %v\n", err)
		return 1
	}
	fmt.Fprintln(os.Stdout, lineDone)
	return 0
}

// runKill is the kill9 mode (S3): per trial, children run the job on one
// destination and checkpoint directory; each of the first Kills children
// is killed with SIGKILL a random delay after a random count of records
// has passed (unless it completes first), and the next restores from the
// latest completed checkpoint, until one child completes.
func runKill(ctx context.Context, t testing.TB, s Sink, o Options, want []string) {
	kills := 0
	for trial := range o.KillTrials {
		seed := o.Seed + uint64(trial)
		rng := rand.New(rand.NewPCG(seed, 9))
		dest, chk := s.NewDest(t), filepath.Join(t.TempDir(), "chk")
		trialKills, starts := 0, 0
		for {
			starts++
			if starts > o.Kills+10 {
				t.Fatalf("S3: %s: no child completed in %d starts", replay(seed), starts-1)
			}
			c := childSpec{Sink: s.Name, Dest: dest, Checkpoints: chk, Options: o}
			var delay time.Duration
			if trialKills < o.Kills {
				// Within the first half of the records: a restored child
				// has fewer left, and one that completes first is not
				// killed.
				c.KillAt = 1 + rng.Int64N(max(o.total()/2, 1))
				delay = time.Duration(rng.IntN(20_000)) * time.Microsecond
			}
			killed, err := startChild(ctx, c, delay)
			if err != nil {
				t.Fatalf("S3: %s: child %d (after %d kills): %v", replay(seed), starts, trialKills, err)
			}
			if !killed {
				break
			}
			trialKills++
		}
		got := s.Committed(t, dest)
		slices.Sort(got)
		if err := sameRecords(got, want); err != nil {
			t.Fatalf("S3: %s, %d kills: the committed output differs from the failure-free run's: %v", replay(seed), trialKills, err)
		}
		kills += trialKills
	}
	if kills == 0 {
		t.Fatalf("no child was killed in %d trials: the suite tested nothing (raise Records)", o.KillTrials)
	}
	t.Logf("%d trials, %d children killed with SIGKILL", o.KillTrials, kills)
}

// startChild runs the test binary as a child process running c, kills it
// with SIGKILL delay after it passes its kill point, and waits for it to
// end. It reports whether the child was killed; an error is a child that
// failed, or exited without running the job.
func startChild(ctx context.Context, c childSpec, delay time.Duration) (killed bool, err error) {
	spec, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	killPoint := make(chan struct{})
	var once sync.Once
	done := false // written by the line reader, read after Wait
	p, err := childproc.Start(ctx, childEnv, string(spec), func(line string) {
		switch line {
		case lineKillPoint:
			once.Do(func() { close(killPoint) })
		case lineDone:
			done = true
		}
	})
	if err != nil {
		return false, err
	}
	select {
	case <-killPoint:
		// A random moment after the kill point, not a synchronisation:
		// the child runs on meanwhile (or ends, and is not killed).
		select {
		case <-time.After(delay):
			p.Kill()
		case <-p.Exited():
		}
	case <-p.Exited():
	}
	if killed, err := p.Wait(); killed || err != nil {
		return killed, err
	}
	if !done {
		return false, fmt.Errorf("the child exited without running the job: does the package's TestMain call sinkconformance.MaybeChild with the sink %q?", c.Sink)
	}
	return false, nil
}
