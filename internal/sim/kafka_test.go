package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaFixedSeeds bounds the seeds whose Kafka form every `go test` runs
// (about a third of them have one; some 0.2 CPU-seconds each).
const kafkaFixedSeeds = 24

// TestKafkaFormKeepsTheInvariants runs the Kafka form (S13-S15) of the seeds
// 1..kafkaFixedSeeds that have one; TestFixedSeedsKeepTheInvariants runs
// their scripted jobs.
func TestKafkaFormKeepsTheInvariants(t *testing.T) {
	var kseeds, struck, restores int
	kinds := map[FaultKind]int{}
	_, err := RunSeeds(context.Background(), 1, kafkaFixedSeeds, 2, Options{onlyKafka: true}, func(res *Result) {
		spec := Generate(res.Seed)
		if spec.Kafka == nil {
			return
		}
		kseeds++
		restores += res.Restores
		if f := res.Failure; f != nil {
			t.Errorf("seed %d (%s; faults %s): %v %q\nreplay: %s", res.Seed, res.Shape, FaultSchedule(res.Faults), f, f.Records, res.Replay)
		}
		for _, f := range res.Faults[len(spec.Faults):] {
			if f.Struck {
				struck++
				kinds[f.Kind]++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The seeds must exercise recovery and the broker's faults, or passing
	// proves little.
	if kseeds < kafkaFixedSeeds/5 || struck < kseeds/2 || restores == 0 {
		t.Fatalf("%d Kafka seeds: only %d faults struck, %d restores from a checkpoint", kseeds, struck, restores)
	}
	for _, k := range []FaultKind{FaultBrokerFatal, FaultBrokerRetriable, FaultLatency} {
		if kinds[k] == 0 {
			t.Errorf("no %s fault struck in %d Kafka seeds", k, kseeds)
		}
	}
	t.Logf("%d Kafka seeds: %d faults struck %v, %d restores from a checkpoint", kseeds, struck, kinds, restores)
}

// TestKafkaReferenceByHand checks the Kafka form's oracle on records worked
// out by hand: windows of 10ms.
func TestKafkaReferenceByHand(t *testing.T) {
	k := &KafkaSpec{Records: []KafkaRecord{
		{Partition: 0, Offset: 0, Key: "a", TS: 1, ID: 1},
		{Partition: 1, Offset: 0, Key: "a", TS: 12, ID: 2},
		{Partition: 0, Offset: 1, Key: "a", TS: 3, ID: 3},
		{Partition: 1, Offset: 1, Key: "b", TS: 9, ID: 4},
	}}
	want := []string{
		recordLine(0, 0, "a", 1, 1), recordLine(1, 0, "a", 12, 2), recordLine(0, 1, "a", 3, 3), recordLine(1, 1, "b", 9, 4),
		windowLine("a", 0, 10, 2, 4), windowLine("a", 10, 20, 1, 2), windowLine("b", 0, 10, 1, 4),
	}
	slices.Sort(want)
	if got := KafkaReference(k, 10); !slices.Equal(got, want) {
		t.Fatalf("reference:\n%q\nwant\n%q", got, want)
	}
}

// TestKafkaSeedsAreDrawn: about a third of the seeds have a Kafka form,
// its records are the workload's, and no record is late within its
// partition beyond the bound (the oracle assumes so).
func TestKafkaSeedsAreDrawn(t *testing.T) {
	n := 0
	for seed := uint64(1); seed <= 90; seed++ {
		s := Generate(seed)
		if s.Kafka == nil {
			continue
		}
		n++
		if len(s.Kafka.Records) != s.Records {
			t.Fatalf("seed %d: %d Kafka records, %d in the workload", seed, len(s.Kafka.Records), s.Records)
		}
		maxTS := map[int32]int64{}
		for _, r := range s.Kafka.Records {
			if m, ok := maxTS[r.Partition]; ok && m-r.TS > s.Kafka.BoundMS {
				t.Fatalf("seed %d: record %d is %dms behind its partition, beyond the bound %dms", seed, r.ID, m-r.TS, s.Kafka.BoundMS)
			}
			maxTS[r.Partition] = max(maxTS[r.Partition], r.TS)
		}
	}
	if n < 90/5 || n > 90/2 {
		t.Fatalf("%d of 90 seeds have a Kafka form", n)
	}
	t.Logf("%d of 90 seeds have a Kafka form", n)
}

// TestKafkaSessionReferenceByHand checks the Kafka form's session oracle
// on records worked out by hand: gap 5ms; records 5ms apart touch and
// merge, 6ms apart do not; the partitions' order does not matter.
func TestKafkaSessionReferenceByHand(t *testing.T) {
	k := &KafkaSpec{Session: &SessionSpec{GapMS: 5}, Records: []KafkaRecord{
		{Partition: 0, Offset: 0, Key: "a", TS: 10, ID: 1},
		{Partition: 1, Offset: 0, Key: "a", TS: 20, ID: 2},
		{Partition: 0, Offset: 1, Key: "a", TS: 15, ID: 3},
		{Partition: 1, Offset: 1, Key: "a", TS: 26, ID: 4},
		{Partition: 0, Offset: 2, Key: "b", TS: 12, ID: 5},
	}}
	want := []string{
		sessionLine("a", 10, 25, 3, 6), sessionLine("a", 26, 31, 1, 4), sessionLine("b", 12, 17, 1, 5),
	}
	got := kafkaSessionReference(k)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("reference:\n%q\nwant\n%q", got, want)
	}
	if all := KafkaReference(k, 1000); len(all) != len(k.Records)+2+len(want) {
		t.Fatalf("KafkaReference has %d lines, want %d record lines, 2 window lines and %d session lines: %q", len(all), len(k.Records), len(want), all)
	}
}

// TestKafkaSessionsAreDrawn: about half the Kafka seeds have sessions, and
// the draw changes nothing else of the seed (a stream of its own).
func TestKafkaSessionsAreDrawn(t *testing.T) {
	n, with := 0, 0
	for seed := uint64(1); seed <= 120; seed++ {
		s := Generate(seed)
		if s.Kafka == nil {
			continue
		}
		n++
		if s.Kafka.Session == nil {
			if s.Kafka.WindowLatenessMS != 0 || s.Kafka.wmBound() != s.Kafka.BoundMS {
				t.Fatalf("seed %d: no sessions, but window lateness %d and bound %d (%d)", seed, s.Kafka.WindowLatenessMS, s.Kafka.wmBound(), s.Kafka.BoundMS)
			}
			continue
		}
		with++
		if g := s.Kafka.Session; g.GapMS < 1 || g.GapMS > 25 || g.LatenessMS < 0 || g.LatenessMS > 35 || s.Kafka.wmBound() != s.Kafka.BoundMS+1 {
			t.Fatalf("seed %d: sessions %+v, bound %d (%d)", seed, g, s.Kafka.wmBound(), s.Kafka.BoundMS)
		}
		k := *s.Kafka
		k.Session, k.WindowLatenessMS = nil, 0
		generateKafkaSession(s, &k)
		if k.Session == nil || *k.Session != *s.Kafka.Session || k.WindowLatenessMS != s.Kafka.WindowLatenessMS {
			t.Fatalf("seed %d: the session draw is not the seed's own", seed)
		}
	}
	if with < n/4 || with > 3*n/4 {
		t.Fatalf("%d of %d Kafka seeds have sessions", with, n)
	}
	t.Logf("%d of %d Kafka seeds have sessions", with, n)
}

// zombieFenced recognises a producer fenced by the failed attempt
// before, as the error reaches the harness (wrapped by the sink and the
// runtime) and as kerr's own error.
func TestZombieFencedRecognisesAFencedProducer(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New(`operator "sink" (subtask 2 of 3): weir: pre-commit of checkpoint 1 failed, the open transaction is unusable: kafka: produce to out[1] in transaction sim-3-2-pool-0: INVALID_PRODUCER_EPOCH: Producer attempted an operation with an old epoch.`), true},
		{fmt.Errorf("pre-commit: %w", kerr.ProducerFenced), true},
		{fmt.Errorf("pre-commit: %w", kerr.InvalidProducerEpoch), true},
		{fmt.Errorf("open: %w", kerr.TransactionalIDAuthorizationFailed), false},
		{errors.New("sim: injected failure: write 95 of sink subtask 0"), false},
	} {
		if got := zombieFenced(c.err); got != c.want {
			t.Errorf("zombieFenced(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
