package schemaregistry

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoCanRead reports why a message written with writer's file may be
// misread with reader's. Messages are matched by full name, fields by
// number, over every message of the file (nested ones included):
//
//   - a message of the writer missing from the reader is refused (Confluent's
//     MESSAGE_REMOVED);
//   - a field number in both whose wire types differ is refused; kinds that
//     share a wire type and are read back as the same values are
//     accepted: int32, uint32, int64, uint64 and bool; sint32 and sint64;
//     fixed32 and sfixed32; fixed64 and sfixed64; string and bytes; an enum
//     and int32 (as Confluent allows);
//   - a field number in both whose message or enum type changed name is
//     refused, and one moved between repeated and singular;
//   - a proto2 required field of the reader that the writer lacks (or has
//     not required) is refused, and a required field of the writer the
//     reader dropped;
//   - a field moved into or out of a oneof of several fields is refused.
//
// Removed optional fields, added fields, renamed fields (same number) and
// reserved ranges are not refused. Protobuf's own wire compatibility is
// looser than this in places (it accepts more int32/int64 mixes with
// truncation); the subset above is the one Confluent's checker shares.
func protoCanRead(reader, writer protoreflect.FileDescriptor) []string {
	var msgs []string
	rm := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	eachMessage(reader.Messages(), func(m protoreflect.MessageDescriptor) { rm[m.FullName()] = m })
	eachMessage(writer.Messages(), func(w protoreflect.MessageDescriptor) {
		r, ok := rm[w.FullName()]
		if !ok {
			msgs = append(msgs, fmt.Sprintf("message %s of the writer is missing from the reader", w.FullName()))
			return
		}
		msgs = append(msgs, protoFields(r, w)...)
	})
	return msgs
}

func eachMessage(ms protoreflect.MessageDescriptors, f func(protoreflect.MessageDescriptor)) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		f(m)
		eachMessage(m.Messages(), f)
	}
}

func protoFields(r, w protoreflect.MessageDescriptor) []string {
	var msgs []string
	add := func(f protoreflect.FieldDescriptor, format string, args ...any) {
		msgs = append(msgs, fmt.Sprintf("%s field %d (%s): ", r.FullName(), f.Number(), f.Name())+fmt.Sprintf(format, args...))
	}
	rf, wf := r.Fields(), w.Fields()
	for i := 0; i < wf.Len(); i++ {
		w := wf.Get(i)
		rd := rf.ByNumber(w.Number())
		if rd == nil {
			if w.Cardinality() == protoreflect.Required {
				add(w, "required in the writer, removed from the reader")
			}
			continue
		}
		if protoWire(rd) != protoWire(w) {
			add(w, "kind changed from %s to %s", protoKind(w), protoKind(rd))
		} else if rn, wn := protoTypeName(rd), protoTypeName(w); rn != wn && rn != "" && wn != "" {
			add(w, "type changed from %s to %s", wn, rn)
		}
		if rd.IsList() != w.IsList() || rd.IsMap() != w.IsMap() {
			add(w, "changed between repeated and singular")
		}
		if rd.Cardinality() == protoreflect.Required && w.Cardinality() != protoreflect.Required {
			add(w, "required by the reader, not by the writer")
		}
		if protoOneof(rd) != protoOneof(w) {
			add(w, "moved into or out of a oneof")
		}
	}
	for i := 0; i < rf.Len(); i++ {
		f := rf.Get(i)
		if f.Cardinality() == protoreflect.Required && wf.ByNumber(f.Number()) == nil {
			add(f, "required by the reader, missing from the writer")
		}
	}
	return msgs
}

// protoWire groups kinds that read each other's values.
func protoWire(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return "map<" + protoWire(f.MapKey()) + "," + protoWire(f.MapValue()) + ">"
	}
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind, protoreflect.EnumKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	case protoreflect.MessageKind:
		return "message"
	case protoreflect.GroupKind:
		return "group"
	}
	return f.Kind().String()
}

func protoKind(f protoreflect.FieldDescriptor) string {
	if n := protoTypeName(f); n != "" {
		return string(n)
	}
	return f.Kind().String()
}

func protoTypeName(f protoreflect.FieldDescriptor) protoreflect.FullName {
	switch {
	case f.IsMap():
		return ""
	case f.Message() != nil:
		return f.Message().FullName()
	case f.Enum() != nil:
		return f.Enum().FullName()
	}
	return ""
}

// protoOneof is the field's real oneof ("" for none or a proto3 optional's
// synthetic one) when it has more than one field.
func protoOneof(f protoreflect.FieldDescriptor) protoreflect.Name {
	o := f.ContainingOneof()
	if o == nil || o.IsSynthetic() || o.Fields().Len() < 2 {
		return ""
	}
	return o.Name()
}
