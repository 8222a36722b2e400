package checkpoint

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// racePublish runs n publishers of key at once in store, each with its
// own content, and returns the index of the one that succeeded (-1: none)
// and the errors of the others.
func racePublish(store Store, key string, n int) (int, []error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = publishExclusive(store, key, fmt.Appendf(nil, "writer %d", i))
		})
	}
	close(start)
	wg.Wait()
	won := -1
	var lost []error
	for i, err := range errs {
		if err == nil {
			if won >= 0 {
				return -2, nil // two winners
			}
			won = i
		} else {
			lost = append(lost, err)
		}
	}
	return won, lost
}

// Of concurrent exclusive publishers of one key, exactly one succeeds, the
// others get ErrExists, and the object holds the winner's content: in a
// directory (link(2)) and on the S3 server (If-None-Match), whose stores
// both implement ExclusivePublisher.
func TestPublishExclusiveHasOneWinner(t *testing.T) {
	for kind, base := range locations(t) {
		t.Run(kind, func(t *testing.T) {
			store, key, err := Storage{}.open(base)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := store.(ExclusivePublisher); !ok {
				t.Fatalf("the %s store is not an ExclusivePublisher", kind)
			}
			for round := range 20 {
				k := keyJoin(key, fmt.Sprintf("chk-%012d", round+1), MetadataFile)
				won, lost := racePublish(store, k, 6)
				if won < 0 {
					t.Fatalf("round %d: winner %d (-1: none, -2: several)", round, won)
				}
				for _, err := range lost {
					if !errors.Is(err, ErrExists) {
						t.Fatalf("round %d: a loser got %v, want ErrExists", round, err)
					}
				}
				if len(lost) != 5 {
					t.Fatalf("round %d: %d losers, want 5", round, len(lost))
				}
				data, err := readAll(store, k)
				if err != nil || string(data) != fmt.Sprintf("writer %d", won) {
					t.Fatalf("round %d: the object holds %q (%v), the winner was writer %d", round, data, err, won)
				}
			}
		})
	}
}

// The same property on the directory store for any number of publishers,
// and no temporary file is left behind by winner or losers.
func TestPublishExclusiveDirProperty(t *testing.T) {
	root := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(rt, "publishers")
		runs++
		dir := filepath.Join(root, fmt.Sprint(runs))
		store := DirStore(nil)
		k := filepath.ToSlash(filepath.Join(dir, MetadataFile))
		won, lost := racePublish(store, k, n)
		if won < 0 || len(lost) != n-1 {
			rt.Fatalf("%d publishers: winner %d, %d losers", n, won, len(lost))
		}
		for _, err := range lost {
			if !errors.Is(err, ErrExists) {
				rt.Fatalf("a loser got %v", err)
			}
		}
		es, err := store.List(filepath.ToSlash(dir))
		if err != nil || len(es) != 1 || es[0].Name != MetadataFile {
			rt.Fatalf("left in the directory: %v (%v), want %s only", es, err, MetadataFile)
		}
	})
}

// Two writers of one checkpoint at once (a task's new owner and a zombie):
// exactly one completes it, the other gets ErrExists and its data files
// are gone; the checkpoint reads back whole as the winner's (the data
// files of the two never shared a name).
func TestConcurrentWritersOfOneCheckpoint(t *testing.T) {
	for kind, base := range locations(t) {
		t.Run(kind, func(t *testing.T) {
			for id := int64(1); id <= 5; id++ {
				var wg sync.WaitGroup
				errs := make([]error, 2)
				start := make(chan struct{})
				for w := range 2 {
					wg.Go(func() {
						<-start
						// Writer w writes the content of checkpoint 10*w+id.
						snap := tagged(10*int64(w) + id)
						snap.ID = id
						_, errs[w] = Write(Dir(base, id), snap)
					})
				}
				close(start)
				wg.Wait()
				won := slices.IndexFunc(errs, func(e error) bool { return e == nil })
				if won < 0 || errs[1-won] == nil || !errors.Is(errs[1-won], ErrExists) {
					t.Fatalf("checkpoint %d: %v", id, errs)
				}
				s, err := Read(Dir(base, id))
				if err != nil {
					t.Fatal(err)
				}
				w := tagged(10*int64(won) + id)
				w.ID = id
				wantC, _ := contents(w)
				if got, err := contents(s); err != nil || got != wantC {
					t.Fatalf("checkpoint %d read back as (%v)\n%s\nwant writer %d's", id, err, got, won)
				}
				if n := len(objects(t, Dir(base, id))); n != 3 {
					t.Fatalf("checkpoint %d holds %d objects, want the manifest and the winner's 2 data files: %v", id, n, objects(t, Dir(base, id)))
				}
			}
		})
	}
}

// hookStore runs before before the manifest of a snapshot is published:
// where a zombie that passed its first fence check may pause.
type hookStore struct {
	Store
	before func()
}

func (h hookStore) PublishExclusive(key string, data []byte) error {
	if path.Base(key) == MetadataFile && h.before != nil {
		h.before()
	}
	return h.Store.(ExclusivePublisher).PublishExclusive(key, data)
}

// A zombie Z (epoch 1) and its task's new owner N (epoch 2), in each
// order of N's claim (F1, then pick: F2, F3) around Z's manifest: Z never
// completes a checkpoint that N did not restore, and a checkpoint that Z
// published and N restored stays valid.
func TestFenceZombieAndNewOwner(t *testing.T) {
	cases := []struct {
		name string
		// claimsAt: where N's F1 and pick run, relative to Z's publishing
		// of chk-3: "before" both before Z's first check, "during" both
		// between Z's check and its manifest, "split" F1 there and pick
		// after Z's manifest.
		claimsAt string
		restored int64   // N's restore point
		valid    []int64 // List after Z's attempt
	}{
		{"claim before the zombie's checkpoint", "before", 2, []int64{1, 2}},
		{"claim while the zombie writes its checkpoint", "during", 2, []int64{1, 2}},
		{"epoch before, pick after the zombie's manifest", "split", 3, []int64{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "task")
			var hook hookStore
			hook.Store = DirStore(nil)
			st := Storage{Store: &hook}
			zf, dir, _, err := st.ClaimLatest(base)
			if err != nil || dir != "" || zf.Epoch() != 1 {
				t.Fatalf("first claim: epoch %v, restore %q, %v", zf, dir, err)
			}
			z := Storage{Store: &hook, Fence: zf}
			for id := int64(1); id <= 2; id++ {
				if _, err := z.Write(Dir(base, id), tagged(id)); err != nil {
					t.Fatal(err)
				}
			}
			var nf *Fence
			var restored int64
			claimAll := func() {
				var err error
				if nf, _, restored, err = st.ClaimLatest(base); err != nil {
					t.Error(err)
				}
			}
			switch c.claimsAt {
			case "before":
				claimAll()
			case "during":
				hook.before = func() { hook.before = nil; claimAll() }
			case "split":
				hook.before = func() {
					hook.before = nil
					var err error
					if nf, err = st.claimEpoch(base); err != nil {
						t.Error(err)
					}
				}
			}
			_, zerr := z.Write(Dir(base, 3), tagged(3))
			if c.claimsAt == "split" {
				if _, restored, err = nf.pick(); err != nil {
					t.Fatal(err)
				}
			}
			if !errors.Is(zerr, ErrFenced) {
				t.Fatalf("the zombie's checkpoint 3: %v, want ErrFenced", zerr)
			}
			if nf.Epoch() != 2 || restored != c.restored {
				t.Fatalf("the new owner: epoch %d, restored %d; want 2, %d", nf.Epoch(), restored, c.restored)
			}
			if ids, err := st.List(base); err != nil || !slices.Equal(ids, c.valid) {
				t.Fatalf("valid checkpoints: %v (%v), want %v", ids, err, c.valid)
			}
			// The zombie stays fenced.
			if _, err := z.Write(Dir(base, 4), tagged(4)); !errors.Is(err, ErrFenced) {
				t.Fatalf("the zombie's next checkpoint: %v", err)
			}
			// The new owner numbers on from its restore point; a number the
			// zombie took is lost to it (ErrExists, not fenced), the next one
			// completes.
			n := Storage{Store: &hook, Fence: nf}
			next := restored + 1
			_, err = n.Write(Dir(base, next), tagged(next))
			if c.claimsAt == "during" {
				if !errors.Is(err, ErrExists) || errors.Is(err, ErrFenced) {
					t.Fatalf("the new owner's checkpoint %d over the zombie's void one: %v", next, err)
				}
				next++
				_, err = n.Write(Dir(base, next), tagged(next))
			}
			if err != nil {
				t.Fatalf("the new owner's checkpoint %d: %v", next, err)
			}
			if _, id, err := st.Latest(base); err != nil || id != next {
				t.Fatalf("latest: %d (%v), want %d", id, err, next)
			}
			// A third owner restores the new owner's checkpoint, and fences it.
			_, _, id, err := st.ClaimLatest(base)
			if err != nil || id != next {
				t.Fatalf("third owner restores %d (%v), want %d", id, err, next)
			}
			if err := nf.Check(); !errors.Is(err, ErrFenced) {
				t.Fatalf("the second owner after the third's claim: %v", err)
			}
			// Retention keeps valid checkpoints only.
			if err := st.Retain(base, 1); err != nil {
				t.Fatal(err)
			}
			if ids, err := st.List(base); err != nil || !slices.Equal(ids, []int64{next}) {
				t.Fatalf("after Retain(1): %v (%v)", ids, err)
			}
		})
	}
}

// Concurrent claimants of one base each get an epoch of their own.
func TestClaimEpochsAreUnique(t *testing.T) {
	for kind, base := range locations(t) {
		t.Run(kind, func(t *testing.T) {
			var wg sync.WaitGroup
			epochs := make([]int64, 6)
			for i := range epochs {
				wg.Go(func() {
					f, _, _, err := Storage{}.ClaimLatest(base)
					if err != nil {
						t.Error(err)
						return
					}
					epochs[i] = f.Epoch()
				})
			}
			wg.Wait()
			slices.Sort(epochs)
			if !slices.Equal(epochs, []int64{1, 2, 3, 4, 5, 6}) {
				t.Fatalf("epochs %v", epochs)
			}
		})
	}
}
