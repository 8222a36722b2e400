package pipeline

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/internal/bytesize"
	"github.com/weirproject/weir/state"
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
	d := &dec{file: file}
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
	var haveSource bool
	d.object(n, "pipeline",
		field{"name", false, func(_, v ast.Node) { d.nonEmpty(v, "name", "a name such as orders-by-customer", &s.Name) }},
		field{"job", false, func(k, v ast.Node) { d.job(k, v, &s.Job) }},
		field{"kafka", false, func(k, v ast.Node) { s.Kafka = d.kafka(k, v) }},
		field{"source", true, func(k, v ast.Node) { haveSource = true; d.source(k, v, &s.Source) }},
		field{"steps", false, func(_, v ast.Node) { s.Steps = d.steps(v, "steps") }},
		field{"sink", true, func(k, v ast.Node) { s.Sink = d.sink(k, v, "sink") }},
		field{"outputs", false, func(_, v ast.Node) {
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
	_ = haveSource
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func (d *dec) job(k, n ast.Node, j *JobSpec) {
	j.Pos = d.pos(k)
	var cacheNode ast.Node
	defer func() {
		if cacheNode != nil && j.StateBackend != "pebble" {
			d.errf(cacheNode, "job.stateCache: only with stateBackend: pebble (the memory backend has no cache); remove it or set stateBackend: pebble")
		}
	}()
	d.object(n, "job",
		field{"parallelism", false, func(_, v ast.Node) { d.intField(v, "job.parallelism", 1, 32768, &j.Parallelism) }},
		field{"maxParallelism", false, func(_, v ast.Node) { d.intField(v, "job.maxParallelism", 1, 32768, &j.MaxParallelism) }},
		field{"autoWatermarkInterval", false, func(_, v ast.Node) {
			d.duration(v, "job.autoWatermarkInterval", true, &j.AutoWatermarkInterval)
		}},
		field{"checkpoint", false, func(_, v ast.Node) {
			d.object(v, "job.checkpoint",
				field{"interval", false, func(_, v ast.Node) { d.duration(v, "job.checkpoint.interval", true, &j.CheckpointInterval) }},
				field{"dir", true, func(_, v ast.Node) {
					j.CheckpointDirPos = d.pos(v)
					d.nonEmpty(v, "job.checkpoint.dir", "a directory (or storage URL) such as /tmp/weir-checkpoints", &j.CheckpointDir)
				}},
				field{"mode", false, func(_, v ast.Node) {
					d.oneOf(v, "job.checkpoint.mode", &j.CheckpointMode, "exactly-once", "at-least-once")
				}},
			)
		}},
		field{"stateBackend", false, func(_, v ast.Node) { d.oneOf(v, "job.stateBackend", &j.StateBackend, "memory", "pebble") }},
		field{"stateDir", false, func(_, v ast.Node) {
			j.StateDirPos = d.pos(v)
			d.nonEmpty(v, "job.stateDir", "a directory", &j.StateDir)
		}},
		field{"stateCache", false, func(_, v ast.Node) { cacheNode = v; d.stateCache(v, &j.StateCacheBytes) }},
		field{"restoreFrom", false, func(_, v ast.Node) {
			j.RestoreFromPos = d.pos(v)
			d.nonEmpty(v, "job.restoreFrom", "a savepoint or checkpoint directory, or the directory holding chk-N", &j.RestoreFrom)
		}},
		field{"restart", false, func(k, v ast.Node) { j.Restart = d.restart(k, v) }},
		field{"tracing", false, func(k, v ast.Node) { j.Tracing = d.tracing(k, v) }},
		field{"approvals", false, func(_, v ast.Node) { d.jobApprovals(v, j) }},
		field{"allowNonRestoredState", false, func(_, v ast.Node) {
			d.boolean(v, "job.allowNonRestoredState", &j.AllowNonRestoredState)
		}},
		field{"metricsAddr", false, func(_, v ast.Node) {
			if d.nonEmpty(v, "job.metricsAddr", "host:port such as 127.0.0.1:9464", &j.MetricsAddr) && !hostPort(j.MetricsAddr) {
				d.errf(v, "job.metricsAddr: %q: want host:port, such as 127.0.0.1:9464", j.MetricsAddr)
			}
		}},
		field{"healthAddr", false, func(_, v ast.Node) {
			if d.nonEmpty(v, "job.healthAddr", "host:port such as 127.0.0.1:8086", &j.HealthAddr) && !hostPort(j.HealthAddr) {
				d.errf(v, "job.healthAddr: %q: want host:port, such as 127.0.0.1:8086", j.HealthAddr)
			}
		}},
	)
}

// RestartStrategies are the values of job.restart.strategy.
var RestartStrategies = []string{"none", "fixed-delay", "exponential-backoff"}

// restart reads job.restart.
func (d *dec) restart(k, n ast.Node) *RestartSpec {
	r := &RestartSpec{Pos: d.pos(k)}
	backoffOnly := map[string]ast.Node{}
	var others []ast.Node
	d.object(n, "job.restart",
		field{"strategy", true, func(_, v ast.Node) { d.oneOf(v, "job.restart.strategy", &r.Strategy, RestartStrategies...) }},
		field{"attempts", false, func(_, v ast.Node) {
			others = append(others, v)
			d.intField(v, "job.restart.attempts", 1, 1000000, &r.Attempts)
		}},
		field{"delay", false, func(_, v ast.Node) {
			others = append(others, v)
			d.duration(v, "job.restart.delay", true, &r.Delay)
		}},
		field{"maxDelay", false, func(_, v ast.Node) {
			backoffOnly["maxDelay"] = v
			d.duration(v, "job.restart.maxDelay", true, &r.MaxDelay)
		}},
		field{"multiplier", false, func(_, v ast.Node) {
			backoffOnly["multiplier"] = v
			s, ok := scalarText(v)
			f, err := strconv.ParseFloat(s, 64)
			if _, isStr := v.(*ast.StringNode); !ok || isStr || err != nil {
				d.errf(v, "job.restart.multiplier: got %s, want a number from 1 to 100, such as 2 or 1.5", describe(v))
				return
			}
			if f < 1 || f > 100 {
				d.errf(v, "job.restart.multiplier: %s: want a number from 1 to 100, such as 2 or 1.5", s)
				return
			}
			r.Multiplier = f
		}},
		field{"resetAfter", false, func(_, v ast.Node) {
			backoffOnly["resetAfter"] = v
			if s, ok := v.(*ast.StringNode); ok && s.Value == "never" {
				r.ResetAfter = -1
				return
			}
			d.duration(v, "job.restart.resetAfter", true, &r.ResetAfter)
		}},
	)
	switch r.Strategy {
	case "none":
		for _, v := range append(others, mapValues(backoffOnly)...) {
			d.errf(v, "job.restart: strategy none restarts nothing; remove this key or choose fixed-delay or exponential-backoff")
		}
	case "fixed-delay":
		for _, name := range sortedKeys(backoffOnly) {
			d.errf(backoffOnly[name], "job.restart.%s: only with strategy exponential-backoff (fixed-delay takes attempts and delay)", name)
		}
	}
	delay := r.Delay
	if delay == 0 {
		delay = time.Second // runtime.RestartStrategy's default
	}
	if r.Strategy == "exponential-backoff" && r.MaxDelay > 0 && r.MaxDelay < delay {
		d.errAt(r.Pos, "job.restart: maxDelay %v is shorter than delay %v; want maxDelay >= delay", r.MaxDelay, delay)
	}
	return r
}

func mapValues(m map[string]ast.Node) []ast.Node {
	var out []ast.Node
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// stateCache reads job.stateCache: off, or a size in bytes (an integer, or a
// string with KiB, MiB or GiB). 0 keeps the default.
func (d *dec) stateCache(n ast.Node, dst *int64) {
	const want = "want off, a number of bytes, or a size such as 16MiB (KiB, MiB, GiB)"
	var s string
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		if !d.str(n, "job.stateCache", &s) { // expands ${VAR}
			return
		}
	default:
		t, ok := scalarText(n) // a YAML integer such as 1048576
		if !ok {
			d.errf(n, "job.stateCache: got %s; %s", describe(n), want)
			return
		}
		s = t
	}
	if s == "off" {
		*dst = state.NoCache
		return
	}
	v, err := bytesize.Parse(s)
	if err != nil {
		d.errf(n, "job.stateCache: %q: %s", s, want)
		return
	}
	*dst = v
}

func hostPort(s string) bool {
	i := strings.LastIndex(s, ":")
	return i >= 0 && i < len(s)-1
}

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

func (d *dec) kafka(k, n ast.Node) *KafkaSpec {
	ks := &KafkaSpec{Pos: d.pos(k)}
	d.object(n, "kafka",
		field{"brokers", false, func(_, v ast.Node) {
			d.strings(v, "kafka.brokers", &ks.Brokers, nil)
			for _, b := range ks.Brokers {
				for _, h := range strings.Split(b, ",") {
					if !hostPort(strings.TrimSpace(h)) {
						d.errf(v, "kafka.brokers: %q: want host:port, such as 127.0.0.1:9092", h)
					}
				}
			}
		}},
		field{"tls", false, func(k, v ast.Node) { d.kafkaTLS(k, v, ks) }},
		field{"sasl", false, func(k, v ast.Node) { d.kafkaSASL(k, v, ks) }},
		field{"schemaRegistry", false, func(k, v ast.Node) { ks.Registry = d.schemaRegistry(k, v) }},
		field{"embedded", false, func(k, v ast.Node) {
			e := &EmbeddedSpec{Pos: d.pos(k), Topics: map[string]int32{}, TopicPos: map[string]Pos{}}
			ks.Embedded = e
			if _, ok := v.(*ast.StringNode); ok { // embedded: DIR
				d.str(v, "kafka.embedded", &e.Dir)
				return
			}
			d.object(v, "kafka.embedded",
				field{"dir", false, func(_, v ast.Node) { d.str(v, "kafka.embedded.dir", &e.Dir) }},
				field{"produce", false, func(_, v ast.Node) {
					d.list(v, "kafka.embedded.produce", false, func(i int, pn ast.Node) {
						what := fmt.Sprintf("kafka.embedded.produce[%d]", i)
						ps := ProduceSpec{Pos: d.pos(pn)}
						d.object(pn, what,
							field{"topic", true, func(_, v ast.Node) {
								ps.TopicPos = d.pos(v)
								d.nonEmpty(v, what+".topic", "a topic name", &ps.Topic)
							}},
							field{"file", true, func(_, v ast.Node) { d.nonEmpty(v, what+".file", "a JSON-lines file", &ps.File) }},
							field{"key", false, func(_, v ast.Node) { d.nonEmpty(v, what+".key", "a field path", &ps.Key) }},
							field{"timestamp", false, func(_, v ast.Node) { d.nonEmpty(v, what+".timestamp", "a field path", &ps.Timestamp) }},
							field{"format", false, func(k, v ast.Node) { ps.Format = d.recordFormat(k, v, what+".format", true) }},
						)
						e.Produce = append(e.Produce, ps)
					})
				}},
				field{"topics", false, func(_, v ast.Node) {
					kvs, _ := d.entries(v, "kafka.embedded.topics")
					for _, kv := range kvs {
						name, kn, ok := d.keyOf(kv)
						if !ok {
							continue
						}
						var p int64 = 1
						if pv := d.unwrap(kv.Value); pv != nil {
							if _, null := pv.(*ast.NullNode); !null {
								d.integer(pv, "kafka.embedded.topics."+name+" (partitions)", 1, 10000, &p)
							}
						}
						e.Topics[name] = int32(p)
						e.TopicPos[name] = d.pos(kn)
					}
				}},
			)
		}},
	)
	if ks.Embedded == nil && len(ks.Brokers) == 0 {
		d.errf(k, "kafka: want brokers (a list of host:port) or embedded (a directory, or {dir, topics})")
	}
	if ks.Embedded != nil && ks.Security.Enabled() {
		d.errf(k, "kafka: tls and sasl are for external brokers; the embedded broker is plaintext on loopback (run `weir broker` with --sasl-user and --tls-self-signed to test security)")
	}
	if ks.Embedded != nil && len(ks.Brokers) > 0 {
		d.errf(k, "kafka: brokers and embedded both given; want one")
	}
	return ks
}

func (d *dec) source(k, n ast.Node, s *SourceSpec) {
	s.Pos = d.pos(k)
	s.Name = "source"
	kinds := 0
	ok := d.object(n, "source",
		field{"name", false, func(_, v ast.Node) { d.nonEmpty(v, "source.name", "an operator name", &s.Name) }},
		field{"kafka", false, func(k, v ast.Node) {
			kinds++
			ks := &KafkaSourceSpec{Pos: d.pos(k), Start: "earliest"}
			s.Kafka = ks
			d.object(v, "source.kafka",
				field{"topics", false, func(_, v ast.Node) { d.strings(v, "source.kafka.topics", &ks.Topics, &ks.TopicPos) }},
				field{"topicPattern", false, func(_, v ast.Node) {
					if d.nonEmpty(v, "source.kafka.topicPattern", "a regular expression such as orders-.*", &ks.TopicPattern) {
						if _, err := regexp.Compile(ks.TopicPattern); err != nil {
							d.errf(v, "source.kafka.topicPattern: %v", err)
						}
					}
				}},
				field{"start", false, func(_, v ast.Node) {
					if d.str(v, "source.kafka.start", &ks.Start) {
						switch ks.Start {
						case "earliest", "latest", "committed":
						default:
							if _, err := time.Parse(time.RFC3339Nano, ks.Start); err != nil {
								d.errf(v, "source.kafka.start: %q: want earliest, latest, committed or an RFC 3339 time such as 2026-01-02T15:04:05Z", ks.Start)
							}
						}
					}
				}},
				field{"group", false, func(_, v ast.Node) { d.nonEmpty(v, "source.kafka.group", "a consumer group name", &ks.Group) }},
				field{"readCommitted", false, func(_, v ast.Node) { d.boolean(v, "source.kafka.readCommitted", &ks.ReadCommitted) }},
				field{"bounded", false, func(_, v ast.Node) { d.boolean(v, "source.kafka.bounded", &ks.Bounded) }},
				field{"format", false, func(k, v ast.Node) { ks.Format = d.recordFormat(k, v, "source.kafka.format", false) }},
				field{"keyFormat", false, func(k, v ast.Node) { ks.KeyFormat = d.recordFormat(k, v, "source.kafka.keyFormat", false) }},
				field{"keyField", false, func(_, v ast.Node) {
					d.nonEmpty(v, "source.kafka.keyField", "a field name such as key", &ks.KeyField)
				}},
				field{"metadata", false, func(_, v ast.Node) {
					d.nonEmpty(v, "source.kafka.metadata", "a field name such as kafka", &ks.Metadata)
				}},
			)
			if len(ks.Topics) == 0 && ks.TopicPattern == "" {
				d.errf(k, "source.kafka: want topics (a list of names) or topicPattern (a regular expression)")
			}
			if ks.KeyField != "" && ks.KeyFormat == nil {
				d.errf(k, "source.kafka.keyField: needs keyFormat, the format of the keys (json, avro, protobuf or jsonSchema)")
			}
			if ks.Start == "committed" && ks.Group == "" {
				d.errf(k, "source.kafka: start committed needs group, the consumer group whose offsets to start from")
			}
		}},
		field{"file", false, func(k, v ast.Node) {
			kinds++
			fs := &FileSourceSpec{Pos: d.pos(k)}
			s.File = fs
			d.object(v, "source.file",
				field{"paths", true, func(_, v ast.Node) { d.strings(v, "source.file.paths", &fs.Paths, nil) }},
				field{"ordered", false, func(_, v ast.Node) { d.boolean(v, "source.file.ordered", &fs.Ordered) }},
			)
		}},
		field{"postgres", false, func(k, v ast.Node) { kinds++; d.postgresSource(k, v, s) }},
		field{"generate", false, func(k, v ast.Node) {
			kinds++
			g := &GenerateSpec{Pos: d.pos(k), Fields: map[string]string{}, FieldPos: map[string]Pos{}}
			s.Generate = g
			d.object(v, "source.generate",
				field{"count", true, func(_, v ast.Node) { d.integer(v, "source.generate.count", 1, math.MaxInt64, &g.Count) }},
				field{"fields", true, func(_, v ast.Node) { d.exprMap(v, "source.generate.fields", g.Fields, g.FieldPos) }},
			)
		}},
		d.httpSourceField(s, &kinds),
		field{"timestamp", false, func(k, v ast.Node) {
			s.TimestampPos = d.pos(v)
			if d.nonEmpty(v, "source.timestamp", "a field path such as time or event.time", &s.Timestamp) {
				if _, err := parseFieldPath(s.Timestamp); err != nil {
					d.errf(v, "source.timestamp: %v", err)
				}
			}
		}},
		field{"watermark", false, func(_, v ast.Node) {
			d.object(v, "source.watermark",
				field{"outOfOrderness", false, func(_, v ast.Node) {
					d.duration(v, "source.watermark.outOfOrderness", false, &s.OutOfOrderness)
				}},
				field{"idleness", false, func(_, v ast.Node) { d.duration(v, "source.watermark.idleness", true, &s.Idleness) }},
				field{"emit", false, func(_, v ast.Node) {
					var e string
					d.oneOf(v, "source.watermark.emit", &e, "periodic", "every-record")
					s.EveryRecord = e == "every-record"
				}},
			)
		}},
		field{"deadLetters", false, func(_, v ast.Node) {
			s.DeadLettersPos = d.pos(v)
			d.nonEmpty(v, "source.deadLetters", "the name of an output", &s.DeadLetters)
		}},
	)
	if ok && kinds != 1 {
		d.errf(k, "source: want exactly one of kafka, file, generate, postgres, http (got %d)", kinds)
	}
	if (s.File != nil || s.Generate != nil) && s.Timestamp == "" {
		d.errf(k, "source: missing key \"timestamp\": file and generate sources need the field path of the event time (Unix ms or RFC 3339)")
	}
}

// exprMap reads a mapping of field names to expressions.
func (d *dec) exprMap(n ast.Node, what string, dst map[string]string, pos map[string]Pos) {
	kvs, _ := d.entries(n, what)
	for _, kv := range kvs {
		name, _, ok := d.keyOf(kv)
		if !ok {
			continue
		}
		v := d.unwrap(kv.Value)
		var src string
		if s, ok := scalarText(v); ok {
			src = s
		} else {
			d.errf(v, "%s.%s: got %s, want an expression (a string such as qty * price)", what, name, describe(v))
			continue
		}
		dst[name] = src
		pos[name] = exprPos(d.pos(v), v)
	}
}

// exprPos is where an expression's text starts.
func exprPos(p Pos, n ast.Node) Pos {
	if quoted(n) {
		p.Col++
	}
	return p
}

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
	if !long {
		o.Sink = d.sink(k, n, what)
		return o
	}
	d.object(n, what,
		field{"steps", false, func(_, v ast.Node) { o.Steps = d.steps(v, what+".steps") }},
		field{"sink", true, func(k, v ast.Node) { o.Sink = d.sink(k, v, what+".sink") }},
	)
	if o.Sink == nil {
		o.Sink = &SinkSpec{Pos: o.Pos, Stdout: true}
	}
	return o
}

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
		field{"name", false, func(_, v ast.Node) { d.nonEmpty(v, what+".name", "an operator name", &st.Name) }},
		field{"deadLetters", false, func(_, v ast.Node) {
			st.DeadLettersPos = d.pos(v)
			d.nonEmpty(v, what+".deadLetters", "the name of an output", &st.DeadLetters)
		}},
		field{"filter", false, func(k, v ast.Node) {
			set("filter")
			st.Pos = d.pos(k)
			if s, ok := scalarText(v); ok && strings.TrimSpace(s) != "" {
				st.Filter, st.FilterPos = s, exprPos(d.pos(v), v)
			} else {
				d.errf(v, "%s.filter: got %s, want an expression returning a bool, such as kind == \"order\"", what, describe(v))
			}
		}},
		field{"map", false, func(k, v ast.Node) {
			set("map")
			st.Pos = d.pos(k)
			m := &MapSpec{Set: map[string]string{}, SetPos: map[string]Pos{}}
			st.Map = m
			d.object(v, what+".map",
				field{"set", false, func(_, v ast.Node) { d.exprMap(v, what+".map.set", m.Set, m.SetPos) }},
				field{"drop", false, func(_, v ast.Node) { d.strings(v, what+".map.drop", &m.Drop, nil) }},
			)
			if len(m.Set) == 0 && len(m.Drop) == 0 {
				d.errf(k, "%s.map: want set (field: expression) and/or drop (a list of fields)", what)
			}
		}},
		field{"keyBy", false, func(k, v ast.Node) {
			set("keyBy")
			st.Pos = d.pos(k)
			if d.nonEmpty(v, what+".keyBy", "a field path such as customer", &st.KeyBy) {
				if _, err := parseFieldPath(st.KeyBy); err != nil {
					d.errf(v, "%s.keyBy: %v", what, err)
				}
			}
		}},
		field{"sort", false, func(k, v ast.Node) {
			set("sort")
			st.Pos = d.pos(k)
			so := &SortSpec{}
			st.Sort = so
			d.object(v, what+".sort",
				field{"violations", false, func(_, v ast.Node) {
					so.ViolationsPos = d.pos(v)
					d.nonEmpty(v, what+".sort.violations", "the name of an output", &so.Violations)
				}},
				field{"tiebreak", false, func(_, v ast.Node) {
					d.list(v, what+".sort.tiebreak", false, func(j int, e ast.Node) {
						if s, ok := scalarText(e); ok {
							so.Tiebreak = append(so.Tiebreak, s)
							so.TiebreakPos = append(so.TiebreakPos, exprPos(d.pos(e), e))
						} else {
							d.errf(e, "%s.sort.tiebreak[%d]: got %s, want an expression returning a number", what, j, describe(e))
						}
					})
					if len(so.Tiebreak) > 2 {
						d.errf(v, "%s.sort.tiebreak: %d expressions; want one or two (numbers, compared in order)", what, len(so.Tiebreak))
					}
				}},
			)
		}},
		field{"window", false, func(k, v ast.Node) {
			set("window")
			st.Pos = d.pos(k)
			st.Window = d.window(k, v, what+".window")
		}},
		field{"tee", false, func(k, v ast.Node) {
			set("tee")
			st.Pos = d.pos(k)
			d.nonEmpty(v, what+".tee", "the name of an output that also receives every record", &st.Tee)
		}},
		field{"agent", false, func(k, v ast.Node) {
			set("agent")
			st.Pos = d.pos(k)
			st.Agent = d.agent(k, v, what+".agent")
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

func (d *dec) window(k, n ast.Node, what string) *WindowSpec {
	w := &WindowSpec{}
	types := 0
	ok := d.object(n, what,
		field{"tumbling", false, func(_, v ast.Node) {
			types++
			w.Type = "tumbling"
			d.duration(v, what+".tumbling", true, &w.Size)
		}},
		field{"sliding", false, func(_, v ast.Node) {
			types++
			w.Type = "sliding"
			d.object(v, what+".sliding",
				field{"size", true, func(_, v ast.Node) { d.duration(v, what+".sliding.size", true, &w.Size) }},
				field{"slide", true, func(_, v ast.Node) { d.duration(v, what+".sliding.slide", true, &w.Slide) }},
			)
		}},
		field{"session", false, func(_, v ast.Node) {
			types++
			w.Type = "session"
			d.object(v, what+".session",
				field{"gap", true, func(_, v ast.Node) { d.duration(v, what+".session.gap", true, &w.Gap) }},
			)
		}},
		field{"offset", false, func(_, v ast.Node) { d.duration(v, what+".offset", false, &w.Offset) }},
		field{"allowedLateness", false, func(_, v ast.Node) { d.duration(v, what+".allowedLateness", false, &w.AllowedLateness) }},
		field{"late", false, func(_, v ast.Node) {
			w.LatePos = d.pos(v)
			d.nonEmpty(v, what+".late", "the name of an output", &w.Late)
		}},
		field{"aggregate", true, func(_, v ast.Node) {
			kvs, _ := d.entries(v, what+".aggregate")
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
				d.errf(v, "%s.aggregate: empty; want output fields such as {events: count, amount: sum(amount)}", what)
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

func (d *dec) agent(k, n ast.Node, what string) *AgentSpec {
	a := &AgentSpec{Model: ModelSpec{Pos: d.pos(k), Offline: true}, Output: "answer"}
	d.object(n, what,
		field{"model", false, func(k, v ast.Node) { d.model(k, v, what+".model", &a.Model) }},
		field{"system", false, func(_, v ast.Node) { d.str(v, what+".system", &a.System) }},
		field{"prompt", true, func(_, v ast.Node) {
			a.PromptPos = d.pos(v)
			d.nonEmpty(v, what+".prompt", "a Go text/template such as 'Review order {{.id}}'", &a.Prompt)
		}},
		field{"tools", false, func(_, v ast.Node) {
			d.list(v, what+".tools", false, func(i int, tn ast.Node) {
				a.Tools = append(a.Tools, d.tool(tn, fmt.Sprintf("%s.tools[%d]", what, i)))
			})
		}},
		field{"maxSteps", false, func(_, v ast.Node) { d.intField(v, what+".maxSteps", 1, 100, &a.MaxSteps) }},
		field{"when", false, func(_, v ast.Node) {
			// Read raw, like filter expressions (never env-expanded).
			if s, ok := scalarText(v); ok && strings.TrimSpace(s) != "" {
				a.When, a.WhenPos = s, exprPos(d.pos(v), v)
			} else {
				d.errf(v, "%s.when: got %s, want a CEL condition such as event.value.amount > 100", what, describe(v))
			}
		}},
		field{"output", false, func(_, v ast.Node) { d.nonEmpty(v, what+".output", "a field name", &a.Output) }},
		field{"maxConcurrentKeys", false, func(_, v ast.Node) { d.intField(v, what+".maxConcurrentKeys", 1, 1<<20, &a.MaxConcurrent) }},
		field{"actionTimeout", false, func(_, v ast.Node) { d.duration(v, what+".actionTimeout", true, &a.ActionTimeout) }},
		field{"continueOnError", false, func(_, v ast.Node) { d.boolean(v, what+".continueOnError", &a.ContinueOnError) }},
		field{"fallbackModel", false, func(k, v ast.Node) {
			a.FallbackModel = &ModelSpec{}
			d.model(k, v, what+".fallbackModel", a.FallbackModel)
		}},
		field{"budgets", false, func(_, v ast.Node) { d.budgets(v, what+".budgets", a) }},
		field{"eventLog", false, func(k, v ast.Node) { a.EventLog = d.eventLog(k, v, what+".eventLog") }},
		field{"approvals", false, func(k, v ast.Node) { a.Approvals = d.approvals(k, v, what+".approvals") }},
		field{"pricing", false, func(_, v ast.Node) { a.Pricing = d.pricing(v, what+".pricing") }},
		field{"store", false, func(k, v ast.Node) {
			st := &StoreSpec{Pos: d.pos(k)}
			a.Store = st
			kinds := 0
			d.object(v, what+".store",
				field{"wal", false, func(_, v ast.Node) {
					kinds++
					d.nonEmpty(v, what+".store.wal", "a directory", &st.WALDir)
				}},
				field{"noSync", false, func(_, v ast.Node) { d.boolean(v, what+".store.noSync", &st.NoSync) }},
				field{"kafka", false, func(_, v ast.Node) {
					kinds++
					d.object(v, what+".store.kafka",
						field{"topic", true, func(_, v ast.Node) {
							st.TopicPos = d.pos(v)
							d.nonEmpty(v, what+".store.kafka.topic", "a topic name for the job's action states", &st.Topic)
						}},
					)
				}},
			)
			if kinds != 1 {
				d.errf(k, "%s.store: want exactly one of wal (a directory) or kafka ({topic})", what)
			}
		}},
	)
	d.checkBudgets(what, a)
	d.checkApprovals(what, a)
	return a
}

func (d *dec) model(k, n ast.Node, what string, m *ModelSpec) {
	m.Pos = d.pos(k)
	var offline, endpoint bool
	d.object(n, what,
		field{"offline", false, func(_, v ast.Node) {
			offline = true
			d.object(v, what+".offline",
				field{"seed", false, func(_, v ast.Node) { d.integer(v, what+".offline.seed", math.MinInt64, math.MaxInt64, &m.Seed) }},
				field{"latency", false, func(_, v ast.Node) { d.duration(v, what+".offline.latency", false, &m.Latency) }},
			)
		}},
		field{"url", false, func(_, v ast.Node) {
			endpoint = true
			if d.nonEmpty(v, what+".url", "the base URL of an OpenAI-compatible API such as http://127.0.0.1:11434/v1", &m.URL) &&
				!strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
				d.errf(v, "%s.url: %q: want an http:// or https:// URL", what, m.URL)
			}
		}},
		field{"name", false, func(_, v ast.Node) {
			endpoint = true
			d.nonEmpty(v, what+".name", "a model name such as gpt-4o-mini", &m.Name)
		}},
		field{"apiKeyEnv", false, func(_, v ast.Node) { d.nonEmpty(v, what+".apiKeyEnv", "an environment variable name", &m.APIKeyEnv) }},
		field{"timeout", false, func(_, v ast.Node) { d.duration(v, what+".timeout", true, &m.Timeout) }},
		field{"rateLimit", false, func(_, v ast.Node) { m.RateLimit = d.rateLimit(v, what+".rateLimit") }},
	)
	switch {
	case offline && endpoint:
		d.errf(k, "%s: offline and url/name both given; want one", what)
	case endpoint:
		m.Offline = false
		if m.URL == "" || m.Name == "" {
			d.errf(k, "%s: an endpoint needs url and name", what)
		}
	default:
		m.Offline = true
	}
}

func (d *dec) tool(n ast.Node, what string) ToolSpec {
	t := ToolSpec{Pos: d.pos(n)}
	kinds := 0
	ok := d.object(n, what,
		field{"http", false, func(k, v ast.Node) {
			kinds++
			t.Kind, t.Method = "http", "POST"
			d.object(v, what+".http",
				field{"name", true, func(_, v ast.Node) { d.nonEmpty(v, what+".http.name", "a tool name", &t.Name) }},
				field{"description", false, func(_, v ast.Node) { d.str(v, what+".http.description", &t.Description) }},
				field{"url", true, func(_, v ast.Node) {
					if d.nonEmpty(v, what+".http.url", "an http:// or https:// URL", &t.URL) &&
						!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
						d.errf(v, "%s.http.url: %q: want an http:// or https:// URL", what, t.URL)
					}
				}},
				field{"method", false, func(_, v ast.Node) { d.oneOf(v, what+".http.method", &t.Method, "GET", "POST") }},
				field{"parameters", false, func(_, v ast.Node) {
					if p, ok := d.anyValue(v, 0).(map[string]any); ok {
						t.Parameters = p
					} else {
						d.errf(v, "%s.http.parameters: want a JSON Schema object, such as {type: object, properties: {sku: {type: string}}}", what)
					}
				}},
			)
		}},
		field{"mcp", false, func(k, v ast.Node) {
			kinds++
			t.Kind = "mcp"
			d.object(v, what+".mcp",
				field{"command", false, func(_, v ast.Node) { d.strings(v, what+".mcp.command", &t.Command, nil) }},
				field{"url", false, func(_, v ast.Node) {
					if d.nonEmpty(v, what+".mcp.url", "the MCP server's HTTP endpoint", &t.URL) &&
						!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
						d.errf(v, "%s.mcp.url: %q: want an http:// or https:// URL", what, t.URL)
					}
				}},
				field{"headers", false, func(_, v ast.Node) {
					t.HeadersPos = d.pos(v)
					m, ok := d.anyValue(v, 0).(map[string]any)
					if !ok {
						d.errf(v, "%s.mcp.headers: want a map of header names to values, such as {Authorization: 'Bearer ${MCP_TOKEN}'}", what)
						return
					}
					t.Headers = map[string]string{}
					for name, val := range m {
						sv, ok := val.(string)
						if !ok || name == "" {
							d.errf(v, "%s.mcp.headers.%s: want a string value (environment variables as ${VAR})", what, name)
							continue
						}
						// Checked here, expanded when the job is built: the
						// spec keeps the reference, not the secret.
						if x, err := expandEnv(sv); err != nil {
							d.errf(v, "%s.mcp.headers.%s: %v", what, name, err)
						} else if x == "" {
							d.errf(v, "%s.mcp.headers.%s: the value is empty; set the environment variable it names", what, name)
						}
						t.Headers[name] = sv
					}
				}},
				field{"retries", false, func(_, v ast.Node) {
					r := &MCPRetrySpec{}
					t.Retry = r
					d.object(v, what+".mcp.retries",
						field{"attempts", false, func(_, v ast.Node) { d.intField(v, what+".mcp.retries.attempts", 1, 100, &r.Attempts) }},
						field{"initial", false, func(_, v ast.Node) { d.duration(v, what+".mcp.retries.initial", true, &r.Initial) }},
						field{"max", false, func(_, v ast.Node) { d.duration(v, what+".mcp.retries.max", true, &r.Max) }},
						field{"timeout", false, func(_, v ast.Node) { d.duration(v, what+".mcp.retries.timeout", true, &r.Timeout) }},
					)
				}},
				field{"resources", false, func(_, v ast.Node) { d.boolean(v, what+".mcp.resources", &t.Resources) }},
			)
			if (len(t.Command) == 0) == (t.URL == "") {
				d.errf(k, "%s.mcp: want exactly one of command (a program and its arguments, over stdio) or url (streamable HTTP)", what)
			}
			if len(t.Headers) > 0 && t.URL == "" {
				d.errAt(t.HeadersPos, "%s.mcp.headers: headers apply to an MCP server over HTTP (url); a command gets its settings from its environment", what)
			}
		}},
		field{"retrieval", false, func(k, v ast.Node) {
			kinds++
			d.retrieval(v, what+".retrieval", &t)
		}},
		field{"approval", false, func(k, v ast.Node) { t.Approval = d.approval(k, v, what+".approval") }},
	)
	if ok && kinds != 1 {
		d.errf(n, "%s: want exactly one of http, mcp, retrieval", what)
	}
	return t
}

func (d *dec) sink(k, n ast.Node, what string) *SinkSpec {
	s := &SinkSpec{Pos: d.pos(k)}
	kinds := 0
	ok := d.object(n, what,
		field{"name", false, func(_, v ast.Node) { d.nonEmpty(v, what+".name", "an operator name", &s.Name) }},
		field{"stdout", false, func(_, v ast.Node) {
			kinds++
			s.Stdout = true
			d.object(v, what+".stdout")
		}},
		field{"file", false, func(k, v ast.Node) {
			kinds++
			f := &FileSinkSpec{}
			s.File = f
			d.object(v, what+".file",
				field{"dir", false, func(_, v ast.Node) { d.nonEmpty(v, what+".file.dir", "a directory", &f.Dir) }},
				field{"path", false, func(_, v ast.Node) { d.nonEmpty(v, what+".file.path", "a file path", &f.Path) }},
			)
			if (f.Dir == "") == (f.Path == "") {
				d.errf(k, "%s.file: want exactly one of dir (exactly once: files published at checkpoints) or path (one file, at least once)", what)
			}
		}},
		field{"parquet", false, func(k, v ast.Node) { kinds++; s.Parquet = d.parquetSink(k, v, what+".parquet") }},
		field{"postgres", false, func(k, v ast.Node) { kinds++; s.Postgres = d.postgresSink(k, v, what) }},
		field{"kafka", false, func(k, v ast.Node) {
			kinds++
			ks := &KafkaSinkSpec{Delivery: "at-least-once"}
			s.Kafka = ks
			d.object(v, what+".kafka",
				field{"topic", true, func(_, v ast.Node) {
					ks.TopicPos = d.pos(v)
					d.nonEmpty(v, what+".kafka.topic", "a topic name", &ks.Topic)
				}},
				field{"delivery", false, func(_, v ast.Node) {
					d.oneOf(v, what+".kafka.delivery", &ks.Delivery, "at-least-once", "exactly-once")
				}},
				field{"key", false, func(_, v ast.Node) {
					if d.nonEmpty(v, what+".kafka.key", "a field path", &ks.Key) {
						if _, err := parseFieldPath(ks.Key); err != nil {
							d.errf(v, "%s.kafka.key: %v", what, err)
						}
					}
				}},
				field{"transactionalIdPrefix", false, func(_, v ast.Node) {
					d.nonEmpty(v, what+".kafka.transactionalIdPrefix", "a prefix unique to the job", &ks.TransactionalIDPrefix)
				}},
				field{"format", false, func(k, v ast.Node) {
					ks.Format = d.recordFormat(k, v, what+".kafka.format", true)
				}},
				field{"keyFormat", false, func(k, v ast.Node) {
					ks.KeyFormat = d.recordFormat(k, v, what+".kafka.keyFormat", true)
				}},
			)
			if ks.KeyFormat != nil && ks.Key == "" {
				d.errAt(ks.KeyFormat.Pos, "%s.kafka.keyFormat: needs key, the field whose value is written as the record key", what)
			}
		}},
		d.httpSinkField(s, what, &kinds),
	)
	if ok && kinds != 1 {
		d.errf(k, "%s: want exactly one of stdout, file, kafka, parquet, postgres, http (got %d)", what, kinds)
	}
	return s
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
