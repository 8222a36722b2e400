package checkpoint

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Schemes are the URL schemes a checkpoint or savepoint location may have
// (a location without a scheme is a local directory path).
var Schemes = []string{"file", "s3", "gs", "azblob"}

// bucketSchemes are the object-store schemes, each served by a driver
// package that registers it (RegisterScheme), and the build tag of
// cmd/weir that links the driver in.
var bucketSchemes = map[string]struct{ pkg, tag string }{
	"s3":     {"checkpoint/s3", "weir_s3"},
	"gs":     {"checkpoint/gcs", "weir_gcs"},
	"azblob": {"checkpoint/azure", "weir_azure"},
}

// drivers holds the registered openers by scheme, and the buckets opened
// so far by bucketKey, for the life of the process: a job writes a
// checkpoint every few seconds to the same bucket, and opening one loads
// credentials and builds a client.
var drivers struct {
	sync.Mutex
	open    map[string]func(*url.URL) (Store, error)
	buckets map[string]Store
}

// RegisterScheme makes locations with scheme (s3, gs or azblob) open with
// open. The driver packages call it from their init: import
// github.com/weirproject/weir/checkpoint/s3, .../checkpoint/gcs or
// .../checkpoint/azure for its side effect to accept that scheme (cmd/weir
// does with the build tags weir_s3, weir_gcs, weir_azure or weir_cloud).
// open gets the bucket's URL (scheme, bucket as host, the query; no path)
// and is called once per bucket; its Store is kept for the life of the
// process. RegisterScheme panics on another scheme or a second
// registration.
func RegisterScheme(scheme string, open func(bucket *url.URL) (Store, error)) {
	if _, ok := bucketSchemes[scheme]; !ok || open == nil {
		panic(fmt.Sprintf("checkpoint: RegisterScheme(%q): not an object-store scheme (s3, gs, azblob) or a nil opener", scheme))
	}
	drivers.Lock()
	defer drivers.Unlock()
	if drivers.open[scheme] != nil {
		panic(fmt.Sprintf("checkpoint: RegisterScheme(%q) called twice", scheme))
	}
	if drivers.open == nil {
		drivers.open = map[string]func(*url.URL) (Store, error){}
	}
	drivers.open[scheme] = open
}

// isBucket tells whether scheme is an object-store scheme.
func isBucket(scheme string) bool {
	_, ok := bucketSchemes[scheme]
	return ok
}

// registered tells whether scheme's driver is registered.
func registered(scheme string) bool {
	drivers.Lock()
	defer drivers.Unlock()
	return drivers.open[scheme] != nil
}

// openBucket returns the Store of the bucket at u.
func openBucket(u *url.URL) (Store, error) {
	k := bucketKey(u)
	drivers.Lock()
	defer drivers.Unlock()
	if s, ok := drivers.buckets[k]; ok {
		return s, nil
	}
	open := drivers.open[u.Scheme]
	if open == nil {
		return nil, missingDriver(u.String(), u.Scheme)
	}
	s, err := open(u)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open bucket %s://%s: %w", u.Scheme, u.Host, err)
	}
	if drivers.buckets == nil {
		drivers.buckets = map[string]Store{}
	}
	drivers.buckets[k] = s
	return s, nil
}

// missingDriver is the error of a location whose scheme's driver is not
// linked in: it names the command that installs a weir with it.
func missingDriver(loc, scheme string) error {
	d := bucketSchemes[scheme]
	return fmt.Errorf("checkpoint: location %q: this build has no %s driver; install weir with it: go install -tags %s github.com/weirproject/weir/cmd/weir@latest (-tags weir_cloud: s3, gs and azblob; in Go code: import _ \"github.com/weirproject/weir/%s\")",
		loc, scheme, d.tag, d.pkg)
}

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
	case isBucket(u.Scheme):
		if u.Host == "" {
			return nil, "", fmt.Errorf("checkpoint: location %q names no bucket; write %s://BUCKET/PREFIX", loc, u.Scheme)
		}
		if !registered(u.Scheme) {
			return nil, "", missingDriver(loc, u.Scheme)
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
