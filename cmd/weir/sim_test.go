package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sim"
)

func TestSimReplaysOneSeed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(out.String(), "seed 3: ok") || !strings.Contains(out.String(), "sim: 1 seeds, 0 failures") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestSimJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--seeds", "3", "--seed", "10", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var sum struct {
		Seeds, Failures int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Seeds != 3 || sum.Failures != 0 {
		t.Fatalf("last line %q: %+v %v", lines[len(lines)-1], sum, err)
	}
}

// A time-boxed random batch prints its first seed and stops long before
// its million seeds.
func TestSimRandomTimeBoxed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--random", "--seeds", "1000000", "--duration", "500ms", "--workers", "1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	got := out.String()
	if !strings.HasPrefix(got, "sim: random first seed ") || !strings.Contains(got, "--seeds 1000000)") {
		t.Fatalf("output does not start with the random first seed:\n%s", got)
	}
	if strings.Contains(got, "sim: 1000000 seeds") || !strings.Contains(got, " failures, ") {
		t.Fatalf("the batch was not stopped by --duration:\n%s", got)
	}
}

// A batch stopped by SIGINT (Ctrl-C; also when started in the background,
// where a shell leaves SIGINT ignored) stops as --duration does: with its
// summary and status 0.
func TestSimStopsOnSignalWithItsSummary(t *testing.T) {
	cmd := weirCmd(t, "sim", "--seed", "1", "--seeds", "1000000", "--workers", "1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first seed's report is not printed (a batch prints failures
	// only): signal once the batch has run a while.
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case l, ok := <-lines:
		t.Fatalf("before the signal: %q (%v)", l, ok)
	case <-timer.C:
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, strings.Join(got, "\n"))
	}
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "sim: ") || !strings.Contains(got[len(got)-1], " failures, ") ||
		strings.Contains(got[len(got)-1], "sim: 1000000 seeds") {
		t.Fatalf("no summary of a stopped batch:\n%s", strings.Join(got, "\n"))
	}
}

// A failed seed's replays decide whether it counts: a time-out that no
// replay repeats does not (the seed passes when run again), any other
// failure does.
func TestSimReplaysFailedSeeds(t *testing.T) {
	o := sim.Options{SkipKafka: true}
	timedOut := &sim.Result{Seed: 3, Failure: &sim.Failure{Invariant: sim.InvCompletes, Detail: "attempt 1: did not finish within 1m0s", TimedOut: true}}
	broken := &sim.Result{Seed: 4, Failure: &sim.Failure{Invariant: sim.InvExactlyOnce, Detail: "1 line missing"}}
	for _, c := range []struct {
		failed  []*sim.Result
		replays int
		counted int
		says    string
	}{
		{[]*sim.Result{timedOut, broken}, 0, 2, ""},
		{[]*sim.Result{timedOut}, 2, 0, "seed 3 replayed 2 times alone: 0 failed; its time-out did not recur"},
		{[]*sim.Result{broken}, 1, 1, "seed 4 replayed 1 times alone: 0 failed; counted"},
	} {
		var out bytes.Buffer
		counted, err := replayFailed(context.Background(), &out, c.failed, c.replays, o, false)
		if err != nil || counted != c.counted || !strings.Contains(out.String(), c.says) {
			t.Errorf("%d replays of %d seeds: counted %d (want %d), %v, printed %q (want %q)", c.replays, len(c.failed), counted, c.counted, err, out.String(), c.says)
		}
	}
}
