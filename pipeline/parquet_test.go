package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weirproject/weir/pipeline"
)

// parquetOrder is a row of examples/pipelines/parquet-orders.yaml's files.
type parquetOrder struct {
	ID       string    `parquet:"id"`
	Customer string    `parquet:"customer"`
	Amount   float64   `parquet:"amount"`
	Tier     string    `parquet:"tier"`
	Time     time.Time `parquet:"time,timestamp(millisecond)"`
	Coupon   *string   `parquet:"coupon,optional"`
}

// TestParquetOrdersExample runs the example and reads its committed files
// with parquet-go: every order once, in the minute directory of its
// event time, with the tier the map step set and a null coupon.
func TestParquetOrdersExample(t *testing.T) {
	out := t.TempDir()
	t.Setenv("WEIR_OUT", out)
	s, err := pipeline.Run(context.Background(), parse(t, "parquet-orders.yaml"), pipeline.Options{Stdout: io.Discard}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 200 || s.Outputs["bad-lines"] != 1 {
		t.Errorf("sink: %d records, bad-lines %d; want the 200 orders and line 78", s.Outputs["sink"], s.Outputs["bad-lines"])
	}
	want := map[string]float64{}
	f, err := os.Open(filepath.Join(examples, "orders.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var o struct {
			ID     string
			Amount float64
		}
		if json.Unmarshal(sc.Bytes(), &o) != nil {
			continue // line 78, "not json": the source's dead letter
		}
		want[o.ID] = o.Amount
	}
	root := filepath.Join(out, "parquet-orders", "orders")
	got := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.HasSuffix(p, ".parquet") {
			t.Errorf("%s: not a committed part file", rel)
			return nil
		}
		rows, err := pq.ReadFile[parquetOrder](p)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if got[r.ID] {
				t.Errorf("order %s twice", r.ID)
			}
			got[r.ID] = true
			tier := "silver"
			if r.Amount >= 350 {
				tier = "gold"
			}
			if r.Amount != want[r.ID] || r.Tier != tier || r.Coupon != nil {
				t.Errorf("%s: %+v; want amount %v, tier %s, no coupon", rel, r, want[r.ID], tier)
			}
			if dir := r.Time.UTC().Format("dt=2006-01-02/hour=15/minute=04"); filepath.Dir(filepath.ToSlash(rel)) != dir {
				t.Errorf("%s holds order %s of %s; want it in %s", rel, r.ID, r.Time, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d orders in the files; want %d", len(got), len(want))
	}
}

// TestParquetSinkErrors: the sink's keys are checked at parse time, each
// error at its line and column, naming what is accepted.
func TestParquetSinkErrors(t *testing.T) {
	head := "name: p\nsource:\n  generate: {count: 1, fields: {a: \"1\"}}\nsink:\n  parquet:\n"
	for _, c := range []struct{ body, want string }{
		{"    path: out\n    fields: {a: int32}\n", `p.yaml:7:17: sink.parquet.fields.a: type "int32"; want one of string, int64, double, boolean, timestamp, each optionally preceded by "optional "`},
		{"    path: out\n    fields: {a: int64}\n    colour: red\n", `p.yaml:8:5: sink.parquet: unknown key "colour"; accepted: compression, deadLetters, fields, partition, path, rollSize`},
		{"    path: out\n    fields: {a: int64}\n    partition: dt={yy}\n", `p.yaml:8:16: sink.parquet: partition "dt={yy}": unknown placeholder {yy}`},
		{"    path: out\n    fields: {a: int64}\n    rollSize: 10XB\n", `p.yaml:8:15: sink.parquet.rollSize: "10XB": want a size such as 128MiB`},
		{"    path: out\n    fields: {a: int64}\n    compression: lz4\n", `p.yaml:8:18: sink.parquet.compression: "lz4": want one of zstd, snappy, none`},
		{"    path: ftp://host/x\n    fields: {a: int64}\n", `p.yaml:6:11: sink.parquet: path: location "ftp://host/x" has scheme "ftp"`},
		{"    path: out\n", `p.yaml:6:5: sink.parquet: missing key "fields"`},
		{"    path: out\n    fields: {}\n", `p.yaml:7:13: sink.parquet.fields: no columns`},
	} {
		_, err := pipeline.Parse("p.yaml", []byte(head+c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant an error with %q", c.body, err, c.want)
		}
	}
}

// TestParquetSinkDeadLetters: records that do not fit the declared
// columns (a required field missing, a string in a double column) go to
// sink.parquet.deadLetters with the reason and are counted apart from the
// sink's records; the rest are written. Without a deadLetters output
// (the sink's or the source's) they are dropped, counted as lost.
func TestParquetSinkDeadLetters(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := []string{
		`{"id": "a", "amount": 1.5, "time": 1000}`,
		`{"id": "b", "time": 2000}`,
		`{"id": "c", "amount": "lots", "time": 3000}`,
		`{"id": "d", "amount": 4, "time": 4000}`,
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(out, deadLetters string) string {
		return `
name: pq-dead
source:
  file: {paths: [` + in + `]}
  timestamp: time
sink:
  parquet:
    path: ` + filepath.Join(dir, out) + `
    fields: {id: string, amount: double}
    partition: none` + deadLetters + `
outputs:
  misfits:
    stdout: {}
`
	}
	p, err := pipeline.Parse("p.yaml", []byte(spec("routed", "\n    deadLetters: misfits")))
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	s, err := pipeline.Run(context.Background(), p, pipeline.Options{Stdout: &stdout}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 2 || s.DeadLetters != 2 || s.Outputs["misfits"] != 2 || s.Dropped != 0 {
		t.Fatalf("summary %+v; want 2 records in the sink, 2 sink dead letters in misfits", s)
	}
	var letters []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		letters = append(letters, m)
	}
	if len(letters) != 2 {
		t.Fatalf("dead letters %v", letters)
	}
	for _, m := range letters {
		v, _ := m["value"].(map[string]any)
		reason, _ := m["reason"].(string)
		switch v["id"] {
		case "b":
			if !strings.Contains(reason, `field "amount" is missing or null`) {
				t.Errorf("b's reason %q", reason)
			}
		case "c":
			if !strings.Contains(reason, `field "amount": string lots is not of type double`) {
				t.Errorf("c's reason %q", reason)
			}
		default:
			t.Errorf("dead letter %v", m)
		}
		if m["sink"] != "sink" {
			t.Errorf("dead letter %v does not name the sink", m)
		}
	}
	var ids []string
	err = filepath.WalkDir(filepath.Join(dir, "routed"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		rows, err := pq.ReadFile[struct {
			ID     string  `parquet:"id"`
			Amount float64 `parquet:"amount"`
		}](path)
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "d"}) {
		t.Fatalf("written %v, want a and d", ids)
	}

	p, err = pipeline.Parse("p.yaml", []byte(strings.Replace(spec("dropped", ""), "outputs:\n  misfits:\n    stdout: {}\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err = pipeline.Run(context.Background(), p, pipeline.Options{Stdout: io.Discard}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 2 || s.DeadLetters != 2 || s.DeadLettersDropped != 2 || s.Dropped != 2 {
		t.Fatalf("without deadLetters: summary %+v; want 2 records in the sink, 2 dead letters dropped", s)
	}
}
