package schemaregistry

import (
	"fmt"
	"slices"

	"github.com/hamba/avro/v2"
)

// The compatibility levels. BACKWARD is the default.
const (
	LevelNone               = "NONE"
	LevelBackward           = "BACKWARD"
	LevelBackwardTransitive = "BACKWARD_TRANSITIVE"
	LevelForward            = "FORWARD"
	LevelForwardTransitive  = "FORWARD_TRANSITIVE"
	LevelFull               = "FULL"
	LevelFullTransitive     = "FULL_TRANSITIVE"
)

// Levels are the compatibility levels accepted by PUT /config.
var Levels = []string{LevelNone, LevelBackward, LevelBackwardTransitive, LevelForward, LevelForwardTransitive, LevelFull, LevelFullTransitive}

// checkLevel reports the problems of registering next in a subject whose
// live versions are olds (oldest first) under level; none means
// compatible. BACKWARD: next can read the latest (next is the reader);
// FORWARD: the latest can read next; FULL: both; _TRANSITIVE: against
// every live version, not only the latest.
func checkLevel(level string, next *parsed, olds []*parsed) []string {
	if len(olds) == 0 || level == LevelNone {
		return nil
	}
	against := olds[len(olds)-1:]
	switch level {
	case LevelBackwardTransitive, LevelForwardTransitive, LevelFullTransitive:
		against = olds
	}
	backward := level != LevelForward && level != LevelForwardTransitive
	forward := level != LevelBackward && level != LevelBackwardTransitive
	var msgs []string
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if backward {
			msgs = append(msgs, canRead(next, old)...)
		}
		if forward {
			msgs = append(msgs, canRead(old, next)...)
		}
	}
	return msgs
}

// canRead reports why data written with writer cannot be read with
// reader; nil means it can.
func canRead(reader, writer *parsed) []string {
	if reader.typ != writer.typ {
		return []string{fmt.Sprintf("the schema type changed from %s to %s", writer.typ, reader.typ)}
	}
	switch reader.typ {
	case typeAvro:
		return avroCanRead(reader.avro, writer.avro)
	case typeJSON:
		return jsonCanRead(reader.json, writer.json)
	case typeProtobuf:
		return protoCanRead(reader.proto, writer.proto)
	}
	return nil
}

// avroCanRead applies the Avro specification's schema resolution with
// hamba/avro's SchemaCompatibility: a reader field missing from the writer
// needs a default; fields the reader lacks are skipped; int -> long ->
// float -> double and string <-> bytes promote; enum symbols the writer
// has must be in the reader unless the reader's enum has a default; named
// types match by unqualified name or alias; fixed sizes match; a writer
// union's every branch must be readable, a reader union must have a branch
// for the writer. A fresh SchemaCompatibility per check: its cache marks
// a pair in progress, which a concurrent check would read as compatible.
func avroCanRead(reader, writer avro.Schema) []string {
	if err := avro.NewSchemaCompatibility().Compatible(reader, writer); err != nil {
		return []string{err.Error()}
	}
	return nil
}

func validLevel(l string) bool { return slices.Contains(Levels, l) }
