package parquet_test

import (
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/runtime"
)

// visible returns the keys under loc that a *.parquet glob matches.
func visible(t *testing.T, loc string) []string {
	t.Helper()
	var out []string
	for k := range objects(t, loc) {
		if strings.HasSuffix(k, ".parquet") {
			out = append(out, k)
		}
	}
	return out
}

// TestVisibilityAndIdempotentCommit drives the committer by hand: nothing
// a *.parquet glob matches exists before Commit, however far the parts got
// (rolled, pre-committed: P1, P2); Commit publishes each part; a second
// Commit (a restore committing again) changes nothing (P3); a part whose
// objects are both gone fails Commit naming the loss.
func TestVisibilityAndIdempotentCommit(t *testing.T) {
	for _, store := range []string{"dir", "s3"} {
		t.Run(store, func(t *testing.T) {
			loc := t.TempDir()
			if store == "s3" {
				loc = s3test.Start(t, "vis")
			}
			s, err := parquet.ExactlyOnce[order](parquet.Options{Path: loc, RollSize: 1024, Partition: "day={yyyy}-{MM}-{dd}"})(&runtime.Context{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.(interface{ Close() error }).Close()
			txn, _ := s.Begin()
			for i := range int64(3000) {
				if err := s.Write(txn, makeOrder(i)); err != nil {
					t.Fatal(err)
				}
			}
			if v := visible(t, loc); len(v) != 0 {
				t.Fatalf("before PreCommit, visible: %v", v)
			}
			if err := s.PreCommit(txn); err != nil {
				t.Fatal(err)
			}
			if v := visible(t, loc); len(v) != 0 {
				t.Fatalf("after PreCommit, before Commit, visible: %v", v)
			}
			if len(txn.Parts) <= 3 {
				t.Fatalf("%d parts: want more than one per day (rolled at 1 KiB)", len(txn.Parts))
			}
			if err := s.Commit(txn); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(txn); err != nil {
				t.Fatalf("second Commit: %v", err)
			}
			checkOnce(t, committedOrders(t, loc, "day=2006-01-02"), 3000, 0)
			lost := &parquet.Txn{Parts: []parquet.Part{{Final: "dt=2026-12-04/hour=10/part-0000-0-000001-0000.parquet", Records: 1}}}
			if err := s.Commit(lost); err == nil || !strings.Contains(err.Error(), "its records are lost") {
				t.Errorf("Commit of a part with neither object: %v; want an error saying its records are lost", err)
			}
		})
	}
}

// TestMissingRequiredField: a declared, non-optional field missing from a
// record fails the write, naming the field and the way out; a wrong type
// names the field and the type.
func TestMissingRequiredField(t *testing.T) {
	newSink := parquet.ExactlyOnceFields(parquet.Options{Path: t.TempDir()}, []parquet.Field{{Name: "id", Type: "int64"}, {Name: "note", Type: "string", Optional: true}})
	for _, c := range []struct {
		rec  map[string]any
		want string
	}{
		{map[string]any{"note": "x"}, `parquet: field "id" is missing or null; declare it optional to write nulls`},
		{map[string]any{"id": 1.5}, `parquet: field "id": float64 1.5 is not of type int64`},
		{map[string]any{"id": "7"}, `parquet: field "id": string 7 is not of type int64`},
	} {
		s, err := newSink(&runtime.Context{})
		if err != nil {
			t.Fatal(err)
		}
		txn, _ := s.Begin()
		// The batch is converted when it is full or at PreCommit.
		err = s.Write(txn, weir.Record[map[string]any]{Value: c.rec})
		if err == nil {
			err = s.PreCommit(txn)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.rec, err, c.want)
		}
		s.(interface{ Close() error }).Close()
	}
}
