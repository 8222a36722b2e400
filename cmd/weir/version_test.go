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
