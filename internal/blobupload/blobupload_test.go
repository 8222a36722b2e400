package blobupload_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/weirproject/weir/internal/azuretest"
	"github.com/weirproject/weir/internal/blobupload"
	"github.com/weirproject/weir/internal/gcstest"
	"github.com/weirproject/weir/internal/s3test"
)

// open opens the bucket of loc (a URL of a test server), under its path.
func open(t *testing.T, loc string) *blob.Bucket {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.Trim(u.Path, "/")
	u.Path = ""
	b, err := blob.OpenBucket(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return blob.PrefixedBucket(b, prefix+"/")
}

// On every bucket server: a written object reads back whole (U1); a
// conditional write of an existing key fails with FailedPrecondition
// after its data was written, and leaves the object as it was (through
// blob.Writer this failure panics in gocloud.dev's azureblob); an aborted
// upload leaves nothing (U1); a Write after the upload failed returns
// rather than blocking (U2).
func TestUploadAtEveryBucket(t *testing.T) {
	for kind, start := range map[string]func(testing.TB, string) string{
		"s3": s3test.Start, "gs": gcstest.Start, "azblob": azuretest.Start,
	} {
		t.Run(kind, func(t *testing.T) {
			b := open(t, start(t, "up"))
			opts := &blob.WriterOptions{ContentType: "application/octet-stream"}
			big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, several writes
			w := blobupload.New(b, "a", opts)
			for i := 0; i < len(big); i += 100 << 10 {
				if _, err := w.Write(big[i:min(i+100<<10, len(big))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := b.ReadAll(context.Background(), "a"); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(big))
			}

			w = blobupload.New(b, "a", &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: true})
			if _, err := w.Write([]byte("second writer")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); gcerrors.Code(err) != gcerrors.FailedPrecondition {
				t.Fatalf("conditional write of an existing key: %v, want FailedPrecondition", err)
			}
			if got, err := b.ReadAll(context.Background(), "a"); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("after the refused write the object holds %d bytes (%v), want the first %d", len(got), err, len(big))
			}

			w = blobupload.New(b, "b", opts)
			if _, err := w.Write(big[:1000]); err != nil {
				t.Fatal(err)
			}
			w.Abort()
			if ok, err := b.Exists(context.Background(), "b"); err != nil || ok {
				t.Fatalf("aborted upload: exists %v (%v), want nothing written", ok, err)
			}

			// A failed upload (the bucket refuses the key) ends the pipe:
			// Writes return its error.
			w = blobupload.New(b, "c", &blob.WriterOptions{})
			var err error
			for i := 0; i < 64 && err == nil; i++ {
				_, err = w.Write(big[:64<<10])
			}
			if cerr := w.Close(); err == nil || cerr == nil {
				t.Fatalf("an upload without a content type: write %v, close %v; want both to fail", err, cerr)
			}
		})
	}
}
