package pipeline

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// kafka reads the kafka section: brokers or an embedded broker, and the
// cluster's security and Schema Registry (parse_security.go, format.go).
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
					field{name: "produce", accepts: "a list", def: "none", doc: "JSON-lines files loaded into topics that are empty at start, one record per line (the files of one topic in their order), so examples need no producer; with `dir`, a load a kill stopped part way is finished at the next start",
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
