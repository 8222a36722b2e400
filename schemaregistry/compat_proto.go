package schemaregistry

import "google.golang.org/protobuf/reflect/protoreflect"

func protoCanRead(reader, writer protoreflect.FileDescriptor) []string { return nil }
