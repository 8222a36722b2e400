package sinkconformance_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// jsonlSink is the JSON-lines file sink (one file per subtask, cut back to
// its checkpointed length on restore, J6): not a two-phase sink, but its
// files must hold each record once when the job has completed.
var jsonlSink = sinkconformance.Sink{
	Name:    "jsonl",
	NewDest: func(t testing.TB) string { return t.TempDir() },
	Attach: func(s weir.Stream[string], dest string) {
		weir.ToSink(s, "out", jsonl.Sink[string](filepath.Join(dest, "out.jsonl"))).UID("out")
	},
	Committed: func(t testing.TB, dest string) []string {
		files, err := filepath.Glob(filepath.Join(dest, "out.jsonl*"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r string
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: line %q: %v", name, sc.Text(), err)
				}
				out = append(out, r)
			}
			_ = f.Close()
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
		}
		return out
	},
}

// TestJSONLinesSink runs the suite for the JSON-lines file sink.
func TestJSONLinesSink(t *testing.T) {
	sinkconformance.Run(t, jsonlSink, sinkconformance.Options{})
}
