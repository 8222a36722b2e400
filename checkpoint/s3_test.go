package checkpoint_test

import (
	"testing"

	"gocloud.dev/blob/fileblob"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/checkpoint/bucket"
	"github.com/weirproject/weir/internal/s3test"
)

// The object-store parts of this package's tests: s3test links the s3
// driver (checkpoint/s3 and checkpoint/bucket import this package, so only
// an external test can import them) and hands its server to the internal
// tests (S3Start, FileBlobStore).
func init() {
	checkpoint.S3Start = s3test.Start
	checkpoint.FileBlobStore = func(t testing.TB, dir string) checkpoint.Store {
		b, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return bucket.Store(b)
	}
}
