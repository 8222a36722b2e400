package parquet_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
	gcblob "gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// order is the record type of the struct-schema tests.
type order struct {
	ID       int64     `parquet:"id"`
	Customer string    `parquet:"customer"`
	Amount   float64   `parquet:"amount"`
	At       time.Time `parquet:"at,timestamp(millisecond)"`
}

// base is the event time of record 0: 2026-12-04T10:00:00Z.
var base = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixMilli()

func makeOrder(i int64) weir.Record[order] {
	ts := base + i*60_000 // a record a minute: a new hour every 60
	return weir.Record[order]{Value: order{ID: i, Customer: fmt.Sprintf("c%d", i%7), Amount: float64(i%100) + 0.5, At: time.UnixMilli(ts).UTC()}, Timestamp: ts}
}

// faults makes the sink fail its nth PreCommit or Commit call, before or
// after the real one ran (a crash between publishing and acknowledging).
type faults struct {
	calls atomic.Int64
	at    map[int64]bool // call numbers that fail
	after map[int64]bool // of those, the ones that fail after the real call
}

type faultySink[T any] struct {
	weir.TwoPhaseCommitter[T, *parquet.Txn]
	f *faults
}

func (s faultySink[T]) phase(name string, call func() error) error {
	n := s.f.calls.Add(1)
	if !s.f.at[n] {
		return call()
	}
	if s.f.after[n] {
		if err := call(); err != nil {
			return err
		}
	}
	return fmt.Errorf("injected failure in %s (call %d)", name, n)
}

func (s faultySink[T]) PreCommit(t *parquet.Txn) error {
	return s.phase("PreCommit", func() error { return s.TwoPhaseCommitter.PreCommit(t) })
}

func (s faultySink[T]) Commit(t *parquet.Txn) error {
	return s.phase("Commit", func() error { return s.TwoPhaseCommitter.Commit(t) })
}

func (s faultySink[T]) Close() error {
	return s.TwoPhaseCommitter.(interface{ Close() error }).Close()
}

// runOrders runs n orders with parallelism 2 into a Parquet sink at
// o.Path, checkpointing every few milliseconds, failing at the records and
// sink calls the seed picks and restarting from the newest checkpoint in
// the process each time.
func runOrders(t *testing.T, seed uint64, n int64, o parquet.Options) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	failRecords := map[int64]*atomic.Bool{}
	for range 1 + rng.IntN(3) {
		failRecords[rng.Int64N(n)] = &atomic.Bool{}
	}
	f := &faults{at: map[int64]bool{}, after: map[int64]bool{}}
	for range 1 + rng.IntN(3) {
		c := 1 + rng.Int64N(16)
		f.at[c] = true
		f.after[c] = rng.IntN(2) == 0
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2,
		Restart:    runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Attempts: len(failRecords) + len(f.at), Delay: time.Millisecond},
		Checkpoint: runtime.CheckpointConfig{Interval: 3 * time.Millisecond, Dir: t.TempDir()}})
	src := weir.Generate(env, "orders", n, makeOrder, watermark.ForMonotonous[order]()).UID("orders")
	checked := weir.MapErr(src, "crash", func(v order) (order, error) {
		if b := failRecords[v.ID]; b != nil && b.CompareAndSwap(false, true) {
			return v, fmt.Errorf("injected failure at record %d", v.ID)
		}
		return v, nil
	}).UID("crash")
	newSink := parquet.ExactlyOnce[order](o)
	weir.TwoPhaseCommit(checked, "sink", func(ctx *runtime.Context) (weir.TwoPhaseCommitter[order, *parquet.Txn], error) {
		s, err := newSink(ctx)
		if err != nil {
			return nil, err
		}
		return faultySink[order]{s, f}, nil
	}).UID("sink")
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("seed %d: %v (replay: go test ./connector/parquet -run '%s' -seed %d)", seed, err, t.Name(), seed)
	}
	restarts := job.Metrics().Sum("job", runtime.MetricRestarts)
	for id, fired := range failRecords {
		if !fired.Load() {
			t.Fatalf("seed %d: the failure at record %d did not happen", seed, id)
		}
	}
	// Two subtasks may fail before one restart: at least one, not one each.
	if restarts < 1 {
		t.Fatalf("seed %d: no restart; want one at least (the injected failures)", seed)
	}
	t.Logf("seed %d: %d restarts (%d record failures, sink failures at calls %v)", seed, restarts, len(failRecords), f.at)
}

// openBucket opens loc (a directory or a URL) as a gocloud.dev bucket.
func openBucket(t *testing.T, loc string) *gcblob.Bucket {
	t.Helper()
	u := loc
	if !strings.Contains(loc, "://") {
		u = "file://" + filepath.ToSlash(loc)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.Trim(pu.Path, "/")
	if pu.Scheme == "file" {
		prefix = ""
	} else {
		pu.Path = ""
	}
	b, err := gcblob.OpenBucket(context.Background(), pu.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if prefix != "" {
		b = gcblob.PrefixedBucket(b, prefix+"/")
	}
	return b
}

// objects returns every object under loc by key.
func objects(t *testing.T, loc string) map[string][]byte {
	t.Helper()
	b := openBucket(t, loc)
	out := map[string][]byte{}
	it := b.List(nil)
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = data
	}
}

// committedOrders reads every committed part file under loc with
// parquet-go, checking that each is in the partition of its records'
// event times, and that no in-progress object is left.
func committedOrders(t *testing.T, loc, partition string) []order {
	t.Helper()
	var all []order
	for key, data := range objects(t, loc) {
		if strings.HasPrefix(key, ".inprogress/") {
			t.Errorf("in-progress object %s left after the job finished", key)
			continue
		}
		if !strings.HasSuffix(key, ".parquet") {
			t.Errorf("unexpected object %s", key)
			continue
		}
		rows, err := pq.Read[order](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for _, r := range rows {
			want := r.At.Format(partition) + "/"
			if !strings.HasPrefix(key, want) {
				t.Fatalf("%s holds order %d of %s: want it under %s", key, r.ID, r.At, want)
			}
		}
		all = append(all, rows...)
	}
	return all
}

func checkOnce(t *testing.T, got []order, n int64, seed uint64) {
	t.Helper()
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	if int64(len(got)) != n {
		t.Fatalf("seed %d: %d records committed; want %d", seed, len(got), n)
	}
	for i, r := range got {
		if want := makeOrder(int64(i)).Value; r != want {
			t.Fatalf("seed %d: record %d is %+v; want %+v (each once)", seed, i, r, want)
		}
	}
}

var seedFlag = flag.Uint64("seed", 0, "run the crash tests with this seed only")

// TestExactlyOnceAcrossFailures: orders written through in-process
// failures at random records and in random PreCommit and Commit calls
// (before or after the real call), each followed by a restore from the
// newest checkpoint, leave committed Parquet files holding each order
// exactly once, in the partition of its event time, and no in-progress
// object (P1-P4); with a small roll size too (P5).
func TestExactlyOnceAcrossFailures(t *testing.T) {
	for i, seed := range seeds(3) {
		o := parquet.Options{Path: t.TempDir()}
		if i%2 == 1 {
			o.RollSize = 2048
			o.Compression = "snappy"
		}
		runOrders(t, seed, 1500, o)
		checkOnce(t, committedOrders(t, o.Path, "dt=2006-01-02/hour=15"), 1500, seed)
	}
}

// TestExactlyOnceS3: the same on s3:// against an S3 server in the
// process (publishing is a server-side copy and a delete).
func TestExactlyOnceS3(t *testing.T) {
	for i, seed := range seeds(2) {
		loc := s3test.Start(t, fmt.Sprintf("out%d/orders", i))
		o := parquet.Options{Path: loc, Partition: "day={yyyy}{MM}{dd}", RollSize: int64(4096 * (i + 1))}
		runOrders(t, seed, 1000, o)
		checkOnce(t, committedOrders(t, loc, "day=20060102"), 1000, seed)
	}
}

func seeds(n int) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	out := make([]uint64, n)
	s := uint64(time.Now().UnixNano())
	for i := range out {
		out[i] = s + uint64(i)
	}
	return out
}

// TestOptionsValidate: bad options are refused with what is accepted.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    parquet.Options
		want string
	}{
		{parquet.Options{}, "parquet: no path"},
		{parquet.Options{Path: "ftp://x/y"}, `scheme "ftp"`},
		{parquet.Options{Path: "d", Compression: "lzo"}, `compression "lzo": want one of zstd (default), snappy, none`},
		{parquet.Options{Path: "d", RollSize: -1}, "rollSize -1"},
		{parquet.Options{Path: "d", Partition: "/dt={yyyy}"}, "leading, trailing or double slash"},
		{parquet.Options{Path: "d", Partition: "dt={yy}"}, "unknown placeholder {yy}"},
		{parquet.Options{Path: "d", Partition: ".x/{HH}"}, `directory ".x" is hidden`},
		{parquet.Options{Path: "d", Partition: "dt={yyyy"}, "unclosed {"},
	} {
		err := c.o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error with %q", c.o, err, c.want)
		}
	}
	for _, o := range []parquet.Options{{Path: "d"}, {Path: "file:///tmp/x", Partition: "none", Compression: "none"}, {Path: "d", Partition: "y={yyyy}/m={MM}/d={dd}/h={HH}/mi={mm}"}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if err := parquet.CheckFields([]parquet.Field{{Name: "a", Type: "int32"}}); err == nil || !strings.Contains(err.Error(), `type "int32"; want one of string, int64, double, boolean, timestamp`) {
		t.Errorf("int32 field: %v", err)
	}
}

// TestRecoverKeepsOthersPending: Recover on a fresh start deletes only its
// own subtask's in-progress objects of earlier runs; an in-progress
// object of another subtask is left.
func TestRecoverKeepsOthersPending(t *testing.T) {
	dir := t.TempDir()
	ip := filepath.Join(dir, ".inprogress")
	os.MkdirAll(ip, 0o755)
	mine := "part-0000-0000000000000001aaaaaaaa-000001-0000.parquet.inprogress"
	other := "part-0001-0000000000000001aaaaaaaa-000001-0000.parquet.inprogress"
	for _, n := range []string{mine, other} {
		if err := os.WriteFile(filepath.Join(ip, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := parquet.ExactlyOnce[order](parquet.Options{Path: dir})(&runtime.Context{Subtask: 0, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ip, mine)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("subtask 0's earlier in-progress file: %v; want it deleted", err)
	}
	if _, err := os.Stat(filepath.Join(ip, other)); err != nil {
		t.Errorf("subtask 1's in-progress file: %v; want it kept", err)
	}
}
