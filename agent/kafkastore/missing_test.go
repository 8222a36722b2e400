package kafkastore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
)

func admin(t *testing.T, opts Options) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Brokers...))
	must(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestRestoreFromDeletedTopic: a checkpoint's marker restored against a
// topic deleted and created again fails with agent.ErrStatesMissing (the
// store still rebuilds what the new topic has); before, it restored an
// empty store and the actions ran again.
func TestRestoreFromDeletedTopic(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	s := open(t, opts, all)
	must(t, s.Restore(nil))
	must(t, s.Put(storetest.State("a", 0, 0, 0, 3, true)))
	must(t, s.Put(storetest.State("b", 0, 0, 0, 4, false)))
	m := markerOf(t, s)
	must(t, s.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := admin(t, opts)
	if _, err := adm.DeleteTopic(ctx, opts.Topic); err != nil {
		t.Fatal(err)
	}
	r := open(t, opts, all) // creates the topic again, empty
	err := r.Restore([][]byte{m})
	if !errors.Is(err, agent.ErrStatesMissing) || !strings.Contains(err.Error(), opts.Topic) {
		t.Fatalf("restore against a topic deleted and created again: %v; want agent.ErrStatesMissing", err)
	}
	must(t, r.Put(storetest.State("c", 0, 0, 0, 3, true))) // the store is usable
}

// TestRestoreAfterRecordsDeleted: a partition whose log start moved past
// the marker's offset (records deleted, retention) fails the restore with
// agent.ErrStatesMissing.
func TestRestoreAfterRecordsDeleted(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 1)
	s := open(t, opts, all)
	must(t, s.Restore(nil))
	must(t, s.Put(storetest.State("a", 0, 0, 0, 3, false)))
	m := markerOf(t, s)
	must(t, s.Put(storetest.State("a", 0, 0, 0, 3, true)))
	must(t, s.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: opts.Topic, Partition: 0, At: 1})
	dr, err := admin(t, opts).DeleteRecords(ctx, os)
	if err == nil {
		err = dr.Error()
	}
	must(t, err)
	r := open(t, opts, all)
	if err := r.Restore([][]byte{m}); !errors.Is(err, agent.ErrStatesMissing) || !strings.Contains(err.Error(), "partition 0 starts at offset 1") {
		t.Fatalf("restore after the marker's records were deleted: %v; want agent.ErrStatesMissing", err)
	}
}

// TestPruneHorizonReadBack: the horizon a PruneCheckpoint records is read
// back by a restore from a marker taken before it, in the same topic, and
// a lower one does not lower it.
func TestPruneHorizonReadBack(t *testing.T) {
	b := startBroker(t, "")
	opts := options(b, newTopic(), 2)
	s := open(t, opts, lower)
	must(t, s.Restore(nil))
	must(t, s.Put(storetest.State("a", 0, 0, 0, 3, true)))
	m := markerOf(t, s)
	must(t, s.PruneCheckpoint(7, []agent.KeySeq{{Key: []byte("a"), Seq: 0}}))
	must(t, s.PruneCheckpoint(4, nil))
	if h := s.PruneHorizon(); h != 7 {
		t.Fatalf("horizon %d, want 7", h)
	}
	must(t, s.Close())
	r := open(t, opts, all) // a change of parallelism reads both partitions
	must(t, r.Restore([][]byte{m}))
	if h := r.PruneHorizon(); h != 7 {
		t.Fatalf("horizon after the restore %d, want 7", h)
	}
	if got := ids(r); len(got) != 0 {
		t.Fatalf("states after the restore %v, want none (pruned)", got)
	}
}
