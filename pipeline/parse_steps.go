package pipeline

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

var stepKinds = []string{"filter", "map", "keyBy", "sort", "window", "agent", "tee"}

func (d *dec) steps(n ast.Node, what string) []StepSpec {
	var out []StepSpec
	d.list(n, what, false, func(i int, sn ast.Node) {
		out = append(out, d.step(fmt.Sprintf("%s[%d]", what, i), sn))
	})
	return out
}

// outputSpec reads a named output: a sink ({stdout: {}}), or the long form
// {steps: [...], sink: {...}}.
func (d *dec) outputSpec(k, n ast.Node, what string) *OutputSpec {
	o := &OutputSpec{Pos: d.pos(k)}
	kvs, _ := d.entries(n, what)
	long := false
	for _, kv := range kvs {
		if name, _, ok := d.keyOf(kv); ok && (name == "steps" || name == "sink") {
			long = true
		}
	}
	if !long || d.ref != nil { // a reference run records both forms
		o.Sink = d.sink(k, n, what)
		if d.ref == nil {
			return o
		}
	}
	d.object(n, what,
		field{name: "steps", accepts: "a list of steps", def: "none", doc: "the output's own steps",
			fn: func(at string, _, v ast.Node) { o.Steps = d.steps(v, at) }},
		field{name: "sink", required: true, accepts: "a mapping", doc: "the output's sink",
			fn: func(at string, k, v ast.Node) { o.Sink = d.sink(k, v, at) }},
	)
	if o.Sink == nil {
		o.Sink = &SinkSpec{Pos: o.Pos, Stdout: true}
	}
	return o
}

// step reads one step: exactly one kind, its name and deadLetters.
func (d *dec) step(what string, n ast.Node) StepSpec {
	st := StepSpec{Pos: d.pos(n)}
	kinds := 0
	set := func(kind string) {
		kinds++
		if st.Kind == "" {
			st.Kind = kind
		}
	}
	ok := d.object(n, what,
		field{name: "name", accepts: "an operator name", def: "the kind, numbered from the second", doc: "the operator's name and UID (savepoints restore by it)",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "an operator name", &st.Name) }},
		field{name: "deadLetters", accepts: "the name of an output", def: "`source.deadLetters`", doc: "filter, map and agent steps: output of the records the step fails on",
			fn: func(at string, _, v ast.Node) {
				st.DeadLettersPos = d.pos(v)
				d.nonEmpty(v, at, "the name of an output", &st.DeadLetters)
			}},
		field{name: "filter", accepts: "an expression", doc: "keep the records for which it is true (false or null: dropped; else a dead letter)",
			fn: func(at string, k, v ast.Node) {
				set("filter")
				st.Pos = d.pos(k)
				if s, ok := scalarText(v); ok && strings.TrimSpace(s) != "" {
					st.Filter, st.FilterPos = s, exprPos(d.pos(v), v)
				} else {
					d.errf(v, "%s: got %s, want an expression returning a bool, such as kind == \"order\"", at, describe(v))
				}
			}},
		field{name: "map", accepts: "`{set, drop}`", doc: "a new record: the input's fields, `set` fields computed from the input, `drop` fields removed",
			fn: func(at string, k, v ast.Node) {
				set("map")
				st.Pos = d.pos(k)
				m := &MapSpec{Set: map[string]string{}, SetPos: map[string]Pos{}}
				st.Map = m
				d.object(v, at,
					field{name: "set", accepts: "field: expression", def: "none", doc: "FIELD: EXPR, computed from the input",
						fn: func(at string, _, v ast.Node) { d.exprMap(v, at, m.Set, m.SetPos) }},
					field{name: "drop", accepts: "a list of strings", def: "none", doc: "fields removed",
						fn: func(at string, _, v ast.Node) { d.strings(v, at, &m.Drop, nil) }},
				)
				if len(m.Set) == 0 && len(m.Drop) == 0 {
					d.errf(k, "%s: want set (field: expression) and/or drop (a list of fields)", at)
				}
			}},
		field{name: "keyBy", accepts: "a field path", doc: "keys the stream by the field's value; must be followed by `sort`, `window` or `agent`",
			fn: func(at string, k, v ast.Node) {
				set("keyBy")
				st.Pos = d.pos(k)
				if d.nonEmpty(v, at, "a field path such as customer", &st.KeyBy) {
					if _, err := parseFieldPath(st.KeyBy); err != nil {
						d.errf(v, "%s: %v", at, err)
					}
				}
			}},
		field{name: "sort", accepts: "`{violations, tiebreak}`", doc: "emit each key's records in event-time order, held until the watermark passes them",
			fn: func(at string, k, v ast.Node) {
				set("sort")
				st.Pos = d.pos(k)
				so := &SortSpec{}
				st.Sort = so
				d.object(v, at,
					field{name: "violations", accepts: "the name of an output", def: "none", doc: "also gets every record that arrived behind the watermark",
						fn: func(at string, _, v ast.Node) {
							so.ViolationsPos = d.pos(v)
							d.nonEmpty(v, at, "the name of an output", &so.Violations)
						}},
					field{name: "tiebreak", accepts: "one or two expressions", def: "none", doc: "numbers that order records with equal timestamps",
						fn: func(at string, _, v ast.Node) {
							d.list(v, at, false, func(j int, e ast.Node) {
								if s, ok := scalarText(e); ok {
									so.Tiebreak = append(so.Tiebreak, s)
									so.TiebreakPos = append(so.TiebreakPos, exprPos(d.pos(e), e))
								} else {
									d.errf(e, "%s.sort.tiebreak[%d]: got %s, want an expression returning a number", what, j, describe(e))
								}
							})
							if len(so.Tiebreak) > 2 {
								d.errf(v, "%s: %d expressions; want one or two (numbers, compared in order)", at, len(so.Tiebreak))
							}
						}},
				)
			}},
		field{name: "window", accepts: "a mapping", doc: "a keyed window aggregation", fn: func(at string, k, v ast.Node) {
			set("window")
			st.Pos = d.pos(k)
			st.Window = d.window(k, v, at)
		}},
		field{name: "tee", accepts: "the name of an output", doc: "every record also goes to the output (a branch)", fn: func(at string, k, v ast.Node) {
			set("tee")
			st.Pos = d.pos(k)
			d.nonEmpty(v, at, "the name of an output that also receives every record", &st.Tee)
		}},
		field{name: "agent", accepts: "a mapping", doc: "weir's agent operator, per key (agents.md)", fn: func(at string, k, v ast.Node) {
			set("agent")
			st.Pos = d.pos(k)
			st.Agent = d.agent(k, v, at)
		}},
	)
	if ok && kinds != 1 {
		d.errf(n, "%s: want exactly one of %s (got %d)", what, strings.Join(stepKinds, ", "), kinds)
	}
	if kinds == 1 && st.DeadLetters != "" && !failsPerRecord(st.Kind) {
		d.errAt(st.DeadLettersPos, "%s.deadLetters: a %s step never fails on a record; deadLetters is for filter, map and agent steps", what, st.Kind)
	}
	return st
}

var aggRE = regexp.MustCompile(`^\s*(count|sum|min|max|avg|first|last)\s*(?:\(\s*([^()\s]*)\s*\))?\s*$`)

// window reads a window step.
func (d *dec) window(k, n ast.Node, what string) *WindowSpec {
	w := &WindowSpec{}
	types := 0
	ok := d.object(n, what,
		field{name: "tumbling", accepts: "a duration > 0", def: "one of three", doc: "tumbling windows of this size", fn: func(at string, _, v ast.Node) {
			types++
			w.Type = "tumbling"
			d.duration(v, at, true, &w.Size)
		}},
		field{name: "sliding", accepts: "`{size, slide}`", def: "one of three", doc: "sliding windows; `size` a multiple of `slide`",
			fn: func(at string, _, v ast.Node) {
				types++
				w.Type = "sliding"
				d.object(v, at,
					field{name: "size", required: true, accepts: "a duration > 0", doc: "the windows' size",
						fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &w.Size) }},
					field{name: "slide", required: true, accepts: "a duration > 0", doc: "the step between windows",
						fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &w.Slide) }},
				)
			}},
		field{name: "session", accepts: "`{gap}`", def: "one of three", doc: "session windows", fn: func(at string, _, v ast.Node) {
			types++
			w.Type = "session"
			d.object(v, at,
				field{name: "gap", required: true, accepts: "a duration > 0", doc: "a key's session ends after this long without records",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &w.Gap) }},
			)
		}},
		field{name: "offset", accepts: "a duration >= 0", def: "0", doc: "shifts tumbling and sliding windows (time zones)",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, false, &w.Offset) }},
		field{name: "allowedLateness", accepts: "a duration >= 0", def: "0", doc: "keep each window this long after it fires; a late record within it fires the window again with the updated result",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, false, &w.AllowedLateness) }},
		field{name: "late", accepts: "the name of an output", def: "none (counted, dropped)", doc: "output of the records too late for every window they belong to",
			fn: func(at string, _, v ast.Node) {
				w.LatePos = d.pos(v)
				d.nonEmpty(v, at, "the name of an output", &w.Late)
			}},
		field{name: "aggregate", required: true, accepts: "FIELD: count, sum(F), min(F), max(F), avg(F), first(F) or last(F)", doc: "the output fields",
			fn: func(at string, _, v ast.Node) {
				kvs, _ := d.entries(v, at)
				for _, kv := range kvs {
					name, kn, ok := d.keyOf(kv)
					if !ok {
						continue
					}
					av := d.unwrap(kv.Value)
					s, ok := scalarText(av)
					m := aggRE.FindStringSubmatch(s)
					if !ok || m == nil || (m[1] == "count") != (m[2] == "") {
						d.errf(av, "%s.aggregate.%s: %q: want count, or one of sum, min, max, avg, first, last of a field, such as sum(amount)", what, name, s)
						continue
					}
					if m[2] != "" {
						if _, err := parseFieldPath(m[2]); err != nil {
							d.errf(av, "%s.aggregate.%s: %v", what, name, err)
							continue
						}
					}
					w.Aggregates = append(w.Aggregates, AggregateSpec{Pos: d.pos(kn), Name: name, Fn: m[1], Field: m[2]})
				}
				if len(kvs) == 0 {
					d.errf(v, "%s: empty; want output fields such as {events: count, amount: sum(amount)}", at)
				}
			}},
	)
	if ok && types != 1 {
		d.errf(k, "%s: want exactly one of tumbling (a size), sliding ({size, slide}), session ({gap}) (got %d)", what, types)
	}
	if w.Type == "sliding" && w.Slide > 0 && w.Size > 0 && w.Size%w.Slide != 0 {
		d.errf(k, "%s.sliding: size %v is not a multiple of slide %v", what, w.Size, w.Slide)
	}
	if w.Type == "session" && w.Offset != 0 {
		d.errf(k, "%s: offset applies to tumbling and sliding windows only", what)
	}
	return w
}
