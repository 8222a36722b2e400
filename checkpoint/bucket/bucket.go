// Package bucket is the checkpoint.Store of a gocloud.dev/blob bucket,
// and registers object-store schemes with package checkpoint for the
// driver packages (checkpoint/s3, checkpoint/gcs, checkpoint/azure): import
// one of those for its side effect to accept its locations.
package bucket

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/blobupload"
)

// Register makes checkpoint locations with scheme (s3, gs or azblob) open
// through gocloud.dev/blob: the program must also link the scheme's
// gocloud.dev driver (gocloud.dev/blob/s3blob, gcsblob or azureblob), as the
// driver packages do.
func Register(scheme string) {
	checkpoint.RegisterScheme(scheme, func(u *url.URL) (checkpoint.Store, error) {
		b, err := gcblob.OpenBucket(context.Background(), u.String())
		if err != nil {
			return nil, err
		}
		return Store(b), nil
	})
}

// Store returns the checkpoint.Store of a gocloud.dev/blob bucket. Every
// write is one object, atomic (visible whole or not at all) and durable
// when it returns; there is no rename, so a snapshot's commit point is its
// manifest, written after all its data objects. The store is a
// checkpoint.ExclusivePublisher: the manifest is written with
// gocloud.dev/blob's WriterOptions.IfNotExist, a conditional write on the
// server (S3 If-None-Match: *, a GCS generation precondition, an Azure
// If-None-Match condition), so two writers cannot both complete one
// snapshot. gocloud.dev's fileblob and memblob check the condition within
// one process only. Keys are used as they are
// (open the bucket with gocloud.dev/blob.PrefixedBucket to place snapshots
// under a prefix).
func Store(b *gcblob.Bucket) checkpoint.Store { return &bucketStore{b: b} }

type bucketStore struct{ b *gcblob.Bucket }

// notExist maps a bucket's "not found" to os.ErrNotExist.
func notExist(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %v", os.ErrNotExist, err)
	}
	return err
}

func (s *bucketStore) Create(key string) (checkpoint.ObjectWriter, error) {
	return s.create(key, false)
}

// create starts the upload of key. It goes through blobupload (a pipe
// into Bucket.Upload), not blob.Writer: gocloud.dev's azureblob writer
// panics when an upload fed by Write fails, as a conditional write that
// loses does (see package internal/blobupload).
func (s *bucketStore) create(key string, ifNotExist bool) (*bucketWriter, error) {
	w := blobupload.New(s.b, key, &gcblob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist})
	return &bucketWriter{w: w, key: key}, nil
}

type bucketWriter struct {
	w   *blobupload.Writer
	key string
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = w.wrap(err)
	}
	return n, err
}

// wrap names the object in a write's error; a failed IfNotExist
// precondition (Write or Close may report it) matches checkpoint.ErrExists.
func (w *bucketWriter) wrap(err error) error {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%w: object %s: %v", checkpoint.ErrExists, w.key, err)
	}
	return fmt.Errorf("checkpoint: write object %s: %w", w.key, err)
}

func (w *bucketWriter) Close() error {
	if err := w.w.Close(); err != nil {
		return w.wrap(err)
	}
	return nil
}

// Abort cancels the upload, which discards it.
func (w *bucketWriter) Abort() { w.w.Abort() }

func (s *bucketStore) Publish(key string, data []byte) error {
	return s.publish(key, data, false)
}

// PublishExclusive implements checkpoint.ExclusivePublisher: a
// conditional write (IfNotExist), which the server refuses, changing
// nothing, when key exists.
func (s *bucketStore) PublishExclusive(key string, data []byte) error {
	return s.publish(key, data, true)
}

func (s *bucketStore) publish(key string, data []byte, ifNotExist bool) error {
	w, err := s.create(key, ifNotExist)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

func (s *bucketStore) Size(key string) (int64, error) {
	a, err := s.b.Attributes(context.Background(), key)
	if err != nil {
		return 0, notExist(err)
	}
	return a.Size, nil
}

func (s *bucketStore) ReadRange(key string, off, n int64) (io.ReadCloser, error) {
	if n == 0 {
		// An empty range is no request (S3 refuses it as InvalidRange).
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := s.b.NewRangeReader(context.Background(), key, off, n, nil)
	if err != nil {
		return nil, notExist(err)
	}
	return r, nil
}

func (s *bucketStore) List(dir string) ([]checkpoint.Entry, error) {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	it := s.b.List(&gcblob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []checkpoint.Entry
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list %s: %w", prefix, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/")
		if name != "" {
			out = append(out, checkpoint.Entry{Name: name, IsDir: o.IsDir})
		}
	}
}

func (s *bucketStore) Delete(key string) error {
	if err := s.b.Delete(context.Background(), key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("checkpoint: delete object %s: %w", key, err)
	}
	return nil
}

func (s *bucketStore) DeleteDir(dir string) error {
	it := s.b.List(&gcblob.ListOptions{Prefix: dir + "/"})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checkpoint: list %s/: %w", dir, err)
		}
		if err := s.Delete(o.Key); err != nil {
			return err
		}
	}
}

func (s *bucketStore) Sync(string) error { return nil }
