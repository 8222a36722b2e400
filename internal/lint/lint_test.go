// Package lint holds the house rules as tests.
package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Core packages read time only through a clock.Clock (so tests can replace
// it) and use no global random source; a line may opt out with a
// "lint:allow-time" comment saying why.
var core = []string{"runtime", "state", "timer", "watermark", "window", "keygroup", "checkpoint", "asyncio", "ordering", "internal/retry"}

var forbidden = regexp.MustCompile(`\btime\.(Now|Since|Until|NewTimer|NewTicker|After|AfterFunc|Tick)\(|\brand\.(Int|Intn|IntN|Int64|Int64N|Float64|Perm|Shuffle)\(`)

func TestCorePackagesUseTheClock(t *testing.T) {
	for _, dir := range core {
		root := filepath.Join("..", "..", dir)
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if strings.Contains(filepath.ToSlash(path), "/experiment/") {
				return nil // experiments measure wall-clock time on purpose
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(data), "\n") {
				code, _, _ := strings.Cut(line, "//")
				if forbidden.MatchString(code) && !strings.Contains(line, "lint:allow-time") {
					t.Errorf("%s:%d: %s (use the job's clock.Clock, or add a lint:allow-time comment saying why)", path, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
