package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: `weir version` prints one line naming the version, commit
// and Go version; --json the same as an object; an argument is a usage
// error (exit 2).
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "weir ") || !strings.Contains(line, runtime.Version()) || strings.Count(line, "\n") != 0 {
		t.Fatalf("weir version printed %q: want one line with the version and %s", line, runtime.Version())
	}
	out.Reset()
	if code := run([]string{"version", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v struct{ Version, Commit, Go, Platform string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || v.Commit == "" || v.Go != runtime.Version() {
		t.Fatalf("weir version --json printed %q (%v): want version, commit and go", out.String(), err)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"version", "extra"}, &out, &errOut); code != 2 || out.Len() != 0 {
		t.Fatalf("weir version extra: exit %d, stdout %q: want exit 2 and nothing on stdout", code, out.String())
	}
}

// TestSavepointInspectFormatVersion: `weir savepoint inspect` names the
// snapshot's format version and the versions this weir reads, for the
// committed compatibility fixtures (pipeline/testdata/compat).
func TestSavepointInspectFormatVersion(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{"../../pipeline/testdata/compat/v1-savepoint-memory/savepoint", "savepoint 1  format version 1 (this weir reads 1 to "},
		{"../../pipeline/testdata/compat/v2-checkpoint-pebble/checkpoints/chk-000000000001", "checkpoint 1  format version 2 (this weir reads 1 to "},
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{"savepoint", "inspect", c.dir}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), c.want) {
			t.Errorf("weir savepoint inspect %s: exit %d, %q (%s); want a first line starting %q", c.dir, code, out.String(), errOut.String(), c.want)
		}
	}
}
