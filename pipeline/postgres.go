package pipeline

import (
	gojson "encoding/json"
	"fmt"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/kafkasec"
)

// PostgresSinkSpec writes records to a PostgreSQL table
// (connector/postgres; docs/connectors.md "PostgreSQL sink").
type PostgresSinkSpec struct {
	// URL is the connection string (${VAR} expanded); Password, when set,
	// came from ${VAR}.
	URL      string
	Password kafkasec.Secret
	Table    string
	// Columns maps each target column to the field path of its value.
	Columns map[string]string
	// Key are the upsert's key columns (empty: inserts).
	Key []string
	// Delete is an expression; a record for which it is true deletes the
	// row of its key.
	Delete    string
	DeletePos Pos
	// Delivery is exactly-once (default) or at-least-once; Mode
	// progress-table (default) or two-phase.
	Delivery, Mode string
	Batch          int
	ID             string
	// DeadLetters names the output receiving the records the table
	// cannot hold (pipeline/sinkdead.go); "": the source's deadLetters.
	DeadLetters    string
	DeadLettersPos Pos
}

// postgresSink parses sink.postgres.
func (d *dec) postgresSink(k, v ast.Node, what string) *PostgresSinkSpec {
	p := &PostgresSinkSpec{Columns: map[string]string{}}
	w := what + ".postgres"
	d.object(v, w,
		field{name: "url", required: true, accepts: "a connection string such as postgres://user@host:5432/db?sslmode=verify-full", doc: "the connection string, such as `'${PG_URL}'`",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "a connection string such as postgres://user@host:5432/db?sslmode=verify-full", &p.URL)
			}},
		field{name: "password", accepts: "`${ENV}`", def: "none", doc: "the password, from the environment only", fn: func(at string, _, v ast.Node) {
			d.secret(v, at, "", &p.Password)
		}},
		field{name: "table", required: true, accepts: "a table name such as orders or shop.orders", doc: "the table", fn: func(at string, _, v ast.Node) {
			d.nonEmpty(v, at, "a table name such as orders or shop.orders", &p.Table)
		}},
		field{name: "columns", required: true, accepts: "COLUMN: field path", doc: "the record field of each column", fn: func(at string, _, v ast.Node) {
			kvs, _ := d.entries(v, at)
			for _, kv := range kvs {
				name, kn, ok := d.keyOf(kv)
				if !ok {
					continue
				}
				var path string
				if d.nonEmpty(d.unwrap(kv.Value), w+".columns."+name, "the field path of the column's value, such as order.id", &path) {
					if _, err := parseFieldPath(path); err != nil {
						d.errf(kn, "%s.columns.%s: %v", w, name, err)
					}
					p.Columns[name] = path
				}
			}
			if len(kvs) == 0 {
				d.errf(v, "%s: empty; want a mapping of column names to field paths, such as {id: order.id, total: total}", at)
			}
		}},
		field{name: "key", accepts: "a list of columns", def: "none", doc: "upsert on these columns",
			fn: func(at string, _, v ast.Node) { d.strings(v, at, &p.Key, nil) }},
		field{name: "delete", accepts: "an expression", def: "none", doc: "true for records that delete their row", fn: func(at string, _, v ast.Node) {
			if d.nonEmpty(v, at, "an expression true for records that delete their row, such as op == \"delete\"", &p.Delete) {
				p.DeletePos = exprPos(d.pos(v), v)
				if _, err := compileExpr(p.Delete, exprBool); err != nil {
					d.errAt(p.DeletePos, "%s: bad expression: %s; want an expression returning a bool, such as op == \"delete\"", at, exprMessage(err))
				}
			}
		}},
		field{name: "delivery", accepts: "`exactly-once`, `at-least-once`", def: "`exactly-once`", doc: "`at-least-once` writes without the progress table",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &p.Delivery, "exactly-once", "at-least-once") }},
		field{name: "mode", accepts: "`progress-table`, `two-phase`", def: "`progress-table`", doc: "how exactly-once is kept: a progress table, or two-phase commit",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &p.Mode, "progress-table", "two-phase") }},
		field{name: "batch", accepts: "an integer from 1 to 1_000_000", def: "1000", doc: "rows per statement batch",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1_000_000, &p.Batch) }},
		field{name: "id", accepts: "a name unique to the job, such as orders-job", def: "the sink's name", doc: "the sink's identity in the progress table",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "a name unique to the job, such as orders-job", &p.ID)
			}},
		field{name: "deadLetters", accepts: "the name of an output", def: "`source.deadLetters`", doc: "output of the records the table cannot hold",
			fn: func(at string, _, v ast.Node) {
				p.DeadLettersPos = d.pos(v)
				d.nonEmpty(v, at, "the name of an output", &p.DeadLetters)
			}},
	)
	bad := false
	for _, c := range p.Key {
		if _, ok := p.Columns[c]; !ok && len(p.Columns) > 0 {
			d.errf(k, "%s.key: column %q is not one of columns; want key columns among %v", w, c, sortedKeys(p.Columns))
			bad = true
		}
	}
	if p.Delete != "" && len(p.Key) == 0 {
		d.errf(k, "%s.delete: needs key (rows are deleted by their key columns)", w)
		bad = true
	}
	if !bad && p.Table != "" && len(p.Columns) > 0 && p.URL != "" {
		// The remaining checks of the connector (table, id), one line each.
		o := p.options(nil)
		if err := o.Validate(); err != nil {
			d.errf(k, "%s: %v", w, err)
		}
	}
	return p
}

// options are the connector's options for the spec; txnSuffix (in group
// mode, "<group>-<task>") keeps each task's transaction names apart.
func (p *PostgresSinkSpec) options(b *builder) postgres.Options[Record] {
	cols := sortedKeys(p.Columns)
	paths := make([]fieldPath, len(cols))
	for i, c := range cols {
		paths[i], _ = parseFieldPath(p.Columns[c])
	}
	o := postgres.Options[Record]{URL: p.URL, Password: string(p.Password), Table: p.Table, Columns: cols, Key: p.Key,
		Delivery: postgres.Delivery(p.Delivery), Mode: postgres.Mode(p.Mode), Batch: p.Batch, ID: p.ID,
		Row: func(r Record) ([]any, error) {
			vals := make([]any, len(paths))
			for i, fp := range paths {
				v, _ := fp.get(r)
				switch v.(type) {
				case map[string]any, []any:
					// Objects and arrays go as JSON text (a json, jsonb
					// or text column reads it).
					j, err := gojson.Marshal(v)
					if err != nil {
						return nil, fmt.Errorf("%w: column %s: %v", weir.ErrRejected, cols[i], err)
					}
					v = string(j)
				}
				vals[i] = v
			}
			return vals, nil
		}}
	if p.Delete != "" {
		prog, _ := compileExpr(p.Delete, exprBool)
		ref := &progRef{p: &vmProgram{prog: prog}}
		at, src := p.DeletePos, p.Delete
		o.Delete = func(r Record) (bool, error) {
			out, err := ref.run(r)
			if err != nil {
				return false, fmt.Errorf("%w: delete at %s (%s): %s", weir.ErrRejected, at, src, exprMessage(err))
			}
			del, ok := out.(bool)
			if !ok && out != nil {
				return false, fmt.Errorf("%w: delete at %s (%s): returned %T %v, want a bool", weir.ErrRejected, at, src, out, out)
			}
			return del, nil
		}
	}
	if b != nil && b.txnSuffix != "" {
		if o.ID == "" {
			o.ID = p.Table
		}
		o.ID += "-" + b.txnSuffix
	}
	return o
}

// postgresSink ends in in a PostgreSQL sink and says where it writes.
func (b *builder) postgresSink(p *PostgresSinkSpec, name, output string, in weir.Stream[Record]) string {
	o := p.options(b)
	var route func(weir.Stream[struct{}])
	o.Rejected, route = b.sinkRejects(name, output, p.DeadLetters)
	route(postgres.Sink(in, name, o).UID(name))
	return describePostgres(p)
}

// describePostgres says where a PostgreSQL sink's records go.
func describePostgres(p *PostgresSinkSpec) string {
	g := "exactly once, " + orDefault(p.Mode, string(postgres.ProgressTable))
	if p.Delivery == string(postgres.AtLeastOnce) {
		g = "at least once"
	}
	how := "inserts"
	if len(p.Key) > 0 {
		how = "upserts on " + fmt.Sprint(p.Key)
	}
	return "PostgreSQL table " + p.Table + " (" + how + ", " + g + ")"
}
