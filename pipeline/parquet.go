package pipeline

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/bytesize"
)

// ParquetSinkSpec writes records exactly once as Parquet files under Path
// (a directory or an s3://, gs://, azblob:// URL), with the declared
// columns, partitioned by event time (package connector/parquet):
//
//	sink:
//	  parquet:
//	    path: out/orders            # or s3://bucket/prefix?region=...
//	    fields: {id: int64, customer: string, amount: double, note: optional string}
//	    partition: dt={yyyy}-{MM}-{dd}/hour={HH}   # default; none: no directories
//	    rollSize: 128MiB            # default
//	    compression: zstd           # default; snappy, none
type ParquetSinkSpec struct {
	Path    string
	PathPos Pos
	// Fields are the columns, in the order written in the file.
	Fields      []parquet.Field
	Partition   string
	RollSize    int64
	Compression string
	// DeadLetters names the output receiving the records that do not fit
	// the fields (pipeline/sinkdead.go); "": the source's deadLetters.
	DeadLetters    string
	DeadLettersPos Pos
}

func (p *ParquetSinkSpec) options() parquet.Options {
	return parquet.Options{Path: p.Path, Partition: p.Partition, RollSize: p.RollSize, Compression: p.Compression}
}

// parquetSink decodes sink.parquet (what is "sink.parquet" or
// "outputs.NAME.sink.parquet").
func (d *dec) parquetSink(k, n ast.Node, what string) *ParquetSinkSpec {
	p := &ParquetSinkSpec{}
	var rollPos, partPos, compPos ast.Node
	ok := d.object(n, what,
		field{name: "path", required: true, accepts: "a directory, or an s3://, gs://, azblob:// URL", doc: "where the Parquet files go",
			fn: func(at string, _, v ast.Node) {
				p.PathPos = d.pos(v)
				d.nonEmpty(v, at, "a directory or a URL (s3://BUCKET/PREFIX, gs://, azblob://, file://)", &p.Path)
			}},
		field{name: "fields", required: true, accepts: "NAME: TYPE", doc: "the columns: `string`, `int64`, `double`, `boolean`, `timestamp`, or `optional TYPE`",
			fn: func(at string, _, v ast.Node) { p.Fields = d.parquetFields(v, at) }},
		field{name: "partition", accepts: "a pattern of event time", def: "`dt={yyyy}-{MM}-{dd}/hour={HH}`", doc: "the directories of event time the files go in",
			fn: func(at string, _, v ast.Node) {
				partPos = v
				d.nonEmpty(v, at, "a pattern such as "+parquet.DefaultPartition+", or none", &p.Partition)
			}},
		field{name: "rollSize", accepts: "a size such as 128MiB", def: "`128MiB`", doc: "a file is rolled at this size (and at checkpoints)",
			fn: func(at string, _, v ast.Node) {
				rollPos = v
				const want = "want a size such as 128MiB (KiB, MiB, GiB) or a number of bytes, at most 5GiB"
				var s string
				switch v.(type) {
				case *ast.StringNode, *ast.LiteralNode:
					if !d.str(v, at, &s) { // expands ${VAR}
						return
					}
				default:
					t, ok := scalarText(v) // a YAML integer
					if !ok {
						d.errf(v, "%s: got %s; %s", at, describe(v), want)
						return
					}
					s = t
				}
				size, err := bytesize.Parse(s)
				if err != nil || size <= 0 {
					d.errf(v, "%s: %q: %s", at, s, want)
					return
				}
				p.RollSize = size
			}},
		field{name: "compression", accepts: "`zstd`, `snappy`, `none`", def: "`zstd`", doc: "the files' compression", fn: func(at string, _, v ast.Node) {
			compPos = v
			d.oneOf(v, at, &p.Compression, parquet.Compressions...)
		}},
		field{name: "deadLetters", accepts: "the name of an output", def: "`source.deadLetters`", doc: "output of the records the columns cannot hold",
			fn: func(at string, _, v ast.Node) {
				p.DeadLettersPos = d.pos(v)
				d.nonEmpty(v, at, "the name of an output", &p.DeadLetters)
			}},
	)
	if !ok || p.Path == "" {
		return p
	}
	// The options' own check, reported at the key it is about.
	if err := p.options().Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), "parquet: ")
		at := p.PathPos
		switch {
		case strings.HasPrefix(msg, "partition") && partPos != nil:
			at = d.pos(partPos)
		case strings.HasPrefix(msg, "rollSize") && rollPos != nil:
			at = d.pos(rollPos)
		case strings.HasPrefix(msg, "compression") && compPos != nil:
			at = d.pos(compPos)
		}
		d.errAt(at, "%s: %s", what, msg)
	}
	return p
}

// parquetFields decodes the columns: a mapping of name to type, a type
// being one of parquet.FieldTypes, optionally preceded by "optional ".
func (d *dec) parquetFields(n ast.Node, what string) []parquet.Field {
	kvs, ok := d.entries(n, what)
	if !ok {
		return nil
	}
	want := "want one of " + strings.Join(parquet.FieldTypes, ", ") + ", each optionally preceded by \"optional \" (nulls allowed)"
	if len(kvs) == 0 {
		d.errf(n, "%s: no columns; want a mapping of field name to type (%s)", what, want)
		return nil
	}
	var out []parquet.Field
	seen := map[string]bool{}
	for _, kv := range kvs {
		name, kn, ok := d.keyOf(kv)
		if !ok {
			continue
		}
		if seen[name] {
			d.errf(kn, "%s: field %q given twice", what, name)
			continue
		}
		seen[name] = true
		v := d.unwrap(kv.Value)
		var typ string
		if !d.str(v, what+"."+name, &typ) {
			continue
		}
		f := parquet.Field{Name: name, Type: strings.TrimSpace(typ)}
		if rest, found := strings.CutPrefix(f.Type, "optional "); found {
			f.Type, f.Optional = strings.TrimSpace(rest), true
		}
		if err := parquet.CheckFields([]parquet.Field{f}); err != nil {
			d.errf(v, "%s.%s: type %q; %s", what, name, typ, want)
			continue
		}
		out = append(out, f)
	}
	return out
}

// parquetSink adds the Parquet sink of output; it returns the sink's
// description.
func (b *builder) parquetSink(name, output string, p *ParquetSinkSpec, in weir.Stream[Record]) string {
	rejects, route := b.sinkRejects(name, output, p.DeadLetters)
	route(parquet.SinkFieldsRejecting(in, name, p.options(), p.Fields, rejects).UID(name))
	return describeParquet(p)
}

func describeParquet(p *ParquetSinkSpec) string {
	return fmt.Sprintf("Parquet files in %s (exactly once)", p.Path)
}
