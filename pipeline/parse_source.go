package pipeline

import (
	"math"
	"regexp"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// source reads the source section: exactly one kind, and the keys every
// kind has.
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
