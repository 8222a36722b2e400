// Package pgvector is a vector.Store in PostgreSQL with the pgvector
// extension: the same contract as the embedded vector.Flat (S1-S3 of
// package vector, checked by the same conformance suite,
// agent/vector/vectortest), for corpora that outgrow memory, are shared
// by several jobs or processes, or are filled by another system.
//
// It is a package of its own so that programs that do not use it do not
// link the Postgres driver (github.com/jackc/pgx/v5).
//
// # Table
//
// Open creates, unless Config.SkipSetup, the extension (when missing and
// the user may), the table and its indexes, under an advisory lock so that
// concurrent Opens do not race:
//
//	CREATE TABLE <table> (
//	    namespace text NOT NULL,
//	    id        text NOT NULL,
//	    embedding vector(<Dim>) NOT NULL,  -- scaled to unit length
//	    content   text NOT NULL DEFAULT '',
//	    metadata  jsonb NOT NULL DEFAULT '{}',
//	    PRIMARY KEY (namespace, id))
//	CREATE INDEX <table>_metadata ON <table> USING gin (metadata jsonb_path_ops)
//	-- Index "hnsw":
//	CREATE INDEX <table>_hnsw ON <table> USING hnsw (embedding vector_ip_ops) WITH (m, ef_construction)
//	-- Index "ivfflat":
//	CREATE INDEX <table>_ivfflat ON <table> USING ivfflat (embedding vector_ip_ops) WITH (lists)
//
// A Store sees the rows of its Namespace only, so one table holds many
// collections (per tenant, per topic). Vectors are stored at unit length,
// so cosine similarity is their inner product: a hit's score is
// -(embedding <#> query), which is also 0 for a zero vector, as the
// contract wants, and the indexes use the inner-product operator class.
//
// # Guarantees
//
//	P1. S1-S3 of package vector, with search exact when Index is "exact"
//	    (the default): every row of the namespace is scored, in
//	    descending score, equal scores by ascending ID (the conformance
//	    suite's model test).
//	P2. With Index "hnsw" or "ivfflat" search is approximate: the hits
//	    are those the index finds (pgvector's iterative scans are on, so
//	    a filter or namespace still yields K hits when K match), sorted as
//	    in P1; equal scores at the K-th place may leave out a lower ID.
//	    Recall depends on EfSearch / Probes (TestHNSWRecall).
//	P3. An Upsert call is one statement: all its items are stored, or,
//	    on any error, none. An ID repeated within a call keeps its last
//	    version (as Flat).
//	P4. Upserts and deletes are idempotent, keyed by (namespace, id):
//	    applying a change again leaves the table as it was after the
//	    first time. A job restored from a checkpoint replays the changes
//	    after it; the table then ends as an uninterrupted run leaves it
//	    (the suite's replay test). During the replay a search may see a
//	    newer version of an item than the replayed change sets, until
//	    the replay reaches that newer change. The table is not part of
//	    weir's checkpoints: searches after a restore see the table as it
//	    is, not as it was at the checkpoint (unlike vector.Index, X4).
//	    Exactly-once effect therefore needs IDs that a replay derives
//	    again (a document's ID, a hash of the source record), never
//	    random ones.
//	P5. Every call honours its context: a deadline or cancellation stops
//	    the statement on the server and returns an error wrapping the
//	    context's.
//	P6. Errors say what to do: a missing extension, a table of another
//	    dimension, a table name that is not a plain identifier.
package pgvector
