package fsync

import (
	"os"
	"path/filepath"
	"testing"
)

// F2: the file holds the new data, no temporary file is left, and a
// directory that does not exist is an error that leaves nothing.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"first", "second, longer", ""} {
		if err := WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != data {
			t.Fatalf("read %q (%v), want %q", b, err, data)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries in the directory, want the file alone", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("a file in a missing directory was written")
	}
	if err := Dir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Dir of a missing directory returned nil")
	}
}
