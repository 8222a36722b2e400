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

func (d *dec) job(k, n ast.Node, j *JobSpec) {
	j.Pos = d.pos(k)
	var cacheNode ast.Node
	defer func() {
		if cacheNode != nil && j.StateBackend != "pebble" {
			d.errf(cacheNode, "job.stateCache: only with stateBackend: pebble (the memory backend has no cache); remove it or set stateBackend: pebble")
		}
	}()
	d.object(n, "job",
		field{name: "parallelism", accepts: "an integer from 1 to 32768", def: "1", doc: "subtasks per operator (`--parallelism` overrides)",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 32768, &j.Parallelism) }},
		field{name: "maxParallelism", accepts: "an integer from 1 to 32768", def: "Flink's default (>= 128)", doc: "key groups: the largest parallelism a savepoint can be restored at",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 32768, &j.MaxParallelism) }},
		field{name: "autoWatermarkInterval", accepts: "a duration > 0", def: "200ms", doc: "how often sources emit watermarks (`emit: periodic`)",
			fn: func(at string, _, v ast.Node) {
				d.duration(v, at, true, &j.AutoWatermarkInterval)
			}},
		field{name: "checkpoint", accepts: "`{interval, dir, mode}`", def: "none", doc: "checkpoints", fn: func(at string, _, v ast.Node) {
			d.object(v, at,
				field{name: "interval", accepts: "a duration > 0", def: "none", doc: "time between checkpoints",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &j.CheckpointInterval) }},
				field{name: "dir", required: true, accepts: "a directory or storage URL", doc: "where checkpoints go (passed to the runtime as given); a restart resumes from the newest one",
					fn: func(at string, _, v ast.Node) {
						j.CheckpointDirPos = d.pos(v)
						d.nonEmpty(v, at, "a directory (or storage URL) such as /tmp/weir-checkpoints", &j.CheckpointDir)
					}},
				field{name: "mode", accepts: "`exactly-once`, `at-least-once`", def: "`exactly-once`", doc: "`at-least-once` aligns no barriers",
					fn: func(at string, _, v ast.Node) {
						d.oneOf(v, at, &j.CheckpointMode, "exactly-once", "at-least-once")
					}},
			)
		}},
		field{name: "stateBackend", accepts: "`memory`, `pebble`", def: "`memory`", doc: "`pebble` keeps keyed state on disk, with incremental checkpoints",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &j.StateBackend, "memory", "pebble") }},
		field{name: "stateDir", accepts: "a directory", def: "a temporary directory", doc: "parent of Pebble's working directories",
			fn: func(at string, _, v ast.Node) {
				j.StateDirPos = d.pos(v)
				d.nonEmpty(v, at, "a directory", &j.StateDir)
			}},
		field{name: "stateCache", accepts: "`off`, bytes, or a size such as 16MiB", def: "`4MiB`", doc: "with `stateBackend: pebble`: bound of each subtask's write-back cache in front of Pebble (`16MiB`, `512KiB`, bytes as an integer, or `off`; state-and-timers.md)",
			fn: func(at string, _, v ast.Node) { cacheNode = v; d.stateCache(v, &j.StateCacheBytes) }},
		field{name: "restoreFrom", accepts: "a directory", def: "none", doc: "a savepoint or checkpoint, or the directory holding `chk-N` (its newest complete one), to start from (`--restore` overrides)",
			fn: func(at string, _, v ast.Node) {
				j.RestoreFromPos = d.pos(v)
				d.nonEmpty(v, at, "a savepoint or checkpoint directory, or the directory holding chk-N", &j.RestoreFrom)
			}},
		field{name: "restart", accepts: "a mapping", def: "none", doc: "restarts in the process after a step fails (`--restart` overrides)",
			fn: func(at string, k, v ast.Node) { j.Restart = d.restart(k, v) }},
		field{name: "tracing", accepts: "a mapping", def: "none", doc: "export the agent steps' OpenTelemetry traces (docs/tracing.md)",
			fn: func(at string, k, v ast.Node) { j.Tracing = d.tracing(k, v) }},
		field{name: "approvals", accepts: "`{httpAddr}`", def: "none", doc: "the HTTP endpoint taking answers to agent approvals; needs an agent step with `approvals`",
			fn: func(at string, _, v ast.Node) { d.jobApprovals(v, j) }},
		field{name: "allowNonRestoredState", accepts: "true or false", def: "`false`", doc: "restore a snapshot holding state of an operator (by name or uid) the pipeline no longer has, dropping that state; otherwise that is refused (`--allow-non-restored-state`)",
			fn: func(at string, _, v ast.Node) {
				d.boolean(v, at, &j.AllowNonRestoredState)
			}},
		field{name: "metricsAddr", accepts: "host:port such as 127.0.0.1:9464", def: "none", doc: "serve Prometheus metrics at `/metrics`, and `/healthz`, `/readyz` (`--metrics-addr` overrides)",
			fn: func(at string, _, v ast.Node) {
				if d.nonEmpty(v, at, "host:port such as 127.0.0.1:9464", &j.MetricsAddr) && !hostPort(j.MetricsAddr) {
					d.errf(v, "%s: %q: want host:port, such as 127.0.0.1:9464", at, j.MetricsAddr)
				}
			}},
		field{name: "healthAddr", accepts: "host:port such as 127.0.0.1:8086", def: "none", doc: "serve `/healthz` and `/readyz` on an address of their own (`--health-addr` overrides; deploy.md, \"Health and readiness\")",
			fn: func(at string, _, v ast.Node) {
				if d.nonEmpty(v, at, "host:port such as 127.0.0.1:8086", &j.HealthAddr) && !hostPort(j.HealthAddr) {
					d.errf(v, "%s: %q: want host:port, such as 127.0.0.1:8086", at, j.HealthAddr)
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
		field{name: "strategy", required: true, accepts: "`none`, `fixed-delay`, `exponential-backoff`", doc: "after a step fails, start the job again in the process from its newest checkpoint (`--restart` overrides)",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &r.Strategy, RestartStrategies...) }},
		field{name: "attempts", accepts: "an integer from 1 to 1000000", def: "3", doc: "restarts allowed (in a row, for back-off) before a failure ends the job (`--restart-attempts`)",
			fn: func(at string, _, v ast.Node) {
				others = append(others, v)
				d.intField(v, at, 1, 1000000, &r.Attempts)
			}},
		field{name: "delay", accepts: "a duration > 0", def: "1s", doc: "the pause before each restart (`fixed-delay`), before the first (`exponential-backoff`) (`--restart-delay`)",
			fn: func(at string, _, v ast.Node) {
				others = append(others, v)
				d.duration(v, at, true, &r.Delay)
			}},
		field{name: "maxDelay", accepts: "a duration > 0", def: "1m", doc: "`exponential-backoff` only: the longest pause (`--restart-max-delay`)",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["maxDelay"] = v
				d.duration(v, at, true, &r.MaxDelay)
			}},
		field{name: "multiplier", accepts: "a number from 1 to 100", def: "2", doc: "`exponential-backoff` only: the pause grows by this factor after each restart",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["multiplier"] = v
				s, ok := scalarText(v)
				f, err := strconv.ParseFloat(s, 64)
				if _, isStr := v.(*ast.StringNode); !ok || isStr || err != nil {
					d.errf(v, "%s: got %s, want a number from 1 to 100, such as 2 or 1.5", at, describe(v))
					return
				}
				if f < 1 || f > 100 {
					d.errf(v, "%s: %s: want a number from 1 to 100, such as 2 or 1.5", at, s)
					return
				}
				r.Multiplier = f
			}},
		field{name: "resetAfter", accepts: "a duration > 0, or `never`", def: "1h", doc: "`exponential-backoff` only: a run that lasted this long counts as the first failure again",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["resetAfter"] = v
				if s, ok := v.(*ast.StringNode); ok && s.Value == "never" {
					r.ResetAfter = -1
					return
				}
				d.duration(v, at, true, &r.ResetAfter)
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
		field{name: "brokers", accepts: "a list of host:port", def: "none", doc: "the brokers, `host:port` (a string may hold several, comma-separated); exactly one of `brokers` and `embedded`",
			fn: func(at string, _, v ast.Node) {
				d.strings(v, at, &ks.Brokers, nil)
				for _, b := range ks.Brokers {
					for _, h := range strings.Split(b, ",") {
						if !hostPort(strings.TrimSpace(h)) {
							d.errf(v, "%s: %q: want host:port, such as 127.0.0.1:9092", at, h)
						}
					}
				}
			}},
		field{name: "tls", accepts: "`true`, or a mapping", def: "none", doc: "TLS to the brokers (`true`: the system's roots); not with `embedded`",
			fn: func(at string, k, v ast.Node) { d.kafkaTLS(k, v, ks) }},
		field{name: "sasl", accepts: "a mapping", def: "none", doc: "SASL authentication to the brokers; not with `embedded`",
			fn: func(at string, k, v ast.Node) { d.kafkaSASL(k, v, ks) }},
		field{name: "schemaRegistry", accepts: "a URL, `embedded`, or a mapping", def: "none", doc: "the Schema Registry of the formats `avro`, `protobuf`, `jsonSchema` (formats.md)",
			fn: func(at string, k, v ast.Node) { ks.Registry = d.schemaRegistry(k, v) }},
		field{name: "embedded", accepts: "a directory (`\"\"`: memory), or a mapping", def: "none", doc: "start weir's in-process broker (package `broker`) for the job's life: a directory to persist it, or `{dir, topics, produce}`",
			fn: func(at string, k, v ast.Node) {
				e := &EmbeddedSpec{Pos: d.pos(k), Topics: map[string]int32{}, TopicPos: map[string]Pos{}}
				ks.Embedded = e
				if _, ok := v.(*ast.StringNode); ok { // embedded: DIR
					d.str(v, at, &e.Dir)
					return
				}
				d.object(v, at,
					field{name: "dir", accepts: "a directory", def: "`\"\"` (in memory)", doc: "the broker's data directory",
						fn: func(at string, _, v ast.Node) { d.str(v, at, &e.Dir) }},
					field{name: "produce", accepts: "a list", def: "none", doc: "JSON-lines files loaded into topics that are empty at start, one record per line, so examples need no producer",
						fn: func(at string, _, v ast.Node) {
							d.list(v, at, false, func(i int, pn ast.Node) {
								what := fmt.Sprintf("kafka.embedded.produce[%d]", i)
								ps := ProduceSpec{Pos: d.pos(pn)}
								d.object(pn, what,
									field{name: "topic", required: true, accepts: "a topic name", doc: "the topic to load", fn: func(at string, _, v ast.Node) {
										ps.TopicPos = d.pos(v)
										d.nonEmpty(v, at, "a topic name", &ps.Topic)
									}},
									field{name: "file", required: true, accepts: "a JSON-lines file", doc: "one record per line",
										fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a JSON-lines file", &ps.File) }},
									field{name: "key", accepts: "a field path", def: "none", doc: "the field whose value is the record key",
										fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a field path", &ps.Key) }},
									field{name: "timestamp", accepts: "a field path", def: "none", doc: "the field whose value is the record timestamp",
										fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a field path", &ps.Timestamp) }},
									field{name: "format", accepts: "a format", def: "`json`", doc: "how the records are written (formats.md)",
										fn: func(at string, k, v ast.Node) { ps.Format = d.recordFormat(k, v, at, true) }},
								)
								e.Produce = append(e.Produce, ps)
							})
						}},
					field{name: "topics", accepts: "NAME: PARTITIONS (1 to 10000)", def: "none", doc: "topics created if missing",
						fn: func(at string, _, v ast.Node) {
							kvs, _ := d.entries(v, at)
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
		field{name: "name", accepts: "an operator name", def: "`source`", doc: "the operator's name",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "an operator name", &s.Name) }},
		field{name: "kafka", accepts: "a mapping", doc: "records of Kafka topics", fn: func(at string, k, v ast.Node) {
			kinds++
			ks := &KafkaSourceSpec{Pos: d.pos(k), Start: "earliest"}
			s.Kafka = ks
			d.object(v, at,
				field{name: "topics", accepts: "a list of strings", def: "none", doc: "the topics (or `topicPattern`)",
					fn: func(at string, _, v ast.Node) { d.strings(v, at, &ks.Topics, &ks.TopicPos) }},
				field{name: "topicPattern", accepts: "a regular expression such as orders-.*", def: "none", doc: "a regular expression over topic names, anchored",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "a regular expression such as orders-.*", &ks.TopicPattern) {
							if _, err := regexp.Compile(ks.TopicPattern); err != nil {
								d.errf(v, "%s: %v", at, err)
							}
						}
					}},
				field{name: "start", accepts: "`earliest`, `latest`, `committed`, or an RFC 3339 time", def: "`earliest`", doc: "where to start reading; `committed` needs `group`",
					fn: func(at string, _, v ast.Node) {
						if d.str(v, at, &ks.Start) {
							switch ks.Start {
							case "earliest", "latest", "committed":
							default:
								if _, err := time.Parse(time.RFC3339Nano, ks.Start); err != nil {
									d.errf(v, "%s: %q: want earliest, latest, committed or an RFC 3339 time such as 2026-01-02T15:04:05Z", at, ks.Start)
								}
							}
						}
					}},
				field{name: "group", accepts: "a consumer group name", def: "none", doc: "the consumer group checkpointed offsets are committed to (the source never joins it)",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a consumer group name", &ks.Group) }},
				field{name: "readCommitted", accepts: "true or false", def: "`false`", doc: "read only committed transactions",
					fn: func(at string, _, v ast.Node) { d.boolean(v, at, &ks.ReadCommitted) }},
				field{name: "bounded", accepts: "true or false", def: "`false`", doc: "stop at the end offsets listed at start (otherwise run until stopped); either way the source logs when each partition has caught up",
					fn: func(at string, _, v ast.Node) { d.boolean(v, at, &ks.Bounded) }},
				field{name: "format", accepts: "a format", def: "`json`", doc: "`json`, `{avro: {schema}}`, `{protobuf: {}}` or `{jsonSchema: {validate}}` (Confluent wire format, schemas from `kafka.schemaRegistry`, formats.md); a record that does not decode is a dead letter",
					fn: func(at string, k, v ast.Node) { ks.Format = d.recordFormat(k, v, at, false) }},
				field{name: "keyFormat", accepts: "a format", def: "none (keys not read)", doc: "the keys' format, the same shape as `format`: each key is decoded into the field `keyField`; a key that does not decode makes a dead letter whose reason starts with `key:`",
					fn: func(at string, k, v ast.Node) { ks.KeyFormat = d.recordFormat(k, v, at, false) }},
				field{name: "keyField", accepts: "a field name such as key", def: "`key`", doc: "the field receiving the decoded key (only with `keyFormat`); it replaces a field of that name in the value",
					fn: func(at string, _, v ast.Node) {
						d.nonEmpty(v, at, "a field name such as key", &ks.KeyField)
					}},
				field{name: "metadata", accepts: "a field name such as kafka", def: "none", doc: "a field receiving `{topic, partition, offset, timestamp}` of each record, and its `traceparent` and `tracestate` headers when it has them (docs/tracing.md)",
					fn: func(at string, _, v ast.Node) {
						d.nonEmpty(v, at, "a field name such as kafka", &ks.Metadata)
					}},
			)
			if len(ks.Topics) == 0 && ks.TopicPattern == "" {
				d.errf(k, "%s: want topics (a list of names) or topicPattern (a regular expression)", at)
			}
			if ks.KeyField != "" && ks.KeyFormat == nil {
				d.errf(k, "source.kafka.keyField: needs keyFormat, the format of the keys (json, avro, protobuf or jsonSchema)")
			}
			if ks.Start == "committed" && ks.Group == "" {
				d.errf(k, "%s: start committed needs group, the consumer group whose offsets to start from", at)
			}
		}},
		field{name: "file", accepts: "a mapping", doc: "records of JSON-lines files; a line that is not a JSON object is a dead letter",
			fn: func(at string, k, v ast.Node) {
				kinds++
				fs := &FileSourceSpec{Pos: d.pos(k)}
				s.File = fs
				d.object(v, at,
					field{name: "paths", required: true, accepts: "a list of strings", doc: "the files",
						fn: func(at string, _, v ast.Node) { d.strings(v, at, &fs.Paths, nil) }},
					field{name: "ordered", accepts: "true or false", def: "`false`", doc: "each subtask's files are in event-time order: a file is announced only when opened",
						fn: func(at string, _, v ast.Node) { d.boolean(v, at, &fs.Ordered) }},
				)
			}},
		field{name: "postgres", accepts: "a mapping", doc: "the changes of PostgreSQL tables (change data capture), one record per change",
			fn: func(at string, k, v ast.Node) { kinds++; d.postgresSource(k, v, s) }},
		field{name: "generate", accepts: "a mapping", doc: "generated records", fn: func(at string, k, v ast.Node) {
			kinds++
			g := &GenerateSpec{Pos: d.pos(k), Fields: map[string]string{}, FieldPos: map[string]Pos{}}
			s.Generate = g
			d.object(v, at,
				field{name: "count", required: true, accepts: "an integer from 1 to 2^63-1", doc: "how many records",
					fn: func(at string, _, v ast.Node) { d.integer(v, at, 1, math.MaxInt64, &g.Count) }},
				field{name: "fields", required: true, accepts: "field: expression", doc: "record `i`'s fields, computed by expressions over `i`",
					fn: func(at string, _, v ast.Node) { d.exprMap(v, at, g.Fields, g.FieldPos) }},
			)
		}},
		d.httpSourceField(s, &kinds),
		field{name: "timestamp", accepts: "a field path", def: "the Kafka timestamp; arrival time for `http`", doc: "the event time: a number of Unix ms, or a string (RFC 3339, or an integer of ms); required for `file` and `generate`; a record without a usable one is a dead letter",
			fn: func(at string, k, v ast.Node) {
				s.TimestampPos = d.pos(v)
				if d.nonEmpty(v, at, "a field path such as time or event.time", &s.Timestamp) {
					if _, err := parseFieldPath(s.Timestamp); err != nil {
						d.errf(v, "%s: %v", at, err)
					}
				}
			}},
		field{name: "watermark", accepts: "a mapping", def: "none", doc: "how the watermark follows the records", fn: func(at string, _, v ast.Node) {
			d.object(v, at,
				field{name: "outOfOrderness", accepts: "a duration >= 0", def: "0", doc: "how far behind the newest record of a split (Kafka partition, file) a record may be and still be on time",
					fn: func(at string, _, v ast.Node) {
						d.duration(v, at, false, &s.OutOfOrderness)
					}},
				field{name: "idleness", accepts: "a duration > 0", def: "never", doc: "a split without records for this long stops holding the watermark back",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &s.Idleness) }},
				field{name: "emit", accepts: "`periodic`, `every-record`", def: "`periodic`", doc: "`periodic` (every `job.autoWatermarkInterval`) or `every-record` (whenever a record raises the newest timestamp: a bounded input then has the same late records however fast it is read)",
					fn: func(at string, _, v ast.Node) {
						var e string
						d.oneOf(v, at, &e, "periodic", "every-record")
						s.EveryRecord = e == "every-record"
					}},
			)
		}},
		field{name: "deadLetters", accepts: "the name of an output", def: "none (counted, dropped)", doc: "output of the records that do not decode or have no timestamp, as `{source, split, position, reason, raw, value}`; also the steps' default dead-letter output",
			fn: func(at string, _, v ast.Node) {
				s.DeadLettersPos = d.pos(v)
				d.nonEmpty(v, at, "the name of an output", &s.DeadLetters)
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

func (d *dec) agent(k, n ast.Node, what string) *AgentSpec {
	a := &AgentSpec{Model: ModelSpec{Pos: d.pos(k), Offline: true}, Output: "answer"}
	d.object(n, what,
		field{name: "model", accepts: "a mapping", def: "`{offline: {}}`", doc: "the model: weir's offline model, or an OpenAI-compatible endpoint",
			fn: func(at string, k, v ast.Node) { d.model(k, v, at, &a.Model) }},
		field{name: "system", accepts: "a string", def: "none", doc: "the system prompt", fn: func(at string, _, v ast.Node) { d.str(v, at, &a.System) }},
		field{name: "prompt", required: true, accepts: "a Go text/template", doc: "the prompt, rendered over the record (`{{.item}}`)",
			fn: func(at string, _, v ast.Node) {
				a.PromptPos = d.pos(v)
				d.nonEmpty(v, at, "a Go text/template such as 'Review order {{.id}}'", &a.Prompt)
			}},
		field{name: "tools", accepts: "a list", def: "none", doc: "tools offered to the model: `{http}`, `{mcp}` or `{retrieval}` entries",
			fn: func(at string, _, v ast.Node) {
				d.list(v, at, false, func(i int, tn ast.Node) {
					a.Tools = append(a.Tools, d.tool(tn, fmt.Sprintf("%s.tools[%d]", what, i)))
				})
			}},
		field{name: "maxSteps", accepts: "an integer from 1 to 100", def: "8", doc: "the most model calls per record",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100, &a.MaxSteps) }},
		field{name: "when", accepts: "a CEL condition", def: "none", doc: "only the records meeting it go to the model; the others pass through unchanged",
			fn: func(at string, _, v ast.Node) {
				// Read raw, like filter expressions (never env-expanded).
				if s, ok := scalarText(v); ok && strings.TrimSpace(s) != "" {
					a.When, a.WhenPos = s, exprPos(d.pos(v), v)
				} else {
					d.errf(v, "%s: got %s, want a CEL condition such as event.value.amount > 100", at, describe(v))
				}
			}},
		field{name: "output", accepts: "a field name", def: "`answer`", doc: "the field receiving the model's last text",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a field name", &a.Output) }},
		field{name: "maxConcurrentKeys", accepts: "an integer from 1 to 1<<20", def: "256", doc: "keys in progress at once per subtask",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<20, &a.MaxConcurrent) }},
		field{name: "actionTimeout", accepts: "a duration > 0", def: "none", doc: "bound on each record's action",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &a.ActionTimeout) }},
		field{name: "continueOnError", accepts: "true or false", def: "`false`", doc: "a failed action is counted and its input is a dead letter of the step, instead of failing the job",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &a.ContinueOnError) }},
		field{name: "fallbackModel", accepts: "a mapping, as `model`", def: "none", doc: "called past a budget with `onLimit: fallback`",
			fn: func(at string, k, v ast.Node) {
				a.FallbackModel = &ModelSpec{}
				d.model(k, v, at, a.FallbackModel)
			}},
		field{name: "budgets", accepts: "a list", def: "none", doc: "bounds on tokens and requests per window (agents.md, \"Budgets and limits\")",
			fn: func(at string, _, v ast.Node) { d.budgets(v, at, a) }},
		field{name: "eventLog", accepts: "`{file}` or `{kafka: {topic}}`", def: "none", doc: "the agent's event log (`weir agent log`, `weir agent replay`)",
			fn: func(at string, k, v ast.Node) { a.EventLog = d.eventLog(k, v, at) }},
		field{name: "approvals", accepts: "`{topic, requests}`", def: "none", doc: "where answers to tool approvals come from; needs a tool with `approval`",
			fn: func(at string, k, v ast.Node) { a.Approvals = d.approvals(k, v, at) }},
		field{name: "pricing", accepts: "MODEL: {input, output}", def: "none", doc: "a price table per million tokens: the spend metric and `weir agent replay`'s cost",
			fn: func(at string, _, v ast.Node) { a.Pricing = d.pricing(v, at) }},
		field{name: "store", accepts: "`{wal}` or `{kafka: {topic}}`", def: "none", doc: "the action-state store: completed actions and calls are not made again after a restore",
			fn: func(at string, k, v ast.Node) {
				st := &StoreSpec{Pos: d.pos(k)}
				a.Store = st
				kinds := 0
				d.object(v, at,
					field{name: "wal", accepts: "a directory", def: "none", doc: "a write-ahead log on local disk", fn: func(at string, _, v ast.Node) {
						kinds++
						d.nonEmpty(v, at, "a directory", &st.WALDir)
					}},
					field{name: "noSync", accepts: "true or false", def: "`false`", doc: "do not fsync the log (tests only)",
						fn: func(at string, _, v ast.Node) { d.boolean(v, at, &st.NoSync) }},
					field{name: "kafka", accepts: "a mapping", def: "none", doc: "a topic of the pipeline's cluster", fn: func(at string, _, v ast.Node) {
						kinds++
						d.object(v, at,
							field{name: "topic", required: true, accepts: "a topic name", doc: "the job's action states", fn: func(at string, _, v ast.Node) {
								st.TopicPos = d.pos(v)
								d.nonEmpty(v, at, "a topic name for the job's action states", &st.Topic)
							}},
						)
					}},
				)
				if kinds != 1 {
					d.errf(k, "%s: want exactly one of wal (a directory) or kafka ({topic})", at)
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
		field{name: "offline", accepts: "`{seed, latency}`", def: "the default", doc: "weir's offline model: reproducible replies, no server",
			fn: func(at string, _, v ast.Node) {
				offline = true
				d.object(v, at,
					field{name: "seed", accepts: "an integer", def: "0", doc: "the replies' seed",
						fn: func(at string, _, v ast.Node) { d.integer(v, at, math.MinInt64, math.MaxInt64, &m.Seed) }},
					field{name: "latency", accepts: "a duration >= 0", def: "0", doc: "the mean of an exponential distribution of latencies",
						fn: func(at string, _, v ast.Node) { d.duration(v, at, false, &m.Latency) }},
				)
			}},
		field{name: "url", accepts: "an http:// or https:// URL", def: "none", doc: "an OpenAI-compatible endpoint (with `name`)",
			fn: func(at string, _, v ast.Node) {
				endpoint = true
				if d.nonEmpty(v, at, "the base URL of an OpenAI-compatible API such as http://127.0.0.1:11434/v1", &m.URL) &&
					!strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
					d.errf(v, "%s: %q: want an http:// or https:// URL", at, m.URL)
				}
			}},
		field{name: "name", accepts: "a model name such as gpt-4o-mini", def: "none", doc: "the model's name (with `url`)",
			fn: func(at string, _, v ast.Node) {
				endpoint = true
				d.nonEmpty(v, at, "a model name such as gpt-4o-mini", &m.Name)
			}},
		field{name: "apiKeyEnv", accepts: "an environment variable name", def: "none", doc: "the environment variable holding the API key (never in the file)",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "an environment variable name", &m.APIKeyEnv) }},
		field{name: "timeout", accepts: "a duration > 0", def: "2m", doc: "per attempt",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &m.Timeout) }},
		field{name: "rateLimit", accepts: "`{requests, tokens, interval, maxConcurrent}`", def: "none", doc: "the model's calls behind a limiter; at least one of the three bounds",
			fn: func(at string, _, v ast.Node) { m.RateLimit = d.rateLimit(v, at) }},
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
		field{name: "http", accepts: "a mapping", doc: "an HTTP tool", fn: func(at string, k, v ast.Node) {
			kinds++
			t.Kind, t.Method = "http", "POST"
			d.object(v, at,
				field{name: "name", required: true, accepts: "a tool name", doc: "the tool's name",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a tool name", &t.Name) }},
				field{name: "description", accepts: "a string", def: "none", doc: "what the model is told it does",
					fn: func(at string, _, v ast.Node) { d.str(v, at, &t.Description) }},
				field{name: "url", required: true, accepts: "an http:// or https:// URL", doc: "the tool's URL; a non-2xx reply is an error result the model sees",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "an http:// or https:// URL", &t.URL) &&
							!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
							d.errf(v, "%s: %q: want an http:// or https:// URL", at, t.URL)
						}
					}},
				field{name: "method", accepts: "`GET`, `POST`", def: "`POST`", doc: "POST sends the arguments as the JSON body, GET as query parameters",
					fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &t.Method, "GET", "POST") }},
				field{name: "parameters", accepts: "a JSON Schema object", def: "none", doc: "the tool's arguments", fn: func(at string, _, v ast.Node) {
					if p, ok := d.anyValue(v, 0).(map[string]any); ok {
						t.Parameters = p
					} else {
						d.errf(v, "%s: want a JSON Schema object, such as {type: object, properties: {sku: {type: string}}}", at)
					}
				}},
			)
		}},
		field{name: "mcp", accepts: "a mapping", doc: "every tool of an MCP server", fn: func(at string, k, v ast.Node) {
			kinds++
			t.Kind = "mcp"
			d.object(v, at,
				field{name: "command", accepts: "a program and its arguments", def: "one of two", doc: "the server over stdio",
					fn: func(at string, _, v ast.Node) { d.strings(v, at, &t.Command, nil) }},
				field{name: "url", accepts: "an http:// or https:// URL", def: "one of two", doc: "the server over streamable HTTP",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "the MCP server's HTTP endpoint", &t.URL) &&
							!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
							d.errf(v, "%s: %q: want an http:// or https:// URL", at, t.URL)
						}
					}},
				field{name: "headers", accepts: "header: value (`${ENV}` expanded)", def: "none", doc: "with `url`: headers on every request, never logged",
					fn: func(at string, _, v ast.Node) {
						t.HeadersPos = d.pos(v)
						m, ok := d.anyValue(v, 0).(map[string]any)
						if !ok {
							d.errf(v, "%s: want a map of header names to values, such as {Authorization: 'Bearer ${MCP_TOKEN}'}", at)
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
				field{name: "retries", accepts: "a mapping", def: "3 attempts, 200ms doubling to 5s", doc: "bounds the retries of transient failures",
					fn: func(at string, _, v ast.Node) {
						r := &MCPRetrySpec{}
						t.Retry = r
						d.object(v, at,
							field{name: "attempts", accepts: "an integer from 1 to 100", def: "3", doc: "attempts per call",
								fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100, &r.Attempts) }},
							field{name: "initial", accepts: "a duration > 0", def: "200ms", doc: "the first back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Initial) }},
							field{name: "max", accepts: "a duration > 0", def: "5s", doc: "the longest back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Max) }},
							field{name: "timeout", accepts: "a duration > 0", def: "none", doc: "bound on each attempt",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Timeout) }},
						)
					}},
				field{name: "resources", accepts: "true or false", def: "`false`", doc: "add a `read_resource` tool over the server's resources",
					fn: func(at string, _, v ast.Node) { d.boolean(v, at, &t.Resources) }},
			)
			if (len(t.Command) == 0) == (t.URL == "") {
				d.errf(k, "%s: want exactly one of command (a program and its arguments, over stdio) or url (streamable HTTP)", at)
			}
			if len(t.Headers) > 0 && t.URL == "" {
				d.errAt(t.HeadersPos, "%s.mcp.headers: headers apply to an MCP server over HTTP (url); a command gets its settings from its environment", what)
			}
		}},
		field{name: "retrieval", accepts: "a mapping", doc: "a search tool over the documents of a JSON-lines file (agents.md, \"Retrieval\")",
			fn: func(at string, k, v ast.Node) {
				kinds++
				d.retrieval(v, at, &t)
			}},
		field{name: "approval", accepts: "`{deadline, onTimeout}`", def: "none", doc: "every call of the entry's tools waits for a human's answer; needs `approvals`",
			fn: func(at string, k, v ast.Node) { t.Approval = d.approval(k, v, at) }},
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
		field{name: "name", accepts: "an operator name", def: "`sink`, `output-NAME`", doc: "the operator's name",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "an operator name", &s.Name) }},
		field{name: "stdout", accepts: "`{}`", doc: "JSON lines on stdout (at least once)", fn: func(at string, _, v ast.Node) {
			kinds++
			s.Stdout = true
			d.object(v, at)
		}},
		field{name: "file", accepts: "`{dir}` or `{path}`", doc: "JSON-lines files", fn: func(at string, k, v ast.Node) {
			kinds++
			f := &FileSinkSpec{}
			s.File = f
			d.object(v, at,
				field{name: "dir", accepts: "a directory", def: "one of two", doc: "exactly once: files `DIR/part-SUBTASK-RUN-SEQ` published when the checkpoint covering them completes",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a directory", &f.Dir) }},
				field{name: "path", accepts: "a file path", def: "one of two", doc: "at least once: one file per subtask, truncated at start",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a file path", &f.Path) }},
			)
			if (f.Dir == "") == (f.Path == "") {
				d.errf(k, "%s: want exactly one of dir (exactly once: files published at checkpoints) or path (one file, at least once)", at)
			}
		}},
		field{name: "parquet", accepts: "a mapping", doc: "Parquet files, exactly once (connectors.md, \"Parquet files\")",
			fn: func(at string, k, v ast.Node) { kinds++; s.Parquet = d.parquetSink(k, v, at) }},
		field{name: "postgres", accepts: "a mapping", doc: "rows of a PostgreSQL table (connectors.md, \"PostgreSQL sink\")",
			fn: func(at string, k, v ast.Node) { kinds++; s.Postgres = d.postgresSink(k, v, what) }},
		field{name: "kafka", accepts: "a mapping", doc: "records of a Kafka topic", fn: func(at string, k, v ast.Node) {
			kinds++
			ks := &KafkaSinkSpec{Delivery: "at-least-once"}
			s.Kafka = ks
			d.object(v, at,
				field{name: "topic", required: true, accepts: "a topic name", doc: "the topic", fn: func(at string, _, v ast.Node) {
					ks.TopicPos = d.pos(v)
					d.nonEmpty(v, at, "a topic name", &ks.Topic)
				}},
				field{name: "delivery", accepts: "`at-least-once`, `exactly-once`", def: "`at-least-once`", doc: "`exactly-once`: transactions committed with checkpoints; a record the sink cannot write in its format is a dead letter on `source.deadLetters`",
					fn: func(at string, _, v ast.Node) {
						d.oneOf(v, at, &ks.Delivery, "at-least-once", "exactly-once")
					}},
				field{name: "key", accepts: "a field path", def: "none", doc: "the field whose value is the record key", fn: func(at string, _, v ast.Node) {
					if d.nonEmpty(v, at, "a field path", &ks.Key) {
						if _, err := parseFieldPath(ks.Key); err != nil {
							d.errf(v, "%s: %v", at, err)
						}
					}
				}},
				field{name: "transactionalIdPrefix", accepts: "a prefix unique to the job", def: "`weir-NAME-SINK`", doc: "prefix of the exactly-once producers' transactional ids",
					fn: func(at string, _, v ast.Node) {
						d.nonEmpty(v, at, "a prefix unique to the job", &ks.TransactionalIDPrefix)
					}},
				field{name: "format", accepts: "a format", def: "`json`", doc: "the values' format; a record that does not fit is a dead letter (formats.md)",
					fn: func(at string, k, v ast.Node) {
						ks.Format = d.recordFormat(k, v, at, true)
					}},
				field{name: "keyFormat", accepts: "a format", def: "none (key as text)", doc: "the keys' format; needs `key`",
					fn: func(at string, k, v ast.Node) {
						ks.KeyFormat = d.recordFormat(k, v, at, true)
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
