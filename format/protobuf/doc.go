// Package protobuf reads and writes Protobuf records in the Confluent wire
// format: the header, the message-index list (package format), then the
// message. Schemas come from a schema registry as .proto text with their
// references (other subjects' versions, named by their import path), and
// are compiled with github.com/bufbuild/protocompile (the well-known types
// are built in); schemas registered as base64 FileDescriptorProtos (as
// Confluent's serializers register them) are read as such.
//
// Invariants:
//
//   - P1: the schema of an id is fetched, with its references, and
//     compiled once per Decoder; a record then costs no request and no
//     lock.
//   - P2: a record decodes into the message its index names: a dynamic
//     message (Dynamic, Records) or a generated type (Generated), which
//     must have the same full name, else the record is a dead letter
//     naming both and the schema id.
//   - P3: an Encoder writes one message type with one schema found when it
//     is made; the index list is written with the [0] shortcut (W2).
//   - P4: RecordOf and FromRecord map fields by their proto names; a
//     record converted by RecordOf fills the same message back.
package protobuf
