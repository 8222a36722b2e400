// Package schemaregistry is an embedded, Confluent-compatible Schema
// Registry: the REST API that Confluent's clients and serializers (and
// franz-go's pkg/sr) use to register and fetch Avro, Protobuf and JSON
// Schema schemas, with compatibility checks, storing everything in a
// compacted Kafka topic as Confluent's registry does. `weir broker` serves
// it next to the embedded broker so that demos and tests need no outside
// service (docs/kafka.md "Schema Registry (embedded)").
//
// # Guarantees
//
//	I1. The in-memory state is the replay of the topic: every change
//	    (registration, soft or permanent delete, compatibility level) is
//	    a record produced to the topic and applied only when the reader
//	    goroutine reads it back. A restart reading the same topic serves
//	    the same ids, subjects, versions and levels.
//	I2. A schema is identified by its type, its canonical text (JSON
//	    compacted for Avro and JSON Schema, trimmed text for Protobuf) and
//	    its references. Registering an identical schema under a subject
//	    that has it returns its id and adds no version; under another
//	    subject it gets the same id as Confluent does.
//	I3. Ids are global and increase: a new schema gets one more than the
//	    highest id in the topic. Versions of a subject increase from 1,
//	    past soft-deleted ones.
//	I4. Writes are serialised (one at a time, each deciding on a state
//	    that holds every earlier write): concurrent registrations of
//	    different schemas get distinct ids, of one schema the same id.
//	I5. Start returns once the topic has been read to its end, known by
//	    offset (a NOOP record produced at start and read back), never by
//	    a time-out.
//	I6. Errors are Confluent's: {"error_code": N, "message": "..."} with
//	    its codes (40401 subject not found, 40402 version not found,
//	    40403 schema not found, 409 incompatible, 42201 invalid schema,
//	    42202 invalid version, 42203 invalid compatibility level, ...).
//
// # Not done
//
// One registry per topic: two servers writing the same topic could assign
// one id twice (Confluent elects a leader; this server does not). No
// IMPORT/READONLY modes (GET /mode answers READWRITE), no schema contexts,
// no metadata or rule sets (accepted and ignored), no ?normalize beyond
// the canonical text. If compaction removes the records of the highest
// id after a permanent delete, a restart may hand that id out again, as
// with Confluent's registry. Compatibility rules are in compat*.go and
// docs/kafka.md.
package schemaregistry
