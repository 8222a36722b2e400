package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestLinkerValuesWin(t *testing.T) {
	i := read("v1.2.3", "abc123")
	if i.Version != "v1.2.3" || i.Commit != "abc123" {
		t.Fatalf("got %+v: want the values set by the linker", i)
	}
	if i.Go != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("got %+v: want this runtime's Go version and platform", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "weir v1.2.3 (commit abc123, go") {
		t.Fatalf("String() = %q", s)
	}
}

func TestDefaults(t *testing.T) {
	// A test binary records no version control information and no module
	// version: the defaults say so rather than printing nothing.
	i := read("", "")
	if i.Version == "" || i.Commit == "" {
		t.Fatalf("got %+v: want a version and a commit, never empty", i)
	}
}
