package sinkconformance_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// TestFileSink runs the suite for the exactly-once file sink.
func TestFileSink(t *testing.T) {
	sinkconformance.Run(t, sinkconformance.Sink{
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
	}, sinkconformance.Options{})
}
