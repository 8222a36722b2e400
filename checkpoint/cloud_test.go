package checkpoint_test

import (
	"testing"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/azuretest"
	"github.com/weirproject/weir/internal/gcstest"
)

// The gs:// and azblob:// locations of this package's tests (locations):
// gcstest and azuretest link the gs and azblob drivers, which import this
// package, so only an external test can import them (as s3_test.go).
func init() {
	checkpoint.GCSStart = gcstest.Start
	checkpoint.AzureStart = func(t testing.TB, prefix string) string {
		if err := azuretest.Available(); err != nil {
			t.Logf("no azblob:// location: %v", err)
			return ""
		}
		return azuretest.Start(t, prefix)
	}
	checkpoint.AfterTests = append(checkpoint.AfterTests, azuretest.Stop)
}
