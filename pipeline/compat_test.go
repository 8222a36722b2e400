package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
)

// The upgrade path (docs/deploy.md "Upgrades"): a job stopped with a
// savepoint by one version of weir is started by the next with --restore
// (or restored from a retained checkpoint). testdata/compat holds
// snapshots written by earlier versions, committed once and never
// rewritten: every later weir must restore them and finish the job as if
// it had never stopped. Each directory, named v<format version>-<kind>-
// <state backend>, holds the snapshot ("savepoint", or "checkpoints" with
// its chk-N and shared files) and the records the job had emitted before
// it ("before.jsonl").
//
// To add the current version's fixtures (after a change of the snapshot
// format or of the pipeline builder's operators, keeping the old ones):
//
//	WEIR_WRITE_COMPAT=1 go test -run TestSnapshotCompatibility ./pipeline/
const compatYAML = `name: compat-clicks
kafka:
  embedded:
    topics: {clicks: 2}
    produce:
      - {topic: clicks, file: %s, key: user, timestamp: time}
source:
  kafka: {topics: [clicks], bounded: %v}
  timestamp: time
  watermark: {outOfOrderness: 10s, emit: every-record}
steps:
  - keyBy: user
  - window:
      tumbling: 1m
      aggregate: {clicks: count, slowest: max(ms), firstPage: first(page)}
sink:
  stdout: {}
job:
  parallelism: 2
  stateBackend: %s
  stateDir: %s
  checkpoint: {interval: 1h, dir: %s}
`

// compatClicks writes the first n of the fixtures' 400 click records to a
// file: four users, a click every 1.5 s, so windows straddle record 200
// (where the snapshots were taken).
func compatClicks(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	users := []string{"ana", "bo", "chen", "dee"}
	for i := range n {
		fmt.Fprintf(&b, `{"user": %q, "page": "/p%d", "ms": %d, "time": %d}`+"\n",
			users[(i*7)%4], i%5, 50+(i*37)%500, 1767225600000+int64(i)*1500)
	}
	p := filepath.Join(t.TempDir(), "clicks.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func compatSpec(t *testing.T, records int, bounded bool, backend, checkpoints string) *pipeline.Spec {
	t.Helper()
	if checkpoints == "" {
		checkpoints = t.TempDir()
	}
	spec, err := pipeline.Parse("compat.yaml", fmt.Appendf(nil, compatYAML, compatClicks(t, records), bounded, backend, t.TempDir(), checkpoints))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// sortedLines returns the non-empty lines of b, sorted.
func sortedLines(b []byte) []string {
	var ls []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if l != "" {
			ls = append(ls, l)
		}
	}
	slices.Sort(ls)
	return ls
}

// writeCompatFixture runs the job over the first 200 records, takes a
// savepoint (kind "savepoint") or a checkpoint ("checkpoint") once the
// source has read them all, and stores it with the records emitted before
// it under testdata/compat/v<its format version>-<kind>-<backend>.
func writeCompatFixture(t *testing.T, kind, backend string) {
	tmp := t.TempDir()
	var out bytes.Buffer
	sp, chk := filepath.Join(tmp, "savepoint"), filepath.Join(tmp, "checkpoints")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var snapErr error
	var snap string
	opts := pipeline.Options{Stdout: &out, OnStart: func(j *pipeline.Job, job *runtime.Job) {
		go func() {
			defer cancel()
			for !j.CaughtUp() && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			if kind == "savepoint" {
				_, snapErr = job.TriggerSavepoint(ctx, sp)
				snap = sp
			} else {
				_, snap, snapErr = job.TriggerCheckpoint(ctx)
			}
		}()
	}}
	if _, err := pipeline.Run(ctx, compatSpec(t, 200, false, backend, chk), opts, nil); err != nil {
		t.Fatal(err)
	}
	if snapErr != nil {
		t.Fatal(snapErr)
	}
	s, err := checkpoint.Read(snap)
	if err != nil {
		t.Fatal(err)
	}
	if kind == "savepoint" {
		os.RemoveAll(chk)
	} else {
		// Only the snapshot taken, with the shared files it references.
		ids, _ := checkpoint.Storage{}.List(chk)
		for _, id := range ids {
			if checkpoint.Dir(chk, id) != snap {
				os.RemoveAll(checkpoint.Dir(chk, id))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "before.jsonl"), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "compat", fmt.Sprintf("v%d-%s-%s", s.Version, kind, backend))
	if _, err := os.Stat(dir); err == nil {
		t.Logf("%s exists: kept as it is", dir)
		return
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(tmp)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d records before the snapshot)", dir, len(sortedLines(out.Bytes())))
}

// compatSnapshot returns the snapshot directory of a fixture.
func compatSnapshot(t *testing.T, dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "savepoint")); err == nil {
		return filepath.Join(dir, "savepoint")
	}
	chks, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "chk-*"))
	if len(chks) != 1 {
		t.Fatalf("%s holds neither a savepoint nor one checkpoint", dir)
	}
	return chks[0]
}

// TestSnapshotCompatibility: every committed fixture is read (its format
// version as its name says), restored by this weir into the same pipeline
// over all 400 records with either state backend, and the records emitted
// before the snapshot plus those emitted after the restore are exactly
// those of a run that never stopped.
func TestSnapshotCompatibility(t *testing.T) {
	if os.Getenv("WEIR_WRITE_COMPAT") != "" {
		for _, c := range [][2]string{{"savepoint", "memory"}, {"savepoint", "pebble"}, {"checkpoint", "pebble"}} {
			writeCompatFixture(t, c[0], c[1])
		}
		return
	}
	var whole bytes.Buffer
	if _, err := pipeline.Run(context.Background(), compatSpec(t, 400, true, "memory", ""), pipeline.Options{Stdout: &whole}, nil); err != nil {
		t.Fatal(err)
	}
	want := sortedLines(whole.Bytes())
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "compat", "v*"))
	if len(fixtures) < 3 {
		t.Fatalf("%d fixtures in testdata/compat: want the committed ones", len(fixtures))
	}
	for _, dir := range fixtures {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var version int
			if _, err := fmt.Sscanf(filepath.Base(dir), "v%d-", &version); err != nil {
				t.Fatalf("fixture name %s: want v<version>-<kind>-<backend>", dir)
			}
			snap := compatSnapshot(t, dir)
			s, err := checkpoint.Read(snap)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != version {
				t.Fatalf("%s reads as format version %d; its name says %d", snap, s.Version, version)
			}
			before, err := os.ReadFile(filepath.Join(dir, "before.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			// Restored with either backend: a snapshot is portable.
			for _, backend := range []string{"memory", "pebble"} {
				var after bytes.Buffer
				_, err := pipeline.Run(context.Background(), compatSpec(t, 400, true, backend, ""), pipeline.Options{Stdout: &after, RestoreFrom: snap}, nil)
				if err != nil {
					t.Fatalf("restore into the %s backend: %v", backend, err)
				}
				nb, na := len(sortedLines(before)), len(sortedLines(after.Bytes()))
				got := sortedLines(append(slices.Clone(before), after.Bytes()...))
				if !slices.Equal(got, want) {
					t.Fatalf("restored into %s: %d records before + %d after; want the %d of a run that never stopped\nbefore:\n%s\nafter:\n%s",
						backend, nb, na, len(want), before, after.String())
				}
				if nb == 0 || na == 0 {
					t.Fatalf("restored into %s: %d records before, %d after: the fixture should split the output", backend, nb, na)
				}
			}
		})
	}
}

// TestSavepointFromANewerFormat: a savepoint whose manifest says a format
// version this weir does not know is refused before the job starts, with
// one error naming the version and the ones this weir reads.
func TestSavepointFromANewerFormat(t *testing.T) {
	src := filepath.Join("testdata", "compat", "v1-savepoint-memory", "savepoint")
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dst, checkpoint.MetadataFile)
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["version"] = checkpoint.FormatVersion + 1
	b, _ = json.Marshal(m)
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(context.Background(), compatSpec(t, 400, true, "memory", ""), pipeline.Options{Stdout: &bytes.Buffer{}, RestoreFrom: dst}, nil)
	want := fmt.Sprintf("has format version %d; this weir reads versions 1 to %d", checkpoint.FormatVersion+1, checkpoint.FormatVersion)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore from a newer format: %v; want an error saying %q", err, want)
	}
}
