package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve: a snapshot directory resolves to itself; the directory
// holding chk-N to its newest complete checkpoint, skipping one without
// its manifest; an empty or missing directory is ErrNoSnapshot naming what
// was looked for. The job name written with a snapshot reads back.
func TestResolve(t *testing.T) {
	base := t.TempDir()
	for id := int64(3); id <= 4; id++ {
		s := sample(id)
		s.Job, s.Origin = "orders", "/sp/1"
		if _, err := Write(Dir(base, id), s); err != nil {
			t.Fatal(err)
		}
	}
	// Checkpoint 5 crashed before its manifest.
	os.MkdirAll(Dir(base, 5), 0o755)
	os.WriteFile(filepath.Join(Dir(base, 5), "op-0000-sub-0000.bin"), []byte("x"), 0o644)
	for loc, want := range map[string]string{base: Dir(base, 4), Dir(base, 3): Dir(base, 3)} {
		got, err := Resolve(loc)
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %s, %v; want %s", loc, got, err, want)
		}
	}
	s, err := Read(Dir(base, 4))
	if err != nil || s.Job != "orders" || s.Origin != "/sp/1" {
		t.Fatalf("Read: job %q origin %q, %v; want orders, /sp/1", s.Job, s.Origin, err)
	}
	for _, loc := range []string{t.TempDir(), filepath.Join(base, "missing"), Dir(base, 5)} {
		_, err := Resolve(loc)
		if !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), "chk-N") {
			t.Errorf("Resolve(%s): %v; want ErrNoSnapshot saying what it looked for", loc, err)
		}
	}
}
