package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
)

func committed(t *testing.T, dir string) map[int][]byte {
	t.Helper()
	out, err := file.Committed(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedLines(m map[int][]byte) []string {
	var lines []string
	for _, b := range m {
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	slices.Sort(lines)
	return lines
}

// trials is how many randomized crash trials each configuration runs;
// WEIR_CRASH_TRIALS raises it for soak runs.
func trials(def int) int {
	if s := os.Getenv("WEIR_CRASH_TRIALS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return def
}

func TestCrashRecoveryExactlyOnce(t *testing.T) {
	crashRecoveryExactlyOnce(t, state.BackendMemory, 25, 100)
}

// TestCrashRecoveryExactlyOncePebble is TestCrashRecoveryExactlyOnce with
// the Pebble backend: restarts restore from its latest incremental (native)
// checkpoint.
func TestCrashRecoveryExactlyOncePebble(t *testing.T) {
	// A native checkpoint syncs files (tens of milliseconds): the job is
	// throttled more so that checkpoints complete before the failures.
	crashRecoveryExactlyOnce(t, state.BackendPebble, 4, 20)
}

func crashRecoveryExactlyOnce(t *testing.T, backend string, defTrials int, throttle int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, par := range []int{1, 2} {
		base := Options{Records: 4000, Keys: 17, Parallelism: par, Interval: 5 * time.Millisecond, Throttle: throttle, StateBackend: backend}
		ref := base
		ref.Out, ref.Checkpoints = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "chk")
		if err := Run(ctx, ref); err != nil {
			t.Fatal(err)
		}
		want := committed(t, ref.Out)
		wantLines := sortedLines(want)
		if len(wantLines) != int(base.Records) {
			t.Fatalf("reference run wrote %d lines, want %d", len(wantLines), base.Records)
		}
		restores := Restores.Load()
		n := trials(defTrials)
		for trial := range n {
			seed := uint64(trial*1000 + par)
			rng := rand.New(rand.NewPCG(seed, 7))
			o := base
			o.Out, o.Checkpoints = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "chk")
			attempts, err := RunWithFailures(ctx, o, 1+rng.IntN(3), rng)
			if err != nil {
				t.Fatalf("parallelism %d seed %d: %v", par, seed, err)
			}
			got := committed(t, o.Out)
			if par == 1 {
				if !bytes.Equal(got[0], want[0]) {
					t.Fatalf("parallelism 1 seed %d (%d attempts): output differs from the failure-free run (%d vs %d bytes); first difference %s", seed, attempts, len(got[0]), len(want[0]),
						firstDiff(strings.Split(string(got[0]), "\n"), strings.Split(string(want[0]), "\n")))
				}
				continue
			}
			// Across subtasks the interleaving of one key's records is not
			// deterministic, so compare what exactly-once fixes: every input
			// record counted once, and each key's counts exactly 1..n.
			if err := exactlyOnce(sortedLines(got), wantLines); err != nil {
				t.Fatalf("parallelism %d seed %d (%d attempts): %v", par, seed, attempts, err)
			}
		}
		if r := Restores.Load() - restores; r < int64(n)/2 {
			t.Fatalf("parallelism %d: only %d of %d trials restored from a checkpoint; the test does not exercise recovery", par, r, n)
		}
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q vs %q", a[i], b[i])
		}
	}
	return "length"
}

func TestAtLeastOnceNeverLoses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for trial := range trials(10) {
		rng := rand.New(rand.NewPCG(uint64(trial), 9))
		o := Options{Records: 3000, Keys: 7, Parallelism: 2, Interval: 5 * time.Millisecond, Throttle: 100, Mode: runtime.AtLeastOnce}
		o.Out, o.Checkpoints = filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "chk")
		if _, err := RunWithFailures(ctx, o, 2, rng); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, l := range sortedLines(committed(t, o.Out)) {
			f := strings.Fields(l)
			seen[f[2]] = true // the input sequence number
		}
		for i := range o.Records {
			if !seen[strconv.FormatInt(i, 10)] {
				t.Fatalf("trial %d: record %d lost", trial, i)
			}
		}
	}
}

// exactlyOnce checks lines "key count seq" against a reference run.
func exactlyOnce(got, want []string) error {
	summarize := func(lines []string) (map[string]int, map[string][]int, error) {
		seqs := map[string]int{}
		counts := map[string][]int{}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 {
				return nil, nil, fmt.Errorf("bad line %q", l)
			}
			seqs[f[2]]++
			n, _ := strconv.Atoi(f[1])
			counts[f[0]] = append(counts[f[0]], n)
		}
		return seqs, counts, nil
	}
	gs, gc, err := summarize(got)
	if err != nil {
		return err
	}
	ws, wc, _ := summarize(want)
	for seq := range ws {
		if gs[seq] != 1 {
			return fmt.Errorf("input record %s appears %d times", seq, gs[seq])
		}
	}
	if len(gs) != len(ws) {
		return fmt.Errorf("%d distinct records, want %d", len(gs), len(ws))
	}
	for k, w := range wc {
		g := gc[k]
		slices.Sort(g)
		if len(g) != len(w) {
			return fmt.Errorf("key %s counted %d times, want %d", k, len(g), len(w))
		}
		for i, n := range g {
			if n != i+1 {
				return fmt.Errorf("key %s: counts %v are not 1..%d", k, g, len(w))
			}
		}
	}
	return nil
}
