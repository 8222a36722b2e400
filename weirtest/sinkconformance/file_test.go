package sinkconformance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// fileSink is the exactly-once file sink as the suite drives it.
var fileSink = sinkconformance.Sink{
	Name:    "file",
	NewDest: func(t testing.TB) string { return filepath.Join(t.TempDir(), "out") },
	Attach: func(s weir.Stream[string], dest string) {
		weir.TwoPhaseCommit(s, "out", file.ExactlyOnce(dest, func(r string) ([]byte, error) { return []byte(r), nil })).UID("out")
	},
	Committed: func(t testing.TB, dest string) []string {
		parts, err := file.Committed(dest)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range parts {
			out = append(out, strings.Fields(string(b))...)
		}
		return out
	},
}

// TestMain runs a kill9 child job when the suite starts the binary as one.
func TestMain(m *testing.M) {
	sinkconformance.MaybeChild(fileSink, appendSink, jsonlSink)
	os.Exit(m.Run())
}

// TestFileSink runs the suite for the exactly-once file sink.
func TestFileSink(t *testing.T) {
	sinkconformance.Run(t, fileSink, sinkconformance.Options{})
}
