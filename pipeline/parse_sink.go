package pipeline

import (
	"github.com/goccy/go-yaml/ast"
)

// sink reads a sink (sink, a named output's): exactly one kind.
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
				field{name: "path", accepts: "a file path", def: "one of two", doc: "one file per subtask, truncated when the job starts afresh, cut back to its length at the checkpoint it resumes from and appended to (exactly once after a resume or at the end; lines are in the file before their checkpoint completes), flushed at every checkpoint",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a file path", &f.Path) }},
			)
			if (f.Dir == "") == (f.Path == "") {
				d.errf(k, "%s: want exactly one of dir (exactly once: files published at checkpoints) or path (one file a subtask, cut back to the checkpoint on resume)", at)
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
