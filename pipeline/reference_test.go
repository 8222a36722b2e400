package pipeline

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateReference = flag.Bool("update", false, "rewrite the key reference of docs/pipelines.md from the parser's tables")

// TestReferenceUpToDate fails when the key reference of docs/pipelines.md
// is not what the parser's tables generate (reference.go): docs and parser
// cannot drift. -update rewrites it.
func TestReferenceUpToDate(t *testing.T) {
	const path = "../docs/pipelines.md"
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceReference(string(old))
	if err != nil {
		t.Fatal(err)
	}
	if *updateReference {
		if want != string(old) {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if want != string(old) {
		t.Fatalf("docs/pipelines.md: the key reference differs from the parser's tables; run go generate ./pipeline/ (go test ./pipeline/ -run TestReferenceUpToDate -update) and review the diff")
	}
}

// TestReferenceCoversEveryTable checks the reference run itself: every
// section that the example pipelines and the test pipelines decode is in
// the reference with the same keys (a section the reference run did not
// reach, behind a value check, would fail it).
func TestReferenceCoversEveryTable(t *testing.T) {
	r := referenceRun()
	files, _ := filepath.Glob("../examples/pipelines/*.yaml")
	more, _ := filepath.Glob("testdata/compat/*.yaml")
	files = append(files, more...)
	sections := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := &dec{file: f, onObject: func(what string, fields []field) {
			sections++
			p := indexRE.ReplaceAllString(what, "[]")
			if strings.HasPrefix(p, "outputs.") {
				if _, rest, ok := strings.Cut(p[len("outputs."):], "."); ok {
					p = "outputs.NAME." + rest
				} else {
					p = "outputs.NAME"
				}
			}
			for _, s := range r.byPath[p] {
				if tableSignature(s.fields) == tableSignature(fields) {
					return
				}
			}
			t.Errorf("%s: section %s (as %s) is not in the reference with these keys", f, what, p)
		}}
		parse(d, src) // errors are the test files' business
	}
	if len(files) < 10 || sections < 100 {
		t.Fatalf("%d files, %d sections decoded: the files are not where the test looks", len(files), sections)
	}
	t.Logf("%d sections of %d files found in the reference", sections, len(files))
}
