package checkpoint

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tokenRE matches the writer's token in a data file's name.
var tokenRE = regexp.MustCompile(`-[0-9a-f]{16}\.bin$`)

// untoken replaces the writer's token in data file names with TOKEN.
func untoken(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = tokenRE.ReplaceAllString(n, "-TOKEN.bin")
	}
	return out
}

// dataFile returns the location of the data file of snapshot dir whose
// name starts with prefix ("op-0000-sub-0001"), as its manifest names it.
func dataFile(t testing.TB, dir, prefix string) string {
	t.Helper()
	return Join(dir, dataName(t, dir, prefix))
}

// dataName returns the name of that data file.
func dataName(t testing.TB, dir, prefix string) string {
	t.Helper()
	store, key, err := Storage{}.open(dir)
	if err != nil {
		t.Fatal(err)
	}
	es, err := store.List(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.HasPrefix(e.Name, prefix+"-") && strings.HasSuffix(e.Name, ".bin") {
			return e.Name
		}
	}
	t.Fatalf("no data file %s-*.bin in %s", prefix, dir)
	return ""
}

// S3Start starts an S3 server for the test and returns the s3:// URL of
// prefix in its bucket (internal/s3test.Start). It is set by s3_test.go,
// an external test: s3test links the s3 driver (checkpoint/s3), which
// imports this package, so this package's own tests cannot import it.
var S3Start func(t testing.TB, prefix string) string

// GCSStart and AzureStart are S3Start's counterparts for gs:// (a GCS
// server in the test's process, internal/gcstest) and azblob:// (Azurite,
// internal/azuretest); AzureStart returns "" when Azurite cannot run here
// (it logs why). Both are set by cloud_test.go, an external test.
var GCSStart, AzureStart func(t testing.TB, prefix string) string

// locations returns a checkpoint base of every kind of location: a path,
// a file:// URL, an s3:// URL on an S3 server and a gs:// URL on a GCS
// server in the test's process, and an azblob:// URL on Azurite when it
// can run here.
func locations(t *testing.T) map[string]string {
	t.Helper()
	locs := map[string]string{
		"path": filepath.Join(t.TempDir(), "chk"),
		"file": "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "chk")),
		"s3":   S3Start(t, "jobs/chk"),
		"gs":   GCSStart(t, "jobs/chk"),
	}
	if az := AzureStart(t, "jobs/chk"); az != "" {
		locs["azblob"] = az
	}
	return locs
}

// objects returns the keys of every object under base, sorted, relative to
// base.
func objects(t *testing.T, base string) []string {
	t.Helper()
	store, key, err := Storage{}.open(base)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(dir, rel string)
	walk = func(dir, rel string) {
		es, err := store.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.IsDir {
				walk(keyJoin(dir, e.Name), keyJoin(rel, e.Name))
			} else {
				out = append(out, keyJoin(rel, e.Name))
			}
		}
	}
	walk(key, "")
	slices.Sort(out)
	return out
}

// Write, Read (every blob verified), List, Latest and Retain behave the
// same at every kind of location.
func TestRoundTripAtEveryLocation(t *testing.T) {
	for kind, base := range locations(t) {
		t.Run(kind, func(t *testing.T) {
			for id := int64(1); id <= 4; id++ {
				dir, err := Write(Dir(base, id), tagged(id))
				if err != nil {
					t.Fatal(err)
				}
				if dir != Dir(base, id) {
					t.Fatalf("Write returned %s, want %s", dir, Dir(base, id))
				}
				s, err := Read(dir)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := contents(s); err != nil || got != want(t, id) {
					t.Fatalf("checkpoint %d read back as (%v)\n%s\nwant\n%s", id, err, got, want(t, id))
				}
			}
			if _, err := Write(Dir(base, 4), tagged(4)); err == nil || !strings.Contains(err.Error(), "already holds a snapshot") {
				t.Fatalf("overwriting checkpoint 4: %v", err)
			}
			if ids, err := List(base); err != nil || fmt.Sprint(ids) != "[1 2 3 4]" {
				t.Fatalf("list: %v %v", ids, err)
			}
			if dir, id, err := Latest(base); err != nil || id != 4 || dir != Dir(base, 4) {
				t.Fatalf("latest: %s %d %v", dir, id, err)
			}
			if err := Retain(base, 2); err != nil {
				t.Fatal(err)
			}
			if ids, err := List(base); err != nil || fmt.Sprint(ids) != "[3 4]" {
				t.Fatalf("after Retain(2): %v %v", ids, err)
			}
			want := []string{
				"chk-000000000003/_metadata", "chk-000000000003/op-0000-sub-0000-TOKEN.bin", "chk-000000000003/op-0000-sub-0001-TOKEN.bin",
				"chk-000000000004/_metadata", "chk-000000000004/op-0000-sub-0000-TOKEN.bin", "chk-000000000004/op-0000-sub-0001-TOKEN.bin",
			}
			if got := untoken(objects(t, base)); !slices.Equal(got, want) {
				t.Fatalf("objects after Retain(2):\n%v\nwant\n%v", got, want)
			}
			// A corrupt data object is an error naming it (I1).
			store, key, _ := Storage{}.open(base)
			obj := keyJoin(key, "chk-000000000004", dataName(t, Dir(base, 4), "op-0000-sub-0001"))
			data, err := readAll(store, obj)
			if err != nil {
				t.Fatal(err)
			}
			data[2] ^= 0xff
			if err := store.Publish(obj, data); err != nil {
				t.Fatal(err)
			}
			s, err := Read(Dir(base, 4))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := contents(s); err == nil || !strings.Contains(err.Error(), "op-0000-sub-0001-") || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("corrupt object: %v", err)
			}
			// A truncated one is found when the manifest is read.
			if err := store.Publish(obj, data[:3]); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(Dir(base, 4)); err == nil || !strings.Contains(err.Error(), "op-0000-sub-0001-") {
				t.Fatalf("truncated object: %v", err)
			}
		})
	}
}

// A checkpoint that crashed before its manifest (data objects only) is not
// a snapshot: Read says so, List and Latest skip it, Retain keeps it while
// it may still be being written (it is newer than the newest complete
// one) and deletes its objects once a newer checkpoint completed.
func TestMissingManifestIsIgnoredAndCollected(t *testing.T) {
	for kind, base := range locations(t) {
		t.Run(kind, func(t *testing.T) {
			for id := int64(1); id <= 2; id++ {
				if _, err := Write(Dir(base, id), tagged(id)); err != nil {
					t.Fatal(err)
				}
			}
			// Checkpoint 3 wrote its data, then the process died.
			store, key, _ := Storage{}.open(base)
			for _, name := range []string{"op-0000-sub-0000.bin", "op-0000-sub-0001.bin"} {
				if err := store.Publish(keyJoin(key, "chk-000000000003", name), []byte("data")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Read(Dir(base, 3)); !errors.Is(err, ErrNoSnapshot) {
				t.Fatalf("checkpoint 3 without a manifest: %v", err)
			}
			if _, id, err := Latest(base); err != nil || id != 2 {
				t.Fatalf("latest: %d %v", id, err)
			}
			if err := Retain(base, 1); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(objects(t, base), " "); !strings.Contains(got, "chk-000000000003/op-0000-sub-0000.bin") || strings.Contains(got, "chk-000000000001") {
				t.Fatalf("after Retain(1) with checkpoint 3 maybe in progress: %s", got)
			}
			if _, err := Write(Dir(base, 4), tagged(4)); err != nil {
				t.Fatal(err)
			}
			if err := Retain(base, 1); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(objects(t, base), " "); strings.Contains(got, "chk-000000000003") || strings.Contains(got, "chk-000000000002") {
				t.Fatalf("after checkpoint 4 and Retain(1), left: %s", got)
			}
			if _, id, err := Latest(base); err != nil || id != 4 {
				t.Fatalf("latest: %d %v", id, err)
			}
		})
	}
}

// One format: a snapshot written to s3:// and copied object by object into
// a directory reads the same from the directory, and the other way round.
func TestSnapshotCopiedBetweenS3AndDirectoryReadsTheSame(t *testing.T) {
	s3 := S3Start(t, "sp")
	dir := filepath.Join(t.TempDir(), "sp")
	copyAll := func(from, to string) {
		t.Helper()
		src, skey, _ := Storage{}.open(from)
		dst, dkey, _ := Storage{}.open(to)
		for _, o := range objects(t, from) {
			data, err := readAll(src, keyJoin(skey, o))
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Publish(keyJoin(dkey, o), data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := Write(Join(s3, "a"), tagged(5)); err != nil {
		t.Fatal(err)
	}
	copyAll(Join(s3, "a"), Join(dir, "a"))
	if _, err := Write(Join(dir, "b"), tagged(6)); err != nil {
		t.Fatal(err)
	}
	copyAll(Join(dir, "b"), Join(s3, "b"))
	for loc, id := range map[string]int64{Join(dir, "a"): 5, Join(s3, "b"): 6} {
		s, err := Read(loc)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := contents(s); err != nil || got != want(t, id) {
			t.Fatalf("%s read as (%v)\n%s\nwant\n%s", loc, err, got, want(t, id))
		}
	}
	// The manifest is byte for byte the one written.
	a, _ := os.ReadFile(filepath.Join(dir, "a", MetadataFile))
	store, key, _ := Storage{}.open(s3)
	b, err := readAll(store, keyJoin(key, "a", MetadataFile))
	if err != nil || string(a) != string(b) {
		t.Fatalf("manifests differ (%v)", err)
	}
}

// A bad location is refused in one line naming it and what is accepted.
func TestCheckLocation(t *testing.T) {
	// Every driver is linked in this test (s3test, gcstest and azuretest
	// link checkpoint/s3, gcs and azure): cmd/weir's TestDriversByBuildTag
	// checks that a location without its driver is refused; here, the line
	// it is refused with.
	for _, loc := range []string{"/tmp/x", "rel/dir", "file:///tmp/x", "s3://bucket", "s3://bucket/a/b?region=eu-west-1",
		"gs://b/p", "azblob://c/p?domain=127.0.0.1:10000&protocol=http&localemu=true"} {
		if err := CheckLocation(loc); err != nil {
			t.Errorf("%s: %v", loc, err)
		}
	}
	for loc, msg := range map[string]string{
		"gs":     `this build has no gs driver; install weir with it: go install -tags weir_gcs github.com/weirproject/weir/cmd/weir@latest`,
		"azblob": `import _ "github.com/weirproject/weir/checkpoint/azure"`,
	} {
		if err := missingDriver(loc+"://b/p", loc); !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s without its driver: %v, want one line containing %q", loc, err, msg)
		}
	}
	for loc, msg := range map[string]string{
		"":                "empty location",
		"ftp://host/x":    `scheme "ftp"; accepted schemes are file, s3, gs and azblob`,
		"s3:///prefix":    "names no bucket",
		"file://host/x":   `names host "host"`,
		"s3:bucket/x":     "without",
		"http://a.b/c?d=": `scheme "http"`,
	} {
		err := CheckLocation(loc)
		if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line containing %q", loc, err, msg)
		}
	}
	// A file URL and its path are one directory.
	dir := t.TempDir()
	if _, err := Write(Dir("file://"+filepath.ToSlash(dir), 1), tagged(1)); err != nil {
		t.Fatal(err)
	}
	if _, id, err := Latest(dir); err != nil || id != 1 {
		t.Fatalf("latest by path of a checkpoint written by file URL: %d %v", id, err)
	}
}

// Join and parent keep a URL's query (its endpoint and options).
func TestJoinKeepsTheQuery(t *testing.T) {
	base := "s3://b/jobs?endpoint=" + url.QueryEscape("http://127.0.0.1:9000") + "&region=x"
	d := Dir(base, 7)
	if !strings.HasPrefix(d, "s3://b/jobs/chk-000000000007?") || !strings.Contains(d, "region=x") {
		t.Fatalf("Dir: %s", d)
	}
	if canonical(parent(d)) != canonical(base) {
		t.Fatalf("parent(%s) = %s, want %s", d, parent(d), base)
	}
	if p := parent("s3://b/chk-1"); canonical(p) != canonical("s3://b") {
		t.Fatalf("parent at the bucket root: %s", p)
	}
}
