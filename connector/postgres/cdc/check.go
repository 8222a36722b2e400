package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrServerSetup is wrapped by the errors of a server that cannot stream
// changes to this source as configured: wal_level is not logical, the
// role lacks the REPLICATION privilege, a listed table is not published,
// or the slot belongs to another output plugin (C8).
var ErrServerSetup = errors.New("cdc: server not set up for logical replication")

// slotInfo is what the server says of the source's slot.
type slotInfo struct {
	exists    bool
	confirmed LSN
}

// checkServer runs the checks of C8 on conn, creates the publication if
// missing (C9), and reports the slot's state.
func checkServer(ctx context.Context, conn *pgx.Conn, o Options, log *slog.Logger) (slotInfo, error) {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return slotInfo{}, fmt.Errorf("cdc: SHOW wal_level: %w", err)
	}
	if level != "logical" {
		return slotInfo{}, fmt.Errorf("%w: wal_level is %s; set wal_level = logical (postgresql.conf or ALTER SYSTEM) and restart the server", ErrServerSetup, level)
	}
	var user string
	var canReplicate bool
	if err := conn.QueryRow(ctx, "SELECT current_user, rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user").Scan(&user, &canReplicate); err != nil {
		return slotInfo{}, fmt.Errorf("cdc: reading the role's privileges: %w", err)
	}
	if !canReplicate {
		return slotInfo{}, fmt.Errorf("%w: role %q lacks the REPLICATION privilege; grant it with ALTER ROLE %s REPLICATION", ErrServerSetup, user, pgx.Identifier{user}.Sanitize())
	}
	if err := ensurePublication(ctx, conn, o, log); err != nil {
		return slotInfo{}, err
	}
	var si slotInfo
	var plugin string
	var confirmed *LSN
	err := conn.QueryRow(ctx, "SELECT plugin, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", o.Slot).Scan(&plugin, &confirmed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return si, nil
	case err != nil:
		return si, fmt.Errorf("cdc: reading slot %s: %w", o.Slot, err)
	}
	if plugin != "pgoutput" {
		return si, fmt.Errorf("%w: slot %s uses the output plugin %q; want a pgoutput slot (name another Options.Slot)", ErrServerSetup, o.Slot, plugin)
	}
	si.exists = true
	if confirmed != nil {
		si.confirmed = *confirmed
	}
	return si, nil
}

// ensurePublication creates the publication if missing, and checks that
// it publishes every table of o.Tables.
func ensurePublication(ctx context.Context, conn *pgx.Conn, o Options, log *slog.Logger) error {
	var all bool
	err := conn.QueryRow(ctx, "SELECT puballtables FROM pg_publication WHERE pubname = $1", o.Publication).Scan(&all)
	if errors.Is(err, pgx.ErrNoRows) {
		stmt := "CREATE PUBLICATION " + pgx.Identifier{o.Publication}.Sanitize()
		if len(o.Tables) == 0 {
			stmt += " FOR ALL TABLES"
		} else {
			names := make([]string, len(o.Tables))
			for i, t := range o.Tables {
				parts, _ := tableIdent(t) // checked by Validate
				names[i] = pgx.Identifier(parts).Sanitize()
			}
			stmt += " FOR TABLE " + strings.Join(names, ", ")
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("cdc: creating the publication (%s): %w", stmt, err)
		}
		log.Info("cdc: created the publication", "statement", stmt)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cdc: reading publication %s: %w", o.Publication, err)
	}
	if all {
		return nil
	}
	for _, t := range o.Tables {
		parts, _ := tableIdent(t)
		schema, name := "public", parts[0]
		if len(parts) == 2 {
			schema, name = parts[0], parts[1]
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
			o.Publication, schema, name).Scan(&n); err != nil {
			return fmt.Errorf("cdc: reading publication %s: %w", o.Publication, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: table %s.%s is not in publication %s; add it (ALTER PUBLICATION %s ADD TABLE %s) or remove it from the tables",
				ErrServerSetup, schema, name, o.Publication, pgx.Identifier{o.Publication}.Sanitize(), pgx.Identifier{schema, name}.Sanitize())
		}
	}
	return nil
}

// publishedTables lists the publication's tables (schema, name), sorted.
func publishedTables(ctx context.Context, tx pgx.Tx, publication string) ([][2]string, error) {
	rows, err := tx.Query(ctx, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2", publication)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for rows.Next() {
		var s, t string
		if err := rows.Scan(&s, &t); err != nil {
			return nil, err
		}
		out = append(out, [2]string{s, t})
	}
	return out, rows.Err()
}
