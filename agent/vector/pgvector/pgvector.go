package pgvector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/vector"
)

// Index kinds (Config.Index).
const (
	// IndexExact has no vector index: a search scores every row of the
	// namespace (sequential scan, or the metadata index first when a
	// filter is selective). Exact; for up to a few hundred thousand rows.
	IndexExact = "exact"
	// IndexHNSW is a graph index: fast approximate search, slower inserts,
	// built as rows arrive (no training). The usual choice.
	IndexHNSW = "hnsw"
	// IndexIVFFlat partitions the vectors into Lists clusters chosen from
	// the rows present when the index is built: build it after loading
	// (Reindex), or recall suffers.
	IndexIVFFlat = "ivfflat"
)

// Limits of pgvector's vector type and of its indexes.
const (
	MaxDim      = 16000
	MaxIndexDim = 2000
)

// Config configures a Store. The zero value of each optional field is its
// default.
type Config struct {
	// ConnString is the database to use: a URL
	// ("postgres://user:pass@host:5432/db") or key=value pairs
	// ("host=/run/postgresql dbname=weir"); required.
	ConnString string
	// Table is the table's name, a plain lower-case identifier, optionally
	// schema-qualified ("rag.docs"): letters, digits and underscores, not
	// starting with a digit, at most 48 characters (index names add a
	// suffix). "" means "weir_vectors".
	Table string
	// Namespace is the part of the table this Store sees; "" is a
	// namespace like any other.
	Namespace string
	// Dim is the vectors' dimension, 1 to MaxDim (MaxIndexDim with an
	// index); required. An existing table must have the same.
	Dim int
	// Index is IndexExact (""), IndexHNSW or IndexIVFFlat.
	Index string
	// M and EfConstruction are HNSW's build parameters (0: pgvector's 16
	// and 64); EfSearch its search breadth (0: 40; at least K for K
	// hits).
	M, EfConstruction, EfSearch int
	// Lists is IVFFlat's number of clusters (0: 100; pgvector suggests
	// rows/1000 up to 1M rows); Probes the clusters searched (0: 1;
	// sqrt(Lists) is a good start).
	Lists, Probes int
	// MaxConns bounds the connection pool (0: pgx's default, the greater
	// of 4 and the number of CPUs).
	MaxConns int
	// SkipSetup leaves the schema alone: Open only checks that the table
	// exists with vectors of Dim dimensions. For users without CREATE
	// privileges, whose DBA made the schema above.
	SkipSetup bool
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// validate checks c and fills in its defaults.
func (c *Config) validate() error {
	switch {
	case c.ConnString == "":
		return errors.New(`pgvector: Config.ConnString is required (a URL "postgres://user@host/db" or "host=... dbname=...")`)
	case c.Dim < 1 || c.Dim > MaxDim:
		return fmt.Errorf("pgvector: Config.Dim is %d; use the vectors' dimension, 1 to %d", c.Dim, MaxDim)
	case c.M < 0 || c.EfConstruction < 0 || c.EfSearch < 0 || c.Lists < 0 || c.Probes < 0 || c.MaxConns < 0:
		return errors.New("pgvector: Config's M, EfConstruction, EfSearch, Lists, Probes and MaxConns must not be negative (0 means the default)")
	}
	if c.Table == "" {
		c.Table = "weir_vectors"
	}
	parts := strings.Split(c.Table, ".")
	if len(parts) > 2 || !identRE.MatchString(parts[0]) || !identRE.MatchString(parts[len(parts)-1]) {
		return fmt.Errorf("pgvector: Config.Table %q is not a plain identifier: use lower-case letters, digits and _ (not first), at most 48 characters, optionally schema.table", c.Table)
	}
	switch c.Index {
	case "":
		c.Index = IndexExact
	case IndexExact, IndexHNSW, IndexIVFFlat:
	default:
		return fmt.Errorf("pgvector: Config.Index is %q; use %q (the default), %q or %q", c.Index, IndexExact, IndexHNSW, IndexIVFFlat)
	}
	if c.Index != IndexExact && c.Dim > MaxIndexDim {
		return fmt.Errorf("pgvector: Config.Dim is %d; pgvector's %s index takes at most %d dimensions: use Index %q or fewer dimensions", c.Dim, c.Index, MaxIndexDim, IndexExact)
	}
	if (c.M != 0 || c.EfConstruction != 0 || c.EfSearch != 0) && c.Index != IndexHNSW {
		return fmt.Errorf("pgvector: Config.M, EfConstruction and EfSearch are HNSW's; Index is %q", c.Index)
	}
	if (c.Lists != 0 || c.Probes != 0) && c.Index != IndexIVFFlat {
		return fmt.Errorf("pgvector: Config.Lists and Probes are IVFFlat's; Index is %q", c.Index)
	}
	return nil
}

// Store is a vector.Store in a Postgres table (see the package
// documentation for the schema and guarantees). It is safe for concurrent
// use: calls share a pool of connections.
type Store struct {
	cfg   Config
	pool  *pgxpool.Pool
	table string // quoted
	// SQL, built once.
	upsertSQL, deleteSQL, searchSQL, searchFilterSQL, countSQL, clearSQL string
}

var _ vector.Store = (*Store)(nil)

// Open connects to the database, sets up the table (unless
// cfg.SkipSetup) and returns the Store; Close releases its connections.
// ctx bounds the connection and the setup.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("pgvector: Config.ConnString: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = int32(cfg.MaxConns)
	}
	// Search settings, per connection. Custom settings of a library not
	// yet loaded are kept as placeholders and applied when it loads;
	// pgvector before 0.8 has no iterative scans and drops those.
	var set []string
	switch cfg.Index {
	case IndexHNSW:
		set = append(set, "SET hnsw.iterative_scan = strict_order")
		if cfg.EfSearch > 0 {
			set = append(set, fmt.Sprintf("SET hnsw.ef_search = %d", cfg.EfSearch))
		}
	case IndexIVFFlat:
		set = append(set, "SET ivfflat.iterative_scan = relaxed_order")
		if cfg.Probes > 0 {
			set = append(set, fmt.Sprintf("SET ivfflat.probes = %d", cfg.Probes))
		}
	}
	if len(set) > 0 {
		pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, strings.Join(set, "; "))
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgvector: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgvector: connecting to %s: %w (check Config.ConnString and that the server is up)", where(pc), err)
	}
	s := &Store{cfg: cfg, pool: pool}
	s.buildSQL()
	if err := s.setup(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func where(pc *pgxpool.Config) string {
	return fmt.Sprintf("host %s port %d database %q as %q", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database, pc.ConnConfig.User)
}

// Config returns the store's configuration, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Close closes the store's connections; it waits for calls in progress.
func (s *Store) Close() { s.pool.Close() }

// ident returns the table's name, quoted; with a suffix, the name of one
// of its indexes: unqualified (as CREATE INDEX takes it, in the table's
// schema) unless qualified is set.
func (s *Store) ident(suffix string, qualified bool) string {
	parts := strings.Split(s.cfg.Table+suffix, ".")
	if !qualified && len(parts) == 2 {
		parts = parts[1:]
	}
	return pgx.Identifier(parts).Sanitize()
}

func (s *Store) buildSQL() {
	t := s.ident("", true)
	s.table = t
	s.upsertSQL = `INSERT INTO ` + t + ` AS t (namespace, id, embedding, content, metadata)
SELECT $1, u.id, u.embedding::vector, u.content, u.metadata::jsonb
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(id, embedding, content, metadata)
ON CONFLICT (namespace, id) DO UPDATE SET embedding = EXCLUDED.embedding, content = EXCLUDED.content, metadata = EXCLUDED.metadata`
	s.deleteSQL = `DELETE FROM ` + t + ` WHERE namespace = $1 AND id = ANY($2::text[])`
	s.countSQL = `SELECT count(*) FROM ` + t + ` WHERE namespace = $1`
	s.clearSQL = `DELETE FROM ` + t + ` WHERE namespace = $1`
	search := func(filter string) string {
		if s.cfg.Index == IndexExact {
			// Exact: the ID breaks ties inside the ORDER BY, so the K-th
			// place goes to the lowest ID among equal scores.
			return `SELECT id, content, metadata, -(embedding <#> $2::vector) FROM ` + t +
				` WHERE namespace = $1` + filter + ` ORDER BY embedding <#> $2::vector, id LIMIT $3`
		}
		// An index serves ORDER BY distance LIMIT k only; ties are sorted
		// by ID outside it.
		return `SELECT id, content, metadata, -d FROM (SELECT id, content, metadata, embedding <#> $2::vector AS d FROM ` + t +
			` WHERE namespace = $1` + filter + ` ORDER BY embedding <#> $2::vector LIMIT $3) s ORDER BY d, id`
	}
	s.searchSQL = search("")
	s.searchFilterSQL = search(` AND metadata @> $4::jsonb`)
}

// setup makes (or, with SkipSetup, checks) the extension, the table and
// the indexes.
func (s *Store) setup(ctx context.Context) error {
	if !s.cfg.SkipSetup {
		if err := s.ensureExtension(ctx); err != nil {
			return err
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// Concurrent CREATE ... IF NOT EXISTS of one table can fail on
			// the catalog's unique indexes: serialize Opens of a table.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('weir.pgvector.' || $1))`, s.cfg.Table); err != nil {
				return err
			}
			stmts := []string{fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
namespace text NOT NULL,
id text NOT NULL,
embedding vector(%d) NOT NULL,
content text NOT NULL DEFAULT '',
metadata jsonb NOT NULL DEFAULT '{}',
PRIMARY KEY (namespace, id))`, s.table, s.cfg.Dim)}
			if err := s.checkDim(ctx, tx, false); err != nil {
				return err
			}
			stmts = append(stmts, `CREATE INDEX IF NOT EXISTS `+s.ident("_metadata", false)+` ON `+s.table+` USING gin (metadata jsonb_path_ops)`)
			switch s.cfg.Index {
			case IndexHNSW:
				var with []string
				if s.cfg.M > 0 {
					with = append(with, fmt.Sprintf("m = %d", s.cfg.M))
				}
				if s.cfg.EfConstruction > 0 {
					with = append(with, fmt.Sprintf("ef_construction = %d", s.cfg.EfConstruction))
				}
				stmts = append(stmts, `CREATE INDEX IF NOT EXISTS `+s.ident("_hnsw", false)+` ON `+s.table+` USING hnsw (embedding vector_ip_ops)`+withClause(with))
			case IndexIVFFlat:
				var with []string
				if s.cfg.Lists > 0 {
					with = append(with, fmt.Sprintf("lists = %d", s.cfg.Lists))
				}
				stmts = append(stmts, `CREATE INDEX IF NOT EXISTS `+s.ident("_ivfflat", false)+` ON `+s.table+` USING ivfflat (embedding vector_ip_ops)`+withClause(with))
			}
			for _, q := range stmts {
				if _, err := tx.Exec(ctx, q); err != nil {
					return fmt.Errorf("pgvector: setting up table %s: %w (the user needs CREATE on the schema, or a DBA runs the statements of the package documentation and Config.SkipSetup is set)", s.cfg.Table, err)
				}
			}
			return nil
		})
		if err != nil {
			return wrapCtx(ctx, err)
		}
	}
	return wrapCtx(ctx, s.checkDim(ctx, s.pool, true))
}

func withClause(with []string) string {
	if len(with) == 0 {
		return ""
	}
	return " WITH (" + strings.Join(with, ", ") + ")"
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkDim checks that the table, if it exists, has vectors of Dim
// dimensions; must says that it has to exist.
func (s *Store) checkDim(ctx context.Context, q querier, must bool) error {
	var typ *string
	err := q.QueryRow(ctx, `SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attname = 'embedding' AND NOT a.attisdropped`, s.cfg.Table).Scan(&typ)
	if errors.Is(err, pgx.ErrNoRows) {
		if !must {
			return nil
		}
		return fmt.Errorf("pgvector: table %s does not exist or has no column embedding: create it (package documentation) or unset Config.SkipSetup", s.cfg.Table)
	}
	if err != nil {
		return fmt.Errorf("pgvector: reading the columns of %s: %w", s.cfg.Table, err)
	}
	if want := fmt.Sprintf("vector(%d)", s.cfg.Dim); typ == nil || *typ != want {
		got := "?"
		if typ != nil {
			got = *typ
		}
		return fmt.Errorf("pgvector: table %s has embeddings of type %s, and Config.Dim %d wants %s: use another table, or Dim of the table's", s.cfg.Table, got, s.cfg.Dim, want)
	}
	return nil
}

// ensureExtension creates the vector extension when missing, and says
// what to do when it cannot.
func (s *Store) ensureExtension(ctx context.Context) error {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_extension WHERE extname = 'vector'`).Scan(&n); err != nil {
		return fmt.Errorf("pgvector: checking for the vector extension: %w", wrapCtx(ctx, err))
	}
	if n > 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`)
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "58P01", "0A000": // undefined_file, feature_not_supported: no control file
			return fmt.Errorf("pgvector: the server has no pgvector extension to create (%s): install it on the database server (Debian: postgresql-NN-pgvector; or build github.com/pgvector/pgvector), then run CREATE EXTENSION vector", pe.Message)
		case "42501": // insufficient_privilege
			return fmt.Errorf("pgvector: extension vector is not installed in this database and this user may not create it (%s): run CREATE EXTENSION vector as a superuser", pe.Message)
		}
	}
	return fmt.Errorf("pgvector: extension vector is not installed and CREATE EXTENSION vector failed: %w; run it as a superuser", wrapCtx(ctx, err))
}

// wrapCtx makes an error of a call whose context ended wrap the
// context's error (pgx reports some as its own).
func wrapCtx(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (%v)", ctx.Err(), err)
}

// validateItems checks what every store refuses (S1 of package vector),
// naming the item.
func validateItems(dim int, items []vector.Item) error {
	for i, it := range items {
		switch {
		case it.ID == "":
			return fmt.Errorf("pgvector: item %d has no ID", i)
		case len(it.Vector) == 0:
			return fmt.Errorf("pgvector: item %q has an empty vector", it.ID)
		case len(it.Vector) != dim:
			return fmt.Errorf("pgvector: item %q has %d dimensions; this store's vectors have %d", it.ID, len(it.Vector), dim)
		}
	}
	return nil
}

// appendVector appends v, scaled to unit length, in pgvector's text form
// "[x,y,...]"; float32s are written in their shortest exact form.
func appendVector(dst []byte, v []float32) []byte {
	u := embed.Normalize(slices.Clone(v))
	dst = append(dst, '[')
	for i, x := range u {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendFloat(dst, float64(x), 'g', -1, 32)
	}
	return append(dst, ']')
}

// Upsert implements vector.Store: one statement for the whole call (P3).
func (s *Store) Upsert(ctx context.Context, items ...vector.Item) error {
	if err := validateItems(s.cfg.Dim, items); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	// An ID repeated within a call keeps its last version (ON CONFLICT
	// may not touch a row twice in one statement).
	last := make(map[string]int, len(items))
	for i, it := range items {
		last[it.ID] = i
	}
	n := len(last)
	ids, vecs, contents, metas := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	var buf []byte
	for i, it := range items {
		if last[it.ID] != i {
			continue
		}
		buf = appendVector(buf[:0], it.Vector)
		md := "{}"
		if len(it.Metadata) > 0 {
			b, err := json.Marshal(it.Metadata)
			if err != nil {
				return fmt.Errorf("pgvector: item %q: metadata: %w", it.ID, err)
			}
			md = string(b)
		}
		ids, vecs, contents, metas = append(ids, it.ID), append(vecs, string(buf)), append(contents, it.Content), append(metas, md)
	}
	if _, err := s.pool.Exec(ctx, s.upsertSQL, s.cfg.Namespace, ids, vecs, contents, metas); err != nil {
		return fmt.Errorf("pgvector: upserting %d items into %s: %w", n, s.cfg.Table, wrapCtx(ctx, err))
	}
	return nil
}

// Delete implements vector.Store.
func (s *Store) Delete(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.deleteSQL, s.cfg.Namespace, ids); err != nil {
		return fmt.Errorf("pgvector: deleting %d items from %s: %w", len(ids), s.cfg.Table, wrapCtx(ctx, err))
	}
	return nil
}

// Search implements vector.Store (exact or approximate by Config.Index:
// P1, P2).
func (s *Store) Search(ctx context.Context, q vector.Query) ([]vector.Hit, error) {
	if q.K < 1 {
		return nil, fmt.Errorf("pgvector: query asks for %d hits; K must be at least 1", q.K)
	}
	if len(q.Vector) != s.cfg.Dim {
		return nil, fmt.Errorf("pgvector: query vector has %d dimensions; this store's vectors have %d", len(q.Vector), s.cfg.Dim)
	}
	vec := string(appendVector(nil, q.Vector))
	var rows pgx.Rows
	var err error
	if len(q.Filter) > 0 {
		f, merr := json.Marshal(map[string]string(q.Filter))
		if merr != nil {
			return nil, fmt.Errorf("pgvector: filter: %w", merr)
		}
		rows, err = s.pool.Query(ctx, s.searchFilterSQL, s.cfg.Namespace, vec, q.K, string(f))
	} else {
		rows, err = s.pool.Query(ctx, s.searchSQL, s.cfg.Namespace, vec, q.K)
	}
	if err != nil {
		return nil, fmt.Errorf("pgvector: searching %s: %w", s.cfg.Table, wrapCtx(ctx, err))
	}
	defer rows.Close()
	var hits []vector.Hit
	for rows.Next() {
		var h vector.Hit
		var md map[string]string
		var score float64
		if err := rows.Scan(&h.ID, &h.Content, &md, &score); err != nil {
			return nil, fmt.Errorf("pgvector: reading a hit from %s: %w (is its metadata a JSON object of strings?)", s.cfg.Table, wrapCtx(ctx, err))
		}
		if len(md) > 0 {
			h.Metadata = md
		}
		h.Score = float32(score)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgvector: searching %s: %w", s.cfg.Table, wrapCtx(ctx, err))
	}
	return hits, nil
}

// Len returns the number of items in the store's namespace.
func (s *Store) Len(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, s.countSQL, s.cfg.Namespace).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgvector: counting %s: %w", s.cfg.Table, wrapCtx(ctx, err))
	}
	return n, nil
}

// Clear deletes every item of the store's namespace.
func (s *Store) Clear(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, s.clearSQL, s.cfg.Namespace); err != nil {
		return fmt.Errorf("pgvector: clearing %s: %w", s.cfg.Table, wrapCtx(ctx, err))
	}
	return nil
}

// Reindex rebuilds the table's vector index: after a bulk load into an
// IVFFlat table (its clusters are chosen from the rows present when it is
// built), or to compact an HNSW index after many deletes. It blocks
// writes to the table meanwhile; with IndexExact it does nothing.
func (s *Store) Reindex(ctx context.Context) error {
	if s.cfg.Index == IndexExact {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `REINDEX INDEX `+s.ident("_"+s.cfg.Index, true)); err != nil {
		return fmt.Errorf("pgvector: reindexing %s: %w", s.cfg.Table, wrapCtx(ctx, err))
	}
	return nil
}
