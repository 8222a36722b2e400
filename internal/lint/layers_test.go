package lint

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/weirproject/weir"

// layer is one row of the layer table of docs/architecture.md.
type layer struct {
	name     string
	packages []string // paths relative to the module ("weir" is the root); "x/..." is a pattern
	deps     []string // layer names and package paths or patterns
	any      bool     // "everything"
}

var (
	backquoted    = regexp.MustCompile("`([^`]+)`")
	parenthesised = regexp.MustCompile(`\([^)]*\)`)
)

// readLayers parses the table under "## Layers" in docs/architecture.md.
func readLayers(t *testing.T) []layer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "| layer | packages | depends on |")
	if !ok {
		t.Fatal(`docs/architecture.md has no "| layer | packages | depends on |" table`)
	}
	var layers []layer
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md layer row %q: want 3 cells, got %d", line, len(cells))
		}
		l := layer{name: strings.TrimSpace(cells[0])}
		tokens := func(cell string) []string {
			var out []string
			for _, m := range backquoted.FindAllStringSubmatch(parenthesised.ReplaceAllString(cell, ""), -1) {
				out = append(out, m[1])
			}
			return out
		}
		l.packages = tokens(cells[1])
		l.deps = tokens(cells[2])
		l.any = strings.TrimSpace(cells[2]) == "everything"
		layers = append(layers, l)
	}
	if len(layers) == 0 {
		t.Fatal("docs/architecture.md: empty layer table")
	}
	return layers
}

// matches reports whether package path p matches pattern pat ("x" or "x/...").
func matches(pat, p string) bool {
	if base, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pat
}

// modulePackages returns, per package of the module (relative path, "weir"
// for the root), the module packages its non-test files import.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // a module of its own (deploy/helm), not weir's
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = "weir"
		}
		if strings.HasSuffix(name, "_test.go") {
			if _, ok := pkgs[pkg]; !ok {
				pkgs[pkg] = nil // a package of tests only is a package too
			}
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if _, ok := pkgs[pkg]; !ok {
			pkgs[pkg] = nil
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case ip == module:
				pkgs[pkg] = append(pkgs[pkg], "weir")
			case strings.HasPrefix(ip, module+"/"):
				pkgs[pkg] = append(pkgs[pkg], strings.TrimPrefix(ip, module+"/"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestLayers enforces the layer table of docs/architecture.md: every
// package of the module is in exactly one layer, every package the table
// names exists, and a package imports (outside its tests) only packages of
// the layers and packages its layer's row names.
func TestLayers(t *testing.T) {
	for _, msg := range checkLayers(readLayers(t), modulePackages(t)) {
		t.Error(msg)
	}
}

// TestLayersCatchAViolation checks that the check can fail: with state in a
// layer that may import nothing, its import of keygroup is reported, and so
// is a package in no layer.
func TestLayersCatchAViolation(t *testing.T) {
	pkgs := modulePackages(t)
	if !slices.Contains(pkgs["state"], "keygroup") {
		t.Fatalf("state imports %v; this test expects keygroup among them", pkgs["state"])
	}
	layers := []layer{
		{name: "base", packages: []string{"keygroup"}},
		{name: "strict", packages: []string{"state"}},
	}
	msgs := checkLayers(layers, map[string][]string{"state": pkgs["state"], "keygroup": nil, "timer": nil})
	var sawImport, sawNoLayer bool
	for _, m := range msgs {
		sawImport = sawImport || strings.Contains(m, "package state (layer \"strict\") imports keygroup")
		sawNoLayer = sawNoLayer || strings.Contains(m, "package timer is in no layer")
	}
	if !sawImport || !sawNoLayer {
		t.Fatalf("violations not reported: %q", msgs)
	}
	if !matches("connector/...", "connector/kafka") || matches("connector/...", "connectors") || !matches("state", "state") {
		t.Fatal("package patterns match wrongly")
	}
}

// checkLayers returns the violations of layers by pkgs (package -> module
// packages it imports).
func checkLayers(layers []layer, pkgs map[string][]string) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	byName := map[string]*layer{}
	for i := range layers {
		byName[layers[i].name] = &layers[i]
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	slices.Sort(names)
	layerOf := map[string]*layer{}
	for _, p := range names {
		var in []string
		for i := range layers {
			for _, pat := range layers[i].packages {
				if matches(pat, p) && layerOf[p] != &layers[i] {
					layerOf[p] = &layers[i]
					in = append(in, layers[i].name)
				}
			}
		}
		switch len(in) {
		case 0:
			errorf("package %s is in no layer of docs/architecture.md: add it to the row of the layer it belongs to", p)
		case 1:
		default:
			errorf("package %s is in layers %q of docs/architecture.md: keep it in one row", p, in)
		}
	}
	exists := func(pat string) bool {
		for _, p := range names {
			if matches(pat, p) {
				return true
			}
		}
		return false
	}
	for _, l := range layers {
		for _, pat := range l.packages {
			if !exists(pat) {
				errorf("docs/architecture.md layer %q names package %s, which does not exist: remove it from the table", l.name, pat)
			}
		}
		for _, d := range l.deps {
			if byName[d] == nil && !exists(d) {
				errorf("docs/architecture.md layer %q depends on %q, which is neither a layer nor a package", l.name, d)
			}
		}
	}
	allowed := func(l *layer, q string) bool {
		if l.any || layerOf[q] == nil {
			return true // q's own layer is reported above
		}
		for _, d := range l.deps {
			if dl := byName[d]; dl != nil {
				if dl == layerOf[q] {
					return true
				}
			} else if matches(d, q) {
				return true
			}
		}
		return false
	}
	for _, p := range names {
		l := layerOf[p]
		if l == nil {
			continue
		}
		for _, q := range slices.Compact(slices.Sorted(slices.Values(pkgs[p]))) {
			if q != p && !allowed(l, q) {
				errorf("package %s (layer %q) imports %s (layer %q), which its row of the layer table in docs/architecture.md does not allow: move the code, or fix the table if the import is right",
					p, l.name, q, layerOf[q].name)
			}
		}
	}
	return out
}
