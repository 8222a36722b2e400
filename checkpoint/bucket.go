package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Schemes are the URL schemes a checkpoint or savepoint location may have
// (a location without a scheme is a local directory path).
var Schemes = []string{"file", "s3", "gs", "azblob"}

// bucketSchemes are the schemes served by gocloud.dev/blob; their drivers
// register in drivers_*.go.
var bucketSchemes = map[string]bool{"s3": true, "gs": true, "azblob": true}

// CheckLocation returns an error, one line naming what is wrong and what
// is accepted, unless loc is a directory path or a URL whose scheme is one
// of Schemes (file://PATH, or s3://, gs://, azblob:// with a bucket).
func CheckLocation(loc string) error {
	_, _, err := parseLocation(loc)
	return err
}

// LocalPath returns the directory of loc when loc is local (a path or a
// file:// URL), and false for a bucket URL or an invalid location.
func LocalPath(loc string) (string, bool) {
	u, key, err := parseLocation(loc)
	if err != nil || u != nil {
		return "", false
	}
	return filepath.FromSlash(key), true
}

// IsURL tells whether loc is a URL (has a scheme) rather than a path.
func IsURL(loc string) bool {
	i := strings.Index(loc, "://")
	return i > 0 && !strings.ContainsAny(loc[:i], `/\.`)
}

// parseLocation splits loc into the URL of its bucket (nil for a local
// directory: a path or file://) and its key: the path of a local
// directory, or the key prefix in the bucket (no leading or trailing
// slash; "" is the bucket's root).
func parseLocation(loc string) (*url.URL, string, error) {
	if loc == "" {
		return nil, "", errors.New("checkpoint: empty location; give a directory path or a URL (schemes: file, s3, gs, azblob)")
	}
	if !IsURL(loc) {
		for _, sc := range Schemes {
			if strings.HasPrefix(loc, sc+":") {
				return nil, "", fmt.Errorf("checkpoint: location %q looks like a URL without \"//\"; write %s://...", loc, sc)
			}
		}
		return nil, filepath.ToSlash(loc), nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint: location %q is not a valid URL (%v); give a directory path or a URL with scheme file, s3, gs or azblob", loc, err)
	}
	switch {
	case u.Scheme == "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, "", fmt.Errorf("checkpoint: location %q names host %q; a file URL is local: file:///absolute/path", loc, u.Host)
		}
		if u.Path == "" {
			return nil, "", fmt.Errorf("checkpoint: location %q has no path; write file:///absolute/path", loc)
		}
		return nil, u.Path, nil
	case bucketSchemes[u.Scheme]:
		if u.Host == "" {
			return nil, "", fmt.Errorf("checkpoint: location %q names no bucket; write %s://BUCKET/PREFIX", loc, u.Scheme)
		}
		if !gcblob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
			return nil, "", fmt.Errorf("checkpoint: location %q: this weir was built without the %s driver (a weir_no* build tag); build it without that tag", loc, u.Scheme)
		}
		key := strings.Trim(u.Path, "/")
		b := *u
		b.Path, b.RawPath = "", ""
		return &b, key, nil
	default:
		return nil, "", fmt.Errorf("checkpoint: location %q has scheme %q; accepted schemes are file, s3, gs and azblob (or a directory path)", loc, u.Scheme)
	}
}

// Join returns the location of name inside loc, a path or a URL (a URL
// keeps its query).
func Join(loc, name string) string {
	if !IsURL(loc) {
		return filepath.Join(loc, name)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return loc + "/" + name
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + name
	u.RawPath = ""
	return u.String()
}

// canonical returns loc in a form that compares equal for equal locations.
func canonical(loc string) string {
	if !IsURL(loc) {
		return filepath.Clean(loc)
	}
	u, key, err := parseLocation(loc)
	if err != nil {
		return loc
	}
	if u == nil {
		return filepath.Clean(key)
	}
	return bucketKey(u) + "/" + key
}

// bucketKey names a bucket: its scheme, host and sorted query.
func bucketKey(u *url.URL) string {
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(u.Scheme + "://" + u.Host + "?")
	for _, k := range keys {
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(strings.Join(q[k], ",")) + "&")
	}
	return b.String()
}

// buckets holds the buckets opened so far, by bucketKey, for the life of
// the process: a job writes a checkpoint every few seconds to the same
// bucket, and opening one loads credentials and builds a client.
var buckets struct {
	sync.Mutex
	m map[string]Store
}

// openBucket returns the Store of the bucket at u.
func openBucket(u *url.URL) (Store, error) {
	k := bucketKey(u)
	buckets.Lock()
	defer buckets.Unlock()
	if s, ok := buckets.m[k]; ok {
		return s, nil
	}
	b, err := gcblob.OpenBucket(context.Background(), u.String())
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open bucket %s://%s: %w", u.Scheme, u.Host, err)
	}
	if buckets.m == nil {
		buckets.m = map[string]Store{}
	}
	s := BucketStore(b)
	buckets.m[k] = s
	return s, nil
}

// BucketStore returns the Store of a gocloud.dev/blob bucket. Every write
// is one object, atomic (visible whole or not at all) and durable when it
// returns; there is no rename, so a snapshot's commit point is its
// manifest, written after all its data objects. Keys are used as they are
// (open the bucket with gocloud.dev/blob.PrefixedBucket to place snapshots under a
// prefix).
func BucketStore(b *gcblob.Bucket) Store { return &bucketStore{b: b} }

type bucketStore struct{ b *gcblob.Bucket }

// notExist maps a bucket's "not found" to os.ErrNotExist.
func notExist(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %v", os.ErrNotExist, err)
	}
	return err
}

func (s *bucketStore) Create(key string) (ObjectWriter, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.b.NewWriter(ctx, key, &gcblob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("checkpoint: create object %s: %w", key, err)
	}
	return &bucketWriter{w: w, cancel: cancel, key: key}, nil
}

type bucketWriter struct {
	w      *gcblob.Writer
	cancel context.CancelFunc
	key    string
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = fmt.Errorf("checkpoint: write object %s: %w", w.key, err)
	}
	return n, err
}

func (w *bucketWriter) Close() error {
	defer w.cancel()
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("checkpoint: write object %s: %w", w.key, err)
	}
	return nil
}

// Abort cancels the upload before Close, which then discards it.
func (w *bucketWriter) Abort() {
	w.cancel()
	w.w.Close()
}

func (s *bucketStore) Publish(key string, data []byte) error {
	w, err := s.Create(key)
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

func (s *bucketStore) List(dir string) ([]Entry, error) {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	it := s.b.List(&gcblob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []Entry
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
			out = append(out, Entry{Name: name, IsDir: o.IsDir})
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
