package sim

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRegressionSeeds replays every seed of testdata/regressions.txt:
// seeds that once broke an invariant must keep them.
func TestRegressionSeeds(t *testing.T) {
	f, err := os.Open("testdata/regressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		field, reason, _ := strings.Cut(text, " ")
		seed, err := strconv.ParseUint(field, 10, 64)
		if err != nil || reason == "" {
			t.Fatalf("testdata/regressions.txt:%d: want a seed and its reason, got %q", line, text)
		}
		n++
		// Each seed with every form it has (the Kafka form of seeds
		// kept for the scripted job runs too: more coverage).
		res, err := Run(context.Background(), seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Failure; f != nil {
			t.Errorf("seed %d (%s; faults %s), once: %s\nnow: %v %q\nreplay: %s", seed, res.Shape, res.Schedule(), reason, f, f.Records, res.Replay)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("testdata/regressions.txt lists no seed")
	}
}
