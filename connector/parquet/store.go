package parquet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/blobupload"
	"github.com/weirproject/weir/internal/fsync"
)

// store holds the sink's objects under its root; keys are slash-separated
// and relative to the root. A store is used by one subtask goroutine.
type store interface {
	// create starts writing object key; it is durable and visible under
	// key once the writer's Close returned nil.
	create(key string) (objectWriter, error)
	// publish makes the closed object tmp visible as final and removes
	// tmp; it succeeds, doing nothing, when tmp is gone and final exists
	// (P3), and fails naming the loss when both are gone.
	publish(tmp, final string) error
	// list returns the names of the objects directly under dir.
	list(dir string) ([]string, error)
	// remove deletes object key; a missing one is no error.
	remove(key string) error
	close() error
}

type objectWriter interface {
	io.Writer
	Close() error
	// Abort discards the object.
	Abort()
}

// openStore opens the store of location loc (validated by Options).
func openStore(loc string) (store, error) {
	if dir, ok := checkpoint.LocalPath(loc); ok {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("parquet: create %s: %w", dir, err)
		}
		return &dirStore{root: dir}, nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("parquet: path %q: %w", loc, err)
	}
	prefix := strings.Trim(u.Path, "/")
	u.Path, u.RawPath = "", ""
	b, err := gcblob.OpenBucket(context.Background(), u.String())
	if err != nil {
		return nil, fmt.Errorf("parquet: open bucket %s://%s: %w", u.Scheme, u.Host, err)
	}
	if prefix != "" {
		b = gcblob.PrefixedBucket(b, prefix+"/")
	}
	return &bucketStore{b: b, where: u.Scheme + "://" + u.Host + "/" + prefix}, nil
}

// dirStore is a local directory: objects are files, fsynced when closed;
// publishing is a rename (atomic), followed by an fsync of the directory.
type dirStore struct{ root string }

func (d *dirStore) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

func (d *dirStore) create(key string) (objectWriter, error) {
	p := d.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	return &fileWriter{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

type fileWriter struct {
	f *os.File
	w *bufio.Writer
}

func (w *fileWriter) Write(p []byte) (int, error) { return w.w.Write(p) }

func (w *fileWriter) Close() error {
	if err := w.w.Flush(); err != nil {
		w.f.Close()
		return fmt.Errorf("parquet: write %s: %w", w.f.Name(), err)
	}
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return fmt.Errorf("parquet: sync %s: %w", w.f.Name(), err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("parquet: close %s: %w", w.f.Name(), err)
	}
	return syncDir(filepath.Dir(w.f.Name()))
}

func (w *fileWriter) Abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

func (d *dirStore) publish(tmp, final string) error {
	fp := d.path(final)
	dir := filepath.Dir(fp)
	if err := d.mkdirAll(dir); err != nil {
		return err
	}
	err := os.Rename(d.path(tmp), fp)
	if err == nil {
		return syncDir(dir)
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(fp); serr == nil {
			return nil // published before (P3)
		}
		return fmt.Errorf("parquet: part %s has neither its in-progress nor its final file: its records are lost", final)
	}
	return fmt.Errorf("parquet: publish %s: %w", fp, err)
}

// mkdirAll creates dir and fsyncs the parent of every directory it
// created, so that a published file's directory survives a crash.
func (d *dirStore) mkdirAll(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := d.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("parquet: %w", err)
	}
	return syncDir(parent)
}

func (d *dirStore) list(dir string) ([]string, error) {
	entries, err := os.ReadDir(d.path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (d *dirStore) remove(key string) error {
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

func (d *dirStore) close() error { return nil }

func syncDir(dir string) error {
	if err := fsync.Dir(dir); err != nil {
		return fmt.Errorf("parquet: sync %s: %w", dir, err)
	}
	return nil
}

// bucketStore is an object-store bucket: an object is uploaded by one
// writer (a multipart upload for large ones) and exists only once its
// Close returned; publishing is a server-side copy to the final key and a
// delete of the in-progress one.
type bucketStore struct {
	b     *gcblob.Bucket
	where string
}

// create starts the upload of key through blobupload (a pipe into
// Bucket.Upload), not blob.Writer: gocloud.dev's azureblob writer panics
// when an upload fed by Write fails or is aborted.
func (s *bucketStore) create(key string) (objectWriter, error) {
	w := blobupload.New(s.b, key, &gcblob.WriterOptions{ContentType: "application/vnd.apache.parquet", BufferSize: 8 << 20})
	return &blobWriter{w: w, name: s.where + "/" + key}, nil
}

type blobWriter struct {
	w    *blobupload.Writer
	name string
}

func (w *blobWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = fmt.Errorf("parquet: write %s: %w", w.name, err)
	}
	return n, err
}

func (w *blobWriter) Close() error {
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("parquet: write %s: %w", w.name, err)
	}
	return nil
}

func (w *blobWriter) Abort() { w.w.Abort() }

func (s *bucketStore) publish(tmp, final string) error {
	ctx := context.Background()
	err := s.b.Copy(ctx, final, tmp, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		if ok, eerr := s.b.Exists(ctx, final); eerr == nil && ok {
			return nil // published before (P3)
		} else if eerr != nil {
			return fmt.Errorf("parquet: publish %s/%s: %w", s.where, final, eerr)
		}
		return fmt.Errorf("parquet: part %s/%s has neither its in-progress nor its final object: its records are lost", s.where, final)
	}
	if err != nil {
		return fmt.Errorf("parquet: publish %s/%s: %w", s.where, final, err)
	}
	return s.remove(tmp)
}

func (s *bucketStore) list(dir string) ([]string, error) {
	it := s.b.List(&gcblob.ListOptions{Prefix: dir + "/", Delimiter: "/"})
	var out []string
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parquet: list %s/%s: %w", s.where, dir, err)
		}
		if !o.IsDir {
			out = append(out, path.Base(o.Key))
		}
	}
}

func (s *bucketStore) remove(key string) error {
	if err := s.b.Delete(context.Background(), key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("parquet: delete %s/%s: %w", s.where, key, err)
	}
	return nil
}

func (s *bucketStore) close() error { return s.b.Close() }
