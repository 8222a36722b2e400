package parquet_test

import (
	"fmt"
	"testing"

	"github.com/weirproject/weir/internal/azuretest"
	"github.com/weirproject/weir/internal/gcstest"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// TestConformanceGCS runs the exactly-once sink conformance suite for the
// Parquet sink on gs:// (fake-gcs-server in the test's process, reached
// through gocloud.dev's gcsblob and Google's storage client): part files
// uploaded under .inprogress/, published by a server-side copy when the
// checkpoint completes, every record exactly once across the suite's
// failures and restores.
func TestConformanceGCS(t *testing.T) {
	n := 0
	sinkconformance.Run(t, withDest(func(tb testing.TB) string {
		n++
		return gcstest.Start(tb, fmt.Sprintf("conf%d/out", n))
	}), sinkconformance.Options{Records: 400})
}

// TestConformanceAzure runs the suite on azblob:// (Azurite, the Azure
// Storage emulator, in a child process; skipped, saying how to install it,
// when node or Azurite is missing).
func TestConformanceAzure(t *testing.T) {
	n := 0
	sinkconformance.Run(t, withDest(func(tb testing.TB) string {
		n++
		return azuretest.Start(tb, fmt.Sprintf("conf%d/out", n))
	}), sinkconformance.Options{Records: 400})
}
