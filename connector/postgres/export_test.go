package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// WriteRows encodes rows for columns of table (without key) as Write does,
// in COPY's binary format when binary (the table's types must allow it)
// else in text, and sends those not rejected by one COPY in one
// transaction. rejected holds, per row, its rejection (nil when encoded);
// err the failure of the COPY.
func WriteRows(ctx context.Context, connString, table string, columns []string, rows [][]any, binary bool) (rejected []error, err error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	m := pgtype.NewMap()
	t, err := describe(ctx, conn, m, pgx.Identifier{table}, columns, nil)
	if err != nil {
		return nil, err
	}
	if binary && !t.binary {
		return nil, fmt.Errorf("table %s: binary COPY refused for types %v", table, t.oids)
	}
	b := rowBuf{binary: binary}
	var scratch []byte
	for _, vals := range rows {
		var err error
		scratch, err = t.encodeRow(m, &b, opWrite, vals, scratch)
		rejected = append(rejected, err)
	}
	return rejected, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return t.write(ctx, tx.Conn(), &b, 0)
	})
}
