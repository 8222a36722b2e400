// Package gcstest starts a Google Cloud Storage server in the test's
// process (fake-gcs-server's fakestorage, in memory) for tests of weir's
// gs:// locations: checkpoints and the Parquet sink. It speaks GCS's JSON
// API over HTTP, so the real client (gocloud.dev/blob/gcsblob on
// cloud.google.com/go/storage) is what is tested, not a mock of it.
// Importing it links the gs driver of checkpoint locations (package
// checkpoint/gcs). Only tests import it.
//
// gocloud.dev's gcsblob has no endpoint URL parameter: it reaches an
// emulator through the environment variable STORAGE_EMULATOR_HOST
// (host:port, plain HTTP, no credentials), read each time a bucket is
// opened. Start sets it for the test, so that test must not be parallel.
package gcstest

import (
	"fmt"
	"io"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/weirproject/weir/internal/blobtest"

	_ "github.com/weirproject/weir/checkpoint/gcs" // gs:// locations (and gocloud.dev's gcsblob for Keys)
)

// buckets numbers the buckets of Start: each call has its own bucket name,
// because package checkpoint keeps a bucket open for the life of the
// process by its URL, and a later test's server must not be reached
// through an earlier test's client.
var buckets atomic.Int64

// Start serves GCS on 127.0.0.1 until the test ends, with one empty
// bucket named weir-N (N unique in the process), points gcsblob at it
// (STORAGE_EMULATOR_HOST, set for the test) and returns the URL of prefix
// in the bucket: gs://weir-N/PREFIX, which any checkpoint location and the
// Parquet sink's Path accept.
func Start(t testing.TB, prefix string) string {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Writer: io.Discard,
		// The storage client reads objects path-style (host/bucket/object)
		// from the emulator's host; the server serves that path only to
		// requests for its public host (compared without the port).
		PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatalf("gcstest: start the GCS server: %v", err)
	}
	t.Cleanup(srv.Stop)
	name := fmt.Sprintf("weir-%d", buckets.Add(1))
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", u.Host)
	return (&url.URL{Scheme: "gs", Host: name, Path: "/" + prefix}).String()
}

// Keys returns the keys of every object under loc (a URL Start returned,
// or one joined under it), relative to it, as the GCS server lists them.
func Keys(t testing.TB, loc string) []string {
	t.Helper()
	return blobtest.Keys(t, loc)
}
