// Package avro reads and writes Avro records in the Confluent wire format
// with github.com/hamba/avro/v2, the writers' schemas fetched from a schema
// registry (package format).
//
// Invariants:
//
//   - A1: the writer's schema of an id is fetched, parsed and resolved into
//     the reader's once per Decoder; decoding a record then takes no lock
//     and sends no request.
//   - A2: with a reader schema (Options.Schema), every record is resolved
//     into it by Avro's rules: fields the writer lacks take their defaults,
//     fields the reader lacks are skipped, int/long/float promote to wider
//     types, string and bytes to each other. A writer whose schema does not
//     resolve makes the record a dead letter naming its id.
//   - A3: an Encoder writes with one schema, found when it is made (a fixed
//     id, the latest version of the subject, or Schema registered under the
//     subject with AutoRegister); a missing subject is an error then, not
//     at the first record.
//   - A4: RecordOf and FromRecord convert between hamba/avro's values and
//     the JSON-like values of weir's pipelines as the table in convert.go
//     says; a record converted by RecordOf encodes back to the same bytes.
//   - Each schema is parsed in a cache of its own: two versions of one
//     named record never mix.
package avro
