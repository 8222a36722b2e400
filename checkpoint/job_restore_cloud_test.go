package checkpoint_test

import (
	"testing"

	"github.com/weirproject/weir/internal/azuretest"
	"github.com/weirproject/weir/internal/gcstest"
)

// A job checkpoints to gs:// (a GCS server in the test's process), is
// cancelled, and a new run restores from the newest checkpoint there:
// every key counted exactly once, with the memory and the Pebble backend
// (native SSTs uploaded to and downloaded from the bucket).
func TestJobRestoresFromGCS(t *testing.T) {
	jobRestoresFrom(t, "gs://", func(t *testing.T) string { return gcstest.Start(t, "jobs/count") })
}

// The same on azblob:// (Azurite, the Azure Storage emulator; skipped,
// saying how to install it, when node or Azurite is missing).
func TestJobRestoresFromAzure(t *testing.T) {
	jobRestoresFrom(t, "azblob://", func(t *testing.T) string { return azuretest.Start(t, "jobs/count") })
}
