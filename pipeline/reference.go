package pipeline

//go:generate go test . -run TestReferenceUpToDate -update

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// The key reference of docs/pipelines.md is generated from the parser's own
// tables: reference runs the decoder in reference mode, where object
// records each section's table and calls every key's fn with a null value,
// so the nested sections' tables are recorded in turn (a list is entered
// once, a map of names once with the key NAME). What the reference lists is
// therefore exactly what Parse accepts; TestReferenceUpToDate fails when
// docs/pipelines.md and the tables differ, and
//
//	go test ./pipeline/ -run TestReferenceUpToDate -update
//
// rewrites the page's reference section (go generate ./pipeline/ runs it).

// refMode records the sections of a reference run.
type refMode struct {
	sections []*refSection
	byPath   map[string][]*refSection // a path can have two tables: outputs.NAME
}

// refSection is one recorded table: the paths it was reached at (list
// indexes as []) and its keys.
type refSection struct {
	paths  []string
	fields []field
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// record notes the table of the section at path what and says whether it
// is new (a table is entered once at a path, so recursion ends).
func (r *refMode) record(what string, fields []field) bool {
	p := indexRE.ReplaceAllString(what, "[]")
	sig := tableSignature(fields)
	for _, s := range r.byPath[p] {
		if tableSignature(s.fields) == sig {
			return false
		}
	}
	s := &refSection{paths: []string{p}, fields: fields}
	r.byPath[p] = append(r.byPath[p], s)
	if len(fields) > 0 { // {} (stdout, json) is said by its key
		r.sections = append(r.sections, s)
	}
	return true
}

func refNull() ast.Node { return &ast.NullNode{BaseNode: &ast.BaseNode{}} }

// refEntry is the one entry a reference run sees in a map of names.
func refEntry() *ast.MappingValueNode {
	return &ast.MappingValueNode{
		BaseNode: &ast.BaseNode{},
		Key:      &ast.StringNode{BaseNode: &ast.BaseNode{}, Value: "NAME"},
		Value:    refNull(),
	}
}

// reference returns the key reference: one table per section of the file,
// in the order the parser meets them, as Markdown. Sections whose tables
// are the same (the sink and a named output's sink, say) are one table
// naming every path.
func reference() string {
	r := referenceRun()
	var merged []*refSection
	seen := map[string]*refSection{}
	for _, s := range r.sections {
		sig := tableSignature(s.fields)
		if m := seen[sig]; m != nil {
			m.paths = append(m.paths, s.paths...)
			continue
		}
		seen[sig] = s
		merged = append(merged, s)
	}
	var b strings.Builder
	for i, s := range merged {
		if i > 0 {
			b.WriteString("\n")
		}
		heads := make([]string, len(s.paths))
		for j, p := range s.paths {
			if p == "pipeline" {
				p = "top level"
			}
			heads[j] = "`" + p + "`"
		}
		if s.paths[0] == "pipeline" {
			heads[0] = "top level"
		}
		fmt.Fprintf(&b, "#### %s\n\n", strings.Join(heads, ", "))
		b.WriteString("| key | accepts | required | default | what |\n|---|---|---|---|---|\n")
		for _, f := range s.fields {
			req := "no"
			if f.required {
				req = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.name, cell(f.accepts), req, cell(f.def), cell(f.doc))
		}
	}
	return b.String()
}

// referenceRun runs the decoder over the whole file in reference mode.
func referenceRun() *refMode {
	r := &refMode{byPath: map[string][]*refSection{}}
	d := &dec{file: "reference", ref: r}
	d.pipeline(refNull(), &Spec{Outputs: map[string]*OutputSpec{}})
	return r
}

func tableSignature(fields []field) string {
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "%s\x00%v\x00%s\x00%s\x00%s\x01", f.name, f.required, f.accepts, f.def, f.doc)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Markers around the generated reference in docs/pipelines.md.
const (
	referenceBegin = "<!-- BEGIN GENERATED KEY REFERENCE: pipeline/reference.go; do not edit by hand, run `go generate ./pipeline/` -->"
	referenceEnd   = "<!-- END GENERATED KEY REFERENCE -->"
)

// replaceReference returns doc with the text between the markers replaced
// by reference (an error when the markers are missing).
func replaceReference(doc string) (string, error) {
	i := strings.Index(doc, referenceBegin)
	j := strings.Index(doc, referenceEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("pipeline: the markers of the key reference are missing: want a line %q and, after it, a line %q", referenceBegin, referenceEnd)
	}
	return doc[:i+len(referenceBegin)] + "\n\n" + reference() + "\n" + doc[j:], nil
}
