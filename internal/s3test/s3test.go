// Package s3test starts an S3 server in the test's process (gofakes3 with
// its in-memory backend) for tests of weir's object-store checkpoints: a
// real S3 protocol server, not a mock of the client. Importing it links
// the s3 driver of checkpoint locations (package checkpoint/s3). Only tests
// import it.
package s3test

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/weirproject/weir/internal/blobtest"

	_ "github.com/weirproject/weir/checkpoint/s3" // s3:// locations (and gocloud.dev's s3blob for Keys)
)

// Bucket is the bucket Start creates.
const Bucket = "weir"

// Start serves S3 on 127.0.0.1 until the test ends, with an empty bucket
// named Bucket, and points the AWS SDK at static test credentials (through
// the environment, so the test must not be parallel). It returns the URL
// of prefix in the bucket: s3://weir/PREFIX?endpoint=...&use_path_style=true
// (path-style addressing on a custom endpoint, plain HTTP, region
// us-east-1), which any checkpoint location accepts.
func Start(t testing.TB, prefix string) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "weir-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "weir-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	q := url.Values{}
	q.Set("endpoint", srv.URL)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	q.Set("region", "us-east-1")
	u := url.URL{Scheme: "s3", Host: Bucket, Path: "/" + prefix, RawQuery: q.Encode()}
	return u.String()
}

// Keys returns the keys of every object under loc (a URL Start returned,
// or one joined under it), relative to it, as the S3 server lists them.
func Keys(t testing.TB, loc string) []string {
	t.Helper()
	return blobtest.Keys(t, loc)
}
