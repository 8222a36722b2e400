package parquet_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// line is the conformance suite's record as a Parquet row.
type line struct {
	V string `parquet:"v"`
}

// conformanceSink is the Parquet sink as the suite drives it: the suite's
// strings as one-column rows under root (a directory or an s3:// URL
// naming the test's S3 server, which the kill9 mode's children write to),
// read back with parquet-go.
var conformanceSink = sinkconformance.Sink{
	Name: "parquet",
	Attach: func(s weir.Stream[string], root string) {
		rows := weir.Map(s, "row", func(v string) line { return line{V: v} }).UID("row")
		parquet.Sink(rows, "out", parquet.Options{Path: root, Partition: parquet.NoPartition, RollSize: 4 << 10}).UID("out")
	},
	Committed: func(tb testing.TB, root string) []string {
		t := tb.(*testing.T)
		var out []string
		for key, data := range objects(t, root) {
			if strings.HasPrefix(key, ".inprogress/") {
				t.Errorf("in-progress object %s left after the job finished", key)
				continue
			}
			rows, err := pq.Read[line](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			for _, r := range rows {
				out = append(out, r.V)
			}
		}
		return out
	},
}

// TestMain runs a child job of the conformance suite's kill9 mode when
// started as one.
func TestMain(m *testing.M) {
	sinkconformance.MaybeChild(conformanceSink)
	os.Exit(m.Run())
}

func withDest(newRoot func(t testing.TB) string) sinkconformance.Sink {
	s := conformanceSink
	s.NewDest = newRoot
	return s
}

// TestConformance runs the exactly-once sink conformance suite (random
// in-process failures, and kill -9 of child processes, each followed by a
// restore from the latest checkpoint; the committed files read back) for
// the Parquet sink, on a local directory and on s3:// (the in-process S3
// server), with small part files so that several roll per checkpoint.
func TestConformance(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		sinkconformance.Run(t, withDest(func(t testing.TB) string { return filepath.Join(t.TempDir(), "out") }),
			sinkconformance.Options{Records: 400})
	})
	t.Run("s3", func(t *testing.T) {
		n := 0
		sinkconformance.Run(t, withDest(func(tb testing.TB) string {
			n++
			return s3test.Start(tb, fmt.Sprintf("conf%d/out", n))
		}), sinkconformance.Options{Records: 400})
	})
}
