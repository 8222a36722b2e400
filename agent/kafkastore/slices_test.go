package kafkastore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// The keyed tasks of a clustered job (package cluster) are separate jobs,
// each a slice of the job's key groups with checkpoint ids of its own,
// sharing one topic. Here four slices share a topic of ONE partition (a
// topic created by hand, or by an earlier version): each slice's restore
// keeps only its key groups; a prune by one slice writes tombstones for its
// own runs only; and a slice's prune horizon, a checkpoint id of that
// slice's numbering, does not count for the others, whose checkpoints
// are numbered apart (a slice far ahead must not make another's restore
// fail with ErrStatesMissing).
func TestSlicesShareATopic(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	const n = 4
	rng := func(q int) keygroup.Range { return keygroup.RangeFor(maxP, n, q) }
	stores := make([]*Store, n)
	markers := make([][]byte, n)
	for q := range n {
		stores[q] = open(t, opts, rng(q))
		must(t, stores[q].Restore(nil))
		markers[q] = markerOf(t, stores[q])
	}
	// Two keys per slice, three inputs each.
	key := func(q, i int) string { return fmt.Sprintf("s%d-k%d", q, i) }
	for q, s := range stores {
		for i := range 2 {
			for seq := range int64(3) {
				must(t, s.Put(storetest.State(key(q, i), seq, 0, 0, rng(q).Start+i, true)))
			}
		}
	}
	want := make([][]string, n)
	for q, s := range stores {
		want[q] = ids(s)
	}
	// Slice 3 is far ahead (checkpoint 90) and prunes its first key's
	// first two inputs; slice 0 prunes at its checkpoint 5.
	must(t, stores[3].PruneCheckpoint(90, []agent.KeySeq{{Key: []byte(key(3, 0)), Seq: 1}}))
	must(t, stores[0].PruneCheckpoint(5, []agent.KeySeq{{Key: []byte(key(0, 1)), Seq: 0}}))
	want[3], want[0] = ids(stores[3]), ids(stores[0])
	for q := range n {
		r := open(t, opts, rng(q))
		must(t, r.Restore([][]byte{markers[q]}))
		if got := ids(r); !slices.Equal(got, want[q]) {
			t.Errorf("slice %d restored %v, want %v", q, got, want[q])
		}
		r.mu.Lock()
		for _, run := range r.idx.All() {
			if e := run.V; !rng(q).Contains(e.kg) {
				t.Errorf("slice %d (key groups %v) holds key group %d", q, rng(q), e.kg)
			}
		}
		r.mu.Unlock()
		wantH := map[int]int64{0: 5, 3: 90}[q]
		if h := r.PruneHorizon(); h != wantH {
			t.Errorf("slice %d: prune horizon %d after its restore, want %d (its own)", q, h, wantH)
		}
	}
	// The tombstones are those of the pruned runs only.
	var tomb []string
	for _, r := range readTopic(t, b, opts.Topic) {
		if r.Value == nil {
			tomb = append(tomb, string(r.Key))
		}
	}
	var w []string
	for _, st := range []*agent.ActionState{storetest.State(key(0, 1), 0, 0, 0, rng(0).Start+1, true),
		storetest.State(key(3, 0), 0, 0, 0, rng(3).Start, true), storetest.State(key(3, 0), 1, 0, 0, rng(3).Start, true)} {
		w = append(w, string(st.ID.Encode()))
	}
	slices.Sort(tomb)
	slices.Sort(w)
	if !slices.Equal(tomb, w) {
		t.Fatalf("%d tombstones, want %d: those of %s/0, %s/0 and %s/1 only", len(tomb), len(w), key(0, 1), key(3, 0), key(3, 0))
	}
}

// Factory opens a slice's store on the slice's key groups
// (runtime.Context.OwnedKeyGroups), and a topic it creates gets one
// partition per slice, so each keyed task of a clustered job writes and
// rebuilds one partition.
func TestFactoryOpensTheSlice(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 0)
	for q := range 4 {
		ctx := &runtime.Context{Parallelism: 1, MaxParallelism: maxP, KeyGroups: keygroup.RangeFor(maxP, 1, 0), Slice: q, Slices: 4}
		st, err := Factory(opts)(ctx)
		must(t, err)
		s := st.(*Store)
		if s.rng != keygroup.RangeFor(maxP, 4, q) || s.parts != 4 || s.first != int32(q) || s.last != int32(q) {
			t.Errorf("slice %d: key groups %v, partitions %d-%d of %d; want %v, partition %d of 4", q, s.rng, s.first, s.last, s.parts, keygroup.RangeFor(maxP, 4, q), q)
		}
		must(t, s.Close())
	}
}
