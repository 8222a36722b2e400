package schemaregistry

func jsonCanRead(reader, writer any) []string { return nil }
