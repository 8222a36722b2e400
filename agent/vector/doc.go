// Package vector stores embeddings and finds the ones nearest a query: the
// Store interface, Flat (the embedded store: exact search, in memory,
// with a binary form for checkpoints), Index (a keyed two-input operator
// that builds one collection per key from a stream of changes and answers
// a stream of queries in event-time order, checkpointed), and Tool (a
// retrieval tool for agents: the model calls it with a query text, it
// embeds the text and returns the top hits).
//
// A database-backed store: package agent/vector/pgvector (Postgres with
// pgvector) implements Store; package agent/vector/vectortest is the
// conformance suite that it and Flat both run.
//
// # Guarantees
//
// Stores (S1-S3 hold for every Store; Flat meets them, and
// TestFlatMatchesModel checks it against a model of them):
//
//	S1. Upsert inserts or replaces by ID; all vectors of a store have one
//	    dimension; a call with an item without ID, with an empty vector or
//	    of another dimension stores nothing and says which item.
//	S2. Search returns the min(K, matching) items of highest cosine
//	    similarity among those whose metadata has every pair of the
//	    filter, in descending score, equal scores by ascending ID: the
//	    result depends on the store's contents, never on the order of the
//	    operations that built them.
//	S3. Callers own what they pass and what they get: stores copy vectors
//	    and metadata on the way in, and hits carry copies.
//
// Flat:
//
//	F1. A search scans every item: exact, O(items × dimension), with the
//	    K best kept in a heap (no approximation, no recall below 1).
//	F2. Its binary form (AppendBinary, UnmarshalBinary) restores a store
//	    that answers every search as the original did; corrupt input is
//	    an error wrapping ErrCorrupt and changes nothing.
//
// Index, for each key of its two keyed inputs (changes and queries):
//
//	X1. Event-time order. Changes and queries are held until the
//	    watermark passes their timestamp, then applied and answered in
//	    timestamp order, changes before queries of equal timestamp: a
//	    query at time t is answered from the changes of its key with
//	    timestamps <= t, whatever the order in which the streams arrived.
//	    Answers carry the query's timestamp and leave before the
//	    watermark that released them.
//	X2. Late records (timestamp at or behind the operator's watermark)
//	    are applied or answered at once and counted (lateRecords): the
//	    watermark's lag decides what is in order.
//	X3. An invalid change (S1) is not applied: it is counted
//	    (changesRejected) and logged; an invalid query is answered with
//	    Result.Error set. Neither fails the job.
//	X4. Checkpoints hold every collection and every held record, per key
//	    group; a restore at any parallelism answers later queries exactly
//	    as an uninterrupted run (TestIndexRestoreGivesSameResults).
//	X5. Metrics: lateRecords, changesRejected, queriesAnswered (counters);
//	    recordsHeld, vectors (gauges).
//
// # Limits
//
// Flat and Index keep everything in memory, and Index encodes its
// collections whole in every checkpoint, synchronously (its cost grows
// with the collections, not with what changed since the last one). A
// collection lives on one subtask: a key is a unit of parallelism, so a
// corpus that must be searched as a whole is one key.
package vector
