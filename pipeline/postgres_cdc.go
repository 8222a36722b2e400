package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres/cdc"
)

// PostgresSourceSpec is source.postgres: the changes of PostgreSQL tables
// through logical replication (package connector/postgres/cdc).
type PostgresSourceSpec struct {
	Pos         Pos
	URL         string
	Publication string // "" means cdc.DefaultPublication
	Slot        string // "" means cdc.DefaultSlot
	Tables      []string
	Snapshot    bool
	Bounded     bool
}

// postgresSource parses source.postgres.
func (d *dec) postgresSource(k, n ast.Node, s *SourceSpec) {
	ps := &PostgresSourceSpec{Pos: d.pos(k)}
	s.Postgres = ps
	var urlNode, slotNode ast.Node
	var tablePos []Pos
	d.object(n, "source.postgres",
		field{name: "url", required: true, accepts: "a connection string such as postgres://user@host/db or ${PG_URL}", doc: "the connection string, such as `'${PG_URL}'`",
			fn: func(at string, _, v ast.Node) {
				urlNode = v
				d.nonEmpty(v, at, "a connection string such as postgres://user@host/db or ${PG_URL}", &ps.URL)
			}},
		field{name: "publication", accepts: "a publication name such as weir", def: "`weir`", doc: "the publication streamed, created if missing",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "a publication name such as weir", &ps.Publication)
			}},
		field{name: "slot", accepts: "a slot name such as weir", def: "`weir`", doc: "the logical replication slot, created if missing",
			fn: func(at string, _, v ast.Node) {
				slotNode = v
				d.nonEmpty(v, at, "a slot name such as weir", &ps.Slot)
			}},
		field{name: "tables", accepts: "a list of strings", def: "all tables", doc: "the publication's tables when it is created",
			fn: func(at string, _, v ast.Node) { d.strings(v, at, &ps.Tables, &tablePos) }},
		field{name: "snapshot", accepts: "true or false", def: "`false`", doc: "copy the existing rows first (`op: read`), on a fresh start",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &ps.Snapshot) }},
		field{name: "bounded", accepts: "true or false", def: "`false`", doc: "stop at the WAL position of the start",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &ps.Bounded) }},
	)
	// The connector's own checks, each reported at its key's value.
	if urlNode != nil && ps.URL != "" {
		if err := (cdc.Options{URL: ps.URL}).Validate(); err != nil {
			d.errf(urlNode, "source.postgres.url: %v", err)
		}
	}
	if slotNode != nil && ps.Slot != "" {
		if err := (cdc.Options{URL: "postgres://x/y", Slot: ps.Slot}).Validate(); err != nil {
			d.errf(slotNode, "source.postgres.slot: %v", err)
		}
	}
	for i, t := range ps.Tables {
		if err := (cdc.Options{URL: "postgres://x/y", Tables: []string{t}}).Validate(); err != nil {
			d.errAt(tablePos[i], "source.postgres.tables[%d]: %v", i, err)
		}
	}
}

func (p *PostgresSourceSpec) options() cdc.Options {
	return cdc.Options{URL: p.URL, Publication: p.Publication, Slot: p.Slot, Tables: p.Tables, Snapshot: p.Snapshot, Bounded: p.Bounded}
}

// postgresSource builds source.postgres: it checks the server first (C8
// of package cdc), so a server without wal_level = logical or a role
// without REPLICATION is refused before the job starts.
func (b *builder) postgresSource(ctx context.Context, name string, s *SourceSpec) (weir.Stream[Record], error) {
	p := s.Postgres
	src := cdc.NewSourceOf(p.options(), changeRecord)
	if err := src.Check(ctx); err != nil {
		return weir.Stream[Record]{}, fmt.Errorf("%s: source.postgres: %w", p.Pos, err)
	}
	return weir.FromSource(b.env, name, src, kafkaWatermarks(s)), nil
}

// changeRecord is a change as a pipeline record:
//
//	{"op": "insert", "schema": "public", "table": "orders", "lsn": "0/16B3748",
//	 "commitTime": 1764856800123, "before": {...}, "after": {...}}
//
// before and after are present when the change has them; their values
// are JSON-shaped (jsonValue).
func changeRecord(c *cdc.Change) Record {
	r := Record{"op": string(c.Op), "schema": c.Schema, "table": c.Table, "lsn": c.LSN.String(),
		"commitTime": float64(c.CommitTime.UnixMilli())}
	if c.Before != nil {
		r["before"] = rowRecord(c.Before)
	}
	if c.After != nil {
		r["after"] = rowRecord(c.After)
	}
	return r
}

func rowRecord(m map[string]any) Record {
	out := make(Record, len(m))
	for k, v := range m {
		out[k] = jsonValue(v)
	}
	return out
}

// jsonValue turns a decoded column value into the shape of a JSON-decoded
// record value: numbers float64 (numeric its nearest float64; bigint
// beyond 2^53 a string, so that no digit is lost), times RFC 3339 strings,
// uuids their text, bytes base64 (as encoding/json writes them), JSON as
// decoded; anything else through its JSON encoding.
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		if x > 1<<53 || x < -(1<<53) {
			return fmt.Sprint(x)
		}
		return float64(x)
	case float32:
		return float64(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	case pgtype.Numeric:
		f, err := x.Float64Value()
		if err != nil || !f.Valid {
			return nil
		}
		return f.Float64
	case netip.Prefix:
		return x.String()
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	return out
}
