package state

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestBackendKindsSeparate enforces the split of the two kinds of backend
// (issue 15): the Pebble logic is in the files named pebble.go and
// pebble_*.go, and the other files (the memory backend, the state handles,
// the snapshot format, copy-on-write) reach it only through interfaces
// they declare (keyedStore, table, the handles' ext, frozenView). In the
// non-test files:
//
//   - no identifier outside the Pebble files names Pebble (contains
//     "pebble" in any case), and none refers to an unexported
//     package-level name (type, function, variable, constant) declared in
//     a Pebble file (the exported ones, such as Options, Open and
//     BackendMemory, are the API of both kinds);
//   - no struct has a field named pb (the old nil-means-memory pointer).
func TestBackendKindsSeparate(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	isPebble := func(name string) bool { return name == "pebble.go" || strings.HasPrefix(name, "pebble_") }
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	pebbleDecls := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
		if !isPebble(name) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && !ast.IsExported(d.Name.Name) {
					pebbleDecls[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if !ast.IsExported(sp.Name.Name) {
							pebbleDecls[sp.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.Name != "_" && !ast.IsExported(n.Name) {
								pebbleDecls[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	if len(pebbleDecls) < 10 {
		t.Fatalf("found only %d declarations in the Pebble files: the test would prove nothing", len(pebbleDecls))
	}
	var bad []string
	for name, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				for _, fl := range n.Fields.List {
					for _, id := range fl.Names {
						if id.Name == "pb" {
							bad = append(bad, fset.Position(id.Pos()).String()+": field pb")
						}
					}
				}
			case *ast.Ident:
				if isPebble(name) {
					return true
				}
				// n.Obj is nil for a name not declared in the file:
				// a package-level name of another file (or a field or
				// method name).
				if strings.Contains(strings.ToLower(n.Name), "pebble") || n.Obj == nil && pebbleDecls[n.Name] {
					bad = append(bad, fset.Position(n.Pos()).String()+": "+n.Name)
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
