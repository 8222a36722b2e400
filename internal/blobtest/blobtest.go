// Package blobtest holds what the tests of weir's object-store emulators
// (internal/s3test, internal/gcstest, internal/azuretest) share: listing
// what a test wrote under a bucket URL. It registers no driver: the
// package that calls it imports the driver of its scheme.
package blobtest

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"

	"gocloud.dev/blob"
)

// Keys returns the keys of every object under loc (a bucket URL with a
// path prefix, as the emulators' Start returns, or one joined under it),
// relative to it, in the order the server lists them. Any error fails t.
func Keys(t testing.TB, loc string) []string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.Trim(u.Path, "/") + "/"
	u.Path = ""
	b, err := blob.OpenBucket(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, strings.TrimPrefix(o.Key, prefix))
	}
}
