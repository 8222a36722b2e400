// Package actionindex is the index of live action states that every
// action-state store keeps in memory (agent.MemoryStore, agent/wal,
// agent/kafkastore): per key, the runs recorded and not yet pruned or
// discarded, each with its position, so that Get, Latest, DiscardFrom and
// Prune of agent.ActionStateStore are answered without reading a log.
//
// The index knows nothing of logs, records or encodings: a store chooses
// the run identity (ID: a RunID's name, its fields, or its encoding) and
// what it keeps per run (V: the state, its size in the log, its offset),
// and learns through a callback which runs a prune or a discard removed
// (to write their tombstones, or to count its live bytes).
//
// # Invariants
//
//	I1. A run is in the index at most once: (key, ID) names it, and Put of
//	    a run already there replaces its position and value.
//	I2. Latest(key) is the greatest position among the key's runs, and ok
//	    is false exactly when the key has none; a key whose last run goes
//	    is forgotten (Keys counts only keys with runs).
//	I3. DiscardFrom(key, from) removes exactly the key's runs at positions
//	    not before from; Prune(key, seq) exactly those whose sequence
//	    number is at most seq. Other keys' runs are never touched, and the
//	    callback sees each removed run once.
//	I4. Len is the number of runs in the index.
//
// TestIndexMatchesModel checks I1-I4 against a plain map under random
// operation sequences (pgregory.net/rapid).
//
// # Not guaranteed
//
// The index is not safe for concurrent use: the store guards it with the
// lock under which it also queues its log records, so that memory and log
// see the writes in the same order. The order in which All and the
// callbacks visit runs is unspecified: a store that writes records from
// them sorts what it writes.
package actionindex
