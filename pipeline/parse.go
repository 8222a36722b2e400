package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// ParseFile reads and parses the pipeline file at path (Parse).
func ParseFile(path string) (*Spec, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return Parse(path, src)
}

// Parse parses and checks a pipeline file: its structure (every key known,
// every value of the right type and range, every required key there), its
// expressions (compiled), its named outputs (each declared and used) and,
// with an embedded broker, its topics. The error, if any, is Errors: every
// problem with its file:line:column. Parse does no I/O and never panics.
func Parse(file string, src []byte) (*Spec, error) {
	return parse(&dec{file: file}, src)
}

func parse(d *dec, src []byte) (*Spec, error) {
	file := d.file
	s := &Spec{File: file, Outputs: map[string]*OutputSpec{}}
	if body := d.parseYAML(src); body != nil {
		d.pipeline(body, s)
		if len(d.errs) == 0 {
			d.check(s)
		}
		if len(d.errs) == 0 {
			resolvePaths(s, filepath.Dir(file))
		}
	}
	if len(d.errs) > 0 {
		errs := d.errs
		sort.SliceStable(errs, func(i, j int) bool {
			a, b := errs[i].Pos, errs[j].Pos
			return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
		})
		return nil, errs
	}
	return s, nil
}

func (d *dec) pipeline(n ast.Node, s *Spec) {
	d.object(n, "pipeline",
		field{name: "name", accepts: "a name such as orders-by-customer", def: "the file's name", doc: "the pipeline's name: its identity in checkpoints, the summary, the prefix of Kafka transactional ids",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, "name", "a name such as orders-by-customer", &s.Name) }},
		field{name: "job", accepts: "a mapping", def: "none", doc: "job settings", fn: func(at string, k, v ast.Node) { d.job(k, v, &s.Job) }},
		field{name: "kafka", accepts: "a mapping", def: "none", doc: "the Kafka cluster; required by any Kafka part",
			fn: func(at string, k, v ast.Node) { s.Kafka = d.kafka(k, v) }},
		field{name: "source", required: true, accepts: "a mapping", doc: "where records come from: exactly one kind",
			fn: func(at string, k, v ast.Node) { d.source(k, v, &s.Source) }},
		field{name: "steps", accepts: "a list of steps", def: "none", doc: "the steps, applied in order",
			fn: func(at string, _, v ast.Node) { s.Steps = d.steps(v, "steps") }},
		field{name: "sink", required: true, accepts: "a mapping", doc: "where the records leaving the last step go: exactly one kind",
			fn: func(at string, k, v ast.Node) { s.Sink = d.sink(k, v, "sink") }},
		field{name: "outputs", accepts: "NAME: SINK, or NAME: {steps, sink}", def: "none", doc: "named outputs for late records, dead letters, sort violations and tee branches; each declared one is used",
			fn: func(at string, _, v ast.Node) {
				kvs, _ := d.entries(v, "outputs")
				for _, kv := range kvs {
					name, kn, ok := d.keyOf(kv)
					if !ok {
						continue
					}
					if !validName(name) {
						d.errf(kn, "outputs: name %q: want letters, digits, '-' and '_'", name)
						continue
					}
					if s.Outputs[name] != nil {
						d.errf(kn, "outputs: %q given twice", name)
						continue
					}
					s.Outputs[name] = d.outputSpec(kn, d.unwrap(kv.Value), "outputs."+name)
				}
			}},
	)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func (d *dec) oneOf(n ast.Node, what string, dst *string, accepted ...string) {
	var s string
	if !d.str(n, what, &s) {
		return
	}
	for _, a := range accepted {
		if s == a {
			*dst = s
			return
		}
	}
	d.errf(n, "%s: %q: want one of %s", what, s, strings.Join(accepted, ", "))
}

// resolvePaths makes the relative paths of s relative to dir, the pipeline
// file's directory (URLs, with "://", are kept).
func resolvePaths(s *Spec, dir string) {
	fix := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) && !strings.Contains(*p, "://") {
			*p = filepath.Join(dir, *p)
		}
	}
	fix(&s.Job.CheckpointDir)
	fix(&s.Job.StateDir)
	fix(&s.Job.RestoreFrom)
	if s.Kafka != nil {
		resolveSecurityPaths(&s.Kafka.Security, fix)
	}
	resolveFormatPaths(s, fix)
	if s.Kafka != nil && s.Kafka.Embedded != nil {
		fix(&s.Kafka.Embedded.Dir)
		for i := range s.Kafka.Embedded.Produce {
			fix(&s.Kafka.Embedded.Produce[i].File)
		}
	}
	if h := s.Source.HTTP; h != nil {
		fix(&h.TokenFile)
	}
	if f := s.Source.File; f != nil {
		for i := range f.Paths {
			fix(&f.Paths[i])
		}
	}
	sink := func(k *SinkSpec) {
		if k != nil && k.File != nil {
			fix(&k.File.Dir)
			fix(&k.File.Path)
		}
		if k != nil && k.Parquet != nil {
			fix(&k.Parquet.Path)
		}
	}
	steps := func(ss []StepSpec) {
		for _, st := range ss {
			if st.Agent != nil && st.Agent.Store != nil {
				fix(&st.Agent.Store.WALDir)
			}
		}
	}
	sink(s.Sink)
	steps(s.Steps)
	for _, o := range s.Outputs {
		sink(o.Sink)
		steps(o.Steps)
	}
}
