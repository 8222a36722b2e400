// Package buildinfo says which weir a binary is: its version, the commit it
// was built from, the Go version and the build tags. `weir version` prints
// it, and `weir run --json` summaries and the dashboard carry it, so that a
// report or a savepoint can be traced to the code that produced it.
//
// The version and commit come from the linker when the build sets them
// (-ldflags "-X github.com/weirproject/weir/internal/buildinfo.version=v0.4.0
// -X github.com/weirproject/weir/internal/buildinfo.commit=abc123", as the
// container build does), else from the module and version-control
// information Go records in every binary (runtime/debug.ReadBuildInfo),
// else "devel" and "unknown".
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set by the linker (-X); empty otherwise.
var version, commit string

// Info describes the running binary.
type Info struct {
	// Version is the release ("v0.4.0") or "devel" for a build from a
	// working tree.
	Version string `json:"version"`
	// Commit is the version-control revision, with "+dirty" when the tree
	// had changes; "unknown" when the build recorded none.
	Commit string `json:"commit"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
	// Tags are the build tags (such as weir_cloud, which links the
	// object-store drivers); empty for a default build.
	Tags []string `json:"tags,omitempty"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

var (
	once sync.Once
	info Info
)

// Get returns the binary's Info.
func Get() Info {
	once.Do(func() { info = read(version, commit) })
	return info
}

func read(version, commit string) Info {
	i := Info{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		var rev string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "-tags":
				for t := range strings.SplitSeq(s.Value, ",") {
					if t = strings.TrimSpace(t); t != "" {
						i.Tags = append(i.Tags, t)
					}
				}
			}
		}
		if i.Commit == "" && rev != "" {
			i.Commit = rev
			if dirty {
				i.Commit += "+dirty"
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is the one-line form `weir version` prints.
func (i Info) String() string {
	s := "weir " + i.Version + " (commit " + i.Commit + ", " + i.Go + ", " + i.Platform
	if len(i.Tags) > 0 {
		s += ", tags " + strings.Join(i.Tags, ",")
	}
	return s + ")"
}
