package sim

import (
	"context"
	"sync"
	"testing"
	"time"
)

// clusterFixedSeeds is how many seeds with a clustered form every `go
// test` runs: the first ones from seed 1 (about one seed in clusterOneIn
// has one; about a second of real time each, little CPU).
const clusterFixedSeeds = 6

// TestClusterFormKeepsTheInvariants runs the clustered form (S16) of the
// first clusterFixedSeeds seeds that have one, two at a time.
func TestClusterFormKeepsTheInvariants(t *testing.T) {
	var seeds []uint64
	for seed := uint64(1); len(seeds) < clusterFixedSeeds; seed++ {
		if Generate(seed).Cluster != nil {
			seeds = append(seeds, seed)
		}
	}
	var mu sync.Mutex
	var kills, joins int
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			res, err := Run(context.Background(), seed, Options{onlyCluster: true})
			wall := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			if f := res.Failure; f != nil {
				t.Errorf("seed %d (%s; faults %s): %v %q\nreplay: %s", res.Seed, res.Shape, FaultSchedule(res.Faults), f, f.Records, res.Replay)
			}
			t.Logf("seed %d: %s; %v (run %v)", seed, FaultSchedule(res.Faults), wall, res.Elapsed)
			for _, f := range res.Faults {
				switch {
				case f.Kind == FaultMemberKill && f.Struck:
					kills++
				case f.Kind == FaultMemberJoin && f.Struck:
					joins++
				}
			}
		}()
	}
	wg.Wait()
	// The seeds must kill members and add some, or passing proves little.
	if kills == 0 || joins == 0 {
		t.Fatalf("seeds %v: %d members killed, %d joined", seeds, kills, joins)
	}
	t.Logf("seeds %v: %d members killed, %d joined", seeds, kills, joins)
}

// TestClusterSeedsAreDrawn: about one seed in clusterOneIn has a clustered
// form, and drawing it changes nothing else of the seed.
func TestClusterSeedsAreDrawn(t *testing.T) {
	n := 0
	for seed := uint64(1); seed <= 1000; seed++ {
		s := Generate(seed)
		if s.Cluster == nil {
			continue
		}
		n++
		c := s.Cluster
		if len(c.Records) != s.Records || c.Members < 2 || c.KeyedTasks < 2 || c.KeyedTasks > 4 {
			t.Fatalf("seed %d: %+v", seed, c)
		}
		killed := 0
		for _, f := range c.Faults {
			if f.Kind == FaultMemberKill {
				killed++
			}
		}
		if killed >= c.Members {
			t.Fatalf("seed %d: all %d members killed", seed, c.Members)
		}
	}
	if n < 1000/clusterOneIn/2 || n > 1000/clusterOneIn*2 {
		t.Fatalf("%d of 1000 seeds have a clustered form", n)
	}
}
