package schemaregistry

import "encoding/json"

// The records of the _schemas topic, in the shapes Confluent's Schema
// Registry writes (so a topic written by one can be read by the other):
//
//	key {"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
//	value {"subject":"orders-value","version":1,"id":1,"schemaType":"PROTOBUF",
//	       "references":[...],"schema":"...","deleted":false}
//	      (schemaType left out for AVRO; a null value: the version is
//	      permanently deleted)
//	key {"keytype":"CONFIG","subject":null,"magic":0}  (subject set: its own)
//	value {"compatibilityLevel":"FULL"}  (null: the subject's level is removed)
//	key {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
//	value {"subject":"s","version":3}  (every version up to 3 soft-deleted;
//	      read for compatibility, this server writes SCHEMA records with
//	      deleted:true instead)
//	key {"keytype":"NOOP","magic":0}  (ignored)
//
// Keys of other types (MODE, CLEAR_SUBJECT, ...) are ignored when read.

const (
	keySchema        = "SCHEMA"
	keyConfig        = "CONFIG"
	keyDeleteSubject = "DELETE_SUBJECT"
)

// recordKey is every key type's fields; the field order is Confluent's.
type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// Reference is a schema's reference to another registered schema: Name is
// how the referring schema names it (a Protobuf import path, an Avro full
// name, a JSON Schema $ref URL).
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"deleted"`
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type deleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func schemaKeyBytes(subject string, version int) []byte {
	b, _ := json.Marshal(recordKey{KeyType: keySchema, Subject: &subject, Version: version, Magic: 1})
	return b
}

// configKeyBytes is the key of the global level (subject "") or of a
// subject's. The global key has "subject":null as Confluent writes it.
func configKeyBytes(subject string) []byte {
	if subject == "" {
		return []byte(`{"keytype":"CONFIG","subject":null,"magic":0}`)
	}
	b, _ := json.Marshal(recordKey{KeyType: keyConfig, Subject: &subject})
	return b
}

// mustJSON marshals the plain structs of this file, which cannot fail.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
