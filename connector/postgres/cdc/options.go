package cdc

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Defaults of Options.
const (
	DefaultPublication    = "weir"
	DefaultSlot           = "weir"
	DefaultStatusInterval = 10 * time.Second
	DefaultBatchSize      = 256
	DefaultBufferedBatch  = 16
)

// Options configure a Source. The zero value, with URL set, reads the
// publication "weir" through the slot "weir", without an initial snapshot,
// without end.
type Options struct {
	// URL is the connection string of the database (a postgres:// URL or
	// key=value pairs; PGPASSFILE and the other libpq variables apply, as
	// in pgx). The source adds replication=database for its replication
	// connection. Required.
	URL string
	// Publication is the publication whose tables are streamed; "" means
	// DefaultPublication. It is created if missing (C9): FOR TABLE Tables,
	// or FOR ALL TABLES when Tables is empty.
	Publication string
	// Slot is the logical replication slot (pgoutput) the source reads
	// and confirms positions to; "" means DefaultSlot. It is created if
	// missing (C9). Slot names are lower-case letters, digits and _.
	Slot string
	// Tables are the tables ("name" or "schema.name") of the publication
	// when the source creates it. When it exists, each listed table must be
	// in it. Empty: the publication's tables as they are.
	Tables []string
	// Snapshot makes a fresh start (no restored checkpoint) copy the
	// published tables' rows first, as OpRead changes, from a snapshot
	// exported when the slot is created, then stream from the slot's
	// consistent point (C5). A fresh start with Snapshot drops and
	// recreates an existing slot (its snapshot cannot be exported again).
	Snapshot bool
	// Bounded ends the source once it has read up to the WAL position
	// the server reported when the source started (C7): transactions
	// that commit at or after it are not emitted.
	Bounded bool
	// StatusInterval is how often a standby status update (the confirmed
	// position, and a keepalive) is sent to the server when nothing else
	// makes one due; 0 means DefaultStatusInterval. It must be below the
	// server's wal_sender_timeout (60s by default).
	StatusInterval time.Duration
	// BatchSize is how many changes the streaming goroutine hands to Poll
	// at once and the most one Poll emits; 0 means DefaultBatchSize.
	BatchSize int
	// BufferedBatches bounds the batches decoded but not yet emitted (C3);
	// 0 means DefaultBufferedBatch.
	BufferedBatches int
}

var slotRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Validate reports what is wrong with the options (nil if nothing is).
func (o Options) Validate() error {
	if o.URL == "" {
		return fmt.Errorf("cdc: Options.URL is empty; want a connection string such as postgres://user@host/db")
	}
	if _, err := pgconn.ParseConfig(o.URL); err != nil {
		return fmt.Errorf("cdc: Options.URL: %v", err)
	}
	if o.Slot != "" && !slotRE.MatchString(o.Slot) {
		return fmt.Errorf("cdc: Options.Slot %q: want 1 to 63 lower-case letters, digits or _", o.Slot)
	}
	if o.Publication != "" && (len(o.Publication) > 63 || strings.ContainsRune(o.Publication, 0)) {
		return fmt.Errorf("cdc: Options.Publication %q: want a name of 1 to 63 characters", o.Publication)
	}
	for _, t := range o.Tables {
		if _, err := tableIdent(t); err != nil {
			return err
		}
	}
	if o.StatusInterval < 0 {
		return fmt.Errorf("cdc: Options.StatusInterval %v: want 0 (meaning %v) or a positive duration", o.StatusInterval, DefaultStatusInterval)
	}
	if o.BatchSize < 0 {
		return fmt.Errorf("cdc: Options.BatchSize %d: want 0 (meaning %d) or a positive number", o.BatchSize, DefaultBatchSize)
	}
	if o.BufferedBatches < 0 {
		return fmt.Errorf("cdc: Options.BufferedBatches %d: want 0 (meaning %d) or a positive number", o.BufferedBatches, DefaultBufferedBatch)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Publication == "" {
		o.Publication = DefaultPublication
	}
	if o.Slot == "" {
		o.Slot = DefaultSlot
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BufferedBatches == 0 {
		o.BufferedBatches = DefaultBufferedBatch
	}
	return o
}

// tableIdent splits "schema.name" or "name" into its parts.
func tableIdent(t string) ([]string, error) {
	parts := strings.Split(t, ".")
	if len(parts) > 2 || t == "" {
		return nil, fmt.Errorf("cdc: Options.Tables: %q: want a table name such as orders or public.orders", t)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("cdc: Options.Tables: %q: want a table name such as orders or public.orders", t)
		}
	}
	return parts, nil
}
