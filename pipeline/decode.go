package pipeline

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Error is one problem in a pipeline file, at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Errors is every problem found in a pipeline file, in the order of their
// positions. Its Error is one line per problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// maxErrors bounds the problems reported for one file.
const maxErrors = 50

// dec walks the YAML syntax tree of one file. Every method records what is
// wrong at the node's position and carries on, so one run reports every
// problem; none panics on any input (P1).
type dec struct {
	file string
	errs Errors
	ref  *refMode // set: a reference run, recording the tables (reference.go)
	// onObject, when set, is told of every section decoded (a test's
	// check that the reference run reaches every section a file can have).
	onObject func(what string, fields []field)
}

func (d *dec) pos(n ast.Node) Pos {
	if n == nil {
		return Pos{File: d.file, Line: 1, Col: 1}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{File: d.file, Line: 1, Col: 1}
	}
	return Pos{File: d.file, Line: tk.Position.Line, Col: tk.Position.Column}
}

func (d *dec) errAt(p Pos, format string, args ...any) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
}

func (d *dec) errf(n ast.Node, format string, args ...any) { d.errAt(d.pos(n), format, args...) }

// unwrap strips anchors and tags; aliases are refused (they would let a
// small file expand without bound).
func (d *dec) unwrap(n ast.Node) ast.Node {
	for i := 0; i < 100 && n != nil; i++ {
		switch x := n.(type) {
		case *ast.AnchorNode:
			n = x.Value
		case *ast.TagNode:
			n = x.Value
		case *ast.AliasNode:
			d.errf(n, "YAML aliases (*name) are not accepted; write the value out")
			return nil
		default:
			return n
		}
	}
	return n
}

// describe names a node's YAML type for messages.
func describe(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "nothing (null)"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "a " + n.Type().String()
}

// field is one entry of a section's table: a key a mapping accepts, what
// its value may be, whether it is required, its default and one line of
// description. The parser decodes and checks the key with fn, and the key
// reference of docs/pipelines.md is generated from the same tables
// (reference.go), so the two cannot drift.
type field struct {
	name     string
	required bool
	accepts  string // its type or accepted values, for the reference
	def      string // its default, for the reference ("" when none)
	doc      string // one line, for the reference
	// fn decodes and checks the value; at is the key's path for messages
	// (keyPath).
	fn func(at string, key, value ast.Node)
}

// keyPath is the path of key name in the mapping what, as messages name
// it: "job.checkpoint" and "interval" give "job.checkpoint.interval"; the
// top level ("pipeline") names its keys alone.
func keyPath(what, name string) string {
	if what == "pipeline" {
		return name
	}
	return what + "." + name
}

// entries returns a mapping's key/value pairs, or nil and false (with an
// error) when n is not a mapping. A null counts as an empty mapping.
func (d *dec) entries(n ast.Node, what string) ([]*ast.MappingValueNode, bool) {
	if d.ref != nil {
		return []*ast.MappingValueNode{refEntry()}, true
	}
	n = d.unwrap(n)
	switch x := n.(type) {
	case *ast.MappingNode:
		return x.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{x}, true
	case nil, *ast.NullNode:
		return nil, true
	}
	d.errf(n, "%s: got %s, want a mapping", what, describe(n))
	return nil, false
}

// keyOf returns a mapping entry's key as a string.
func (d *dec) keyOf(kv *ast.MappingValueNode) (string, ast.Node, bool) {
	k := d.unwrap(kv.Key)
	if _, ok := k.(*ast.MergeKeyNode); ok {
		d.errf(k, "merge keys (<<) are not accepted; write the keys out")
		return "", k, false
	}
	switch x := k.(type) {
	case *ast.StringNode:
		return x.Value, k, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return k.GetToken().Value, k, true
	case *ast.MappingKeyNode:
		d.errf(k, "complex mapping keys (?) are not accepted; want a plain name")
		return "", k, false
	}
	d.errf(k, "a key must be a plain name, got %s", describe(k))
	return "", k, false
}

// object decodes mapping n with the accepted fields: an unknown key, a
// duplicate key or a missing required key is an error naming what is
// accepted. It returns false if n is not a mapping.
func (d *dec) object(n ast.Node, what string, fields ...field) bool {
	if d.ref != nil {
		if d.ref.record(what, fields) {
			for _, f := range fields {
				f.fn(keyPath(what, f.name), refNull(), refNull())
			}
		}
		return true
	}
	if d.onObject != nil {
		d.onObject(what, fields)
	}
	kvs, ok := d.entries(n, what)
	if !ok {
		return false
	}
	seen := map[string]bool{}
	at := n // missing keys are reported at the mapping's first key
	if len(kvs) > 0 {
		at = kvs[0].Key
	}
	for _, kv := range kvs {
		name, kn, ok := d.keyOf(kv)
		if !ok {
			continue
		}
		if seen[name] {
			d.errf(kn, "%s: key %q given twice", what, name)
			continue
		}
		seen[name] = true
		var f *field
		for i := range fields {
			if fields[i].name == name {
				f = &fields[i]
			}
		}
		if f == nil {
			d.errf(kn, "%s: unknown key %q; accepted: %s", what, name, acceptedKeys(fields))
			continue
		}
		if v := d.unwrap(kv.Value); v != nil || kv.Value == nil {
			f.fn(keyPath(what, name), kn, v)
		}
	}
	for _, f := range fields {
		if f.required && !seen[f.name] {
			d.errf(at, "%s: missing key %q (accepted: %s)", what, f.name, acceptedKeys(fields))
		}
	}
	return true
}

func acceptedKeys(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// scalarText returns the text of a scalar node and whether it is one.
func scalarText(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		if x.Value != nil {
			return x.Value.Value, true
		}
		return "", true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return n.GetToken().Value, true
	}
	return "", false
}

// str reads a string, expanding ${VAR} and ${VAR:-default} from the
// environment (expressions are read raw, never expanded).
func (d *dec) str(n ast.Node, what string, dst *string) bool {
	switch x := n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(x)
		v, err := expandEnv(s)
		if err != nil {
			d.errf(n, "%s: %v", what, err)
			return false
		}
		*dst = v
		return true
	}
	d.errf(n, "%s: got %s, want a string", what, describe(n))
	return false
}

// nonEmpty is str that also refuses "".
func (d *dec) nonEmpty(n ast.Node, what, example string, dst *string) bool {
	if !d.str(n, what, dst) {
		return false
	}
	if strings.TrimSpace(*dst) == "" {
		d.errf(n, "%s: empty; want %s", what, example)
		return false
	}
	return true
}

func (d *dec) integer(n ast.Node, what string, lo, hi int64, dst *int64) bool {
	x, ok := n.(*ast.IntegerNode)
	if !ok {
		d.errf(n, "%s: got %s, want an integer from %d to %d", what, describe(n), lo, hi)
		return false
	}
	var v int64
	switch i := x.Value.(type) {
	case int64:
		v = i
	case uint64:
		if i > math.MaxInt64 {
			v = math.MaxInt64
		} else {
			v = int64(i)
		}
	default:
		d.errf(n, "%s: got %s, want an integer from %d to %d", what, describe(n), lo, hi)
		return false
	}
	if v < lo || v > hi {
		d.errf(n, "%s: %d is out of range; want an integer from %d to %d", what, v, lo, hi)
		return false
	}
	*dst = v
	return true
}

func (d *dec) intField(n ast.Node, what string, lo, hi int64, dst *int) {
	var v int64
	if d.integer(n, what, lo, hi, &v) {
		*dst = int(v)
	}
}

func (d *dec) boolean(n ast.Node, what string, dst *bool) {
	x, ok := n.(*ast.BoolNode)
	if !ok {
		d.errf(n, "%s: got %s, want true or false", what, describe(n))
		return
	}
	*dst = x.Value
}

// duration reads a Go duration string such as 500ms, 10s, 1h30m; positive
// says 0 is refused.
func (d *dec) duration(n ast.Node, what string, positive bool, dst *time.Duration) {
	s, ok := scalarText(n)
	if !ok {
		d.errf(n, "%s: got %s, want a duration such as 500ms, 10s or 1h", what, describe(n))
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, ierr := strconv.ParseInt(s, 10, 64); ierr == nil && s != "0" {
			d.errf(n, "%s: %q has no unit; want a duration such as 500ms, 10s or 1h", what, s)
		} else {
			d.errf(n, "%s: %q is not a duration; want a number with a unit (ms, s, m, h), such as 500ms, 10s or 1h", what, s)
		}
		return
	}
	if v < 0 || (positive && v == 0) {
		want := ">= 0"
		if positive {
			want = "> 0"
		}
		d.errf(n, "%s: %v: want a duration %s", what, v, want)
		return
	}
	if v%time.Millisecond != 0 {
		d.errf(n, "%s: %v: want a whole number of milliseconds", what, v)
		return
	}
	*dst = v
}

// list calls fn for every element of sequence n; a single scalar counts
// as a list of one when single is true.
func (d *dec) list(n ast.Node, what string, single bool, fn func(i int, n ast.Node)) {
	if d.ref != nil {
		fn(0, refNull())
		return
	}
	switch x := n.(type) {
	case *ast.SequenceNode:
		for i, v := range x.Values {
			if u := d.unwrap(v); u != nil {
				fn(i, u)
			}
		}
		return
	case *ast.StringNode:
		if single {
			fn(0, n)
			return
		}
	}
	d.errf(n, "%s: got %s, want a list", what, describe(n))
}

func (d *dec) strings(n ast.Node, what string, dst *[]string, pos *[]Pos) {
	d.list(n, what, true, func(i int, v ast.Node) {
		var s string
		if d.nonEmpty(v, fmt.Sprintf("%s[%d]", what, i), "a non-empty string", &s) {
			*dst = append(*dst, s)
			if pos != nil {
				*pos = append(*pos, d.pos(v))
			}
		}
	})
}

// anyValue converts a YAML value to plain Go values (for JSON Schemas).
func (d *dec) anyValue(n ast.Node, depth int) any {
	n = d.unwrap(n)
	if depth > 32 {
		d.errf(n, "nested more than 32 levels deep")
		return nil
	}
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.MappingNode, *ast.MappingValueNode:
		kvs, _ := d.entries(x, "value")
		m := map[string]any{}
		for _, kv := range kvs {
			if k, _, ok := d.keyOf(kv); ok {
				m[k] = d.anyValue(kv.Value, depth+1)
			}
		}
		return m
	case *ast.SequenceNode:
		out := []any{}
		for _, v := range x.Values {
			out = append(out, d.anyValue(v, depth+1))
		}
		return out
	case *ast.IntegerNode:
		return x.Value
	case *ast.FloatNode:
		return x.Value
	case *ast.BoolNode:
		return x.Value
	}
	s, _ := scalarText(n)
	return s
}

// parseYAML parses src into its single document's body, reporting a
// syntax error at its position.
func (d *dec) parseYAML(src []byte) (body ast.Node) {
	// The YAML library is third-party code: should it panic on some input,
	// the file is reported as unreadable instead (P1).
	defer func() {
		if r := recover(); r != nil {
			d.errAt(Pos{File: d.file, Line: 1, Col: 1}, "YAML: the parser failed on this file (%v); check its syntax", r)
			body = nil
		}
	}()
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			p := Pos{File: d.file, Line: 1, Col: 1}
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				p.Line, p.Col = tk.Position.Line, tk.Position.Column
			}
			d.errAt(p, "YAML: %s", ye.GetMessage())
		} else {
			d.errAt(Pos{File: d.file, Line: 1, Col: 1}, "YAML: %v", err)
		}
		return nil
	}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			bodies = append(bodies, doc.Body)
		}
	}
	switch len(bodies) {
	case 0:
		d.errAt(Pos{File: d.file, Line: 1, Col: 1}, "the file is empty; want a mapping with at least source and sink")
		return nil
	case 1:
		return bodies[0]
	}
	d.errf(bodies[1], "more than one YAML document (---); want one pipeline per file")
	return nil
}

// quoted says whether a string node was written in quotes (its value then
// starts one column after the node's position).
func quoted(n ast.Node) bool {
	tk := n.GetToken()
	return tk != nil && (tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType)
}

// expandEnv replaces ${VAR} with the environment variable VAR (an error if
// it is unset) and ${VAR:-default} with VAR, or default when VAR is unset
// or empty. A $ not followed by { is kept.
func expandEnv(s string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed ${ in %q; want ${VAR} or ${VAR:-default}", s)
		}
		ref := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envNameRE.MatchString(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name; want ${VAR} or ${VAR:-default}", ref, name)
		}
		v, ok := os.LookupEnv(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set; set it or give a default, ${%s:-default}", name, name)
		}
		b.WriteString(v)
		s = s[i+j+1:]
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
