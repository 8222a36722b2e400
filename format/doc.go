// Package format reads and writes Kafka records in the Confluent wire
// format and talks to a Confluent-compatible schema registry. Its
// subpackages are the codecs: format/avro, format/protobuf and
// format/jsonschema, each giving a kafka.Deserializer and a
// kafka.SinkOptions.Serialize function (docs/formats.md).
//
// The wire format is: the magic byte 0, the schema id as 4 bytes big
// endian, then (Protobuf only) the message-index list, then the payload.
//
// Invariants:
//
//   - W1: ParseHeader and ParseIndex never panic and never read past their
//     input, whatever the bytes (FuzzWire).
//   - W2: AppendIndex writes the index [0] (the file's first message) as the
//     single byte 0, as Confluent's serializers do; ParseIndex reads both
//     forms.
//   - W3: a message-index list longer than MaxIndexDepth is refused, so a
//     corrupt count cannot make a large allocation.
//   - W4: every decoding error is a *DecodeError whose text names the
//     schema id when the header was readable: the reason of the record's
//     dead letter says which schema it was written with.
//   - R1: a Client fetches a schema id, or a subject's version, once: a
//     record costs no registry request once its id has been seen.
//   - R2: a fetch that finds the registry unreachable (no answer, HTTP
//     5xx or 429) is retried with back-off for RegistryConfig.RetryLimit
//     while the caller waits; the codecs then fail the job
//     (kafka.ErrFailJob) rather than dead-letter a good record. An answer
//     that the id is unknown (404) is not retried: the record is a dead
//     letter.
//   - R3: Check sends one request without retrying, so that a job whose
//     registry is down fails when it is built, with the URL in the error.
//   - C1: a codec's Schemas fetches and makes (parses, resolves, compiles)
//     each writer's schema id once, however many goroutines meet it at once;
//     Of then reads without a lock. Every error of a fetch or a make is a
//     *DecodeError naming the id (the record is a dead letter), except a
//     registry that stayed unavailable, which wraps kafka.ErrFailJob (R2).
//   - C2: an encoder's schema is chosen once, when it is made, by
//     Target.Find (a fixed id, Schema registered under Subject, or
//     Subject's latest version) and must be of the codec's type; the
//     codecs supply only their codec (codec.go: Schemas, Target,
//     Serializer, Deserializer are the one mechanism the three share).
//   - Secrets (the basic-auth password) are kafkasec.Secret values: never
//     printed or logged.
package format
