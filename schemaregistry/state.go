package schemaregistry

import (
	"encoding/json"
	"fmt"
	"sort"
)

// state is the registry's content: exactly what applying the _schemas
// topic's records in offset order gives (I1). It is only changed by apply,
// which the reader goroutine calls with Server.mu held for writing; the
// HTTP handlers read it under Server.mu held for reading.
type state struct {
	schemas  map[int]*stored  // by id
	ids      map[string]int   // identity (see identity) -> id
	subjects map[string]*subj // by name; a subject may have only a level
	level    string           // global compatibility level; "" means BACKWARD
	maxID    int              // highest id ever applied (I3)
}

// stored is one registered schema, shared by every subject version with
// its id. schema is the canonical text (see canonical).
type stored struct {
	id         int
	schemaType string // AVRO, PROTOBUF or JSON
	schema     string
	refs       []Reference
}

type subj struct {
	versions []ver // ascending by number
	level    string
}

type ver struct {
	number  int
	id      int
	deleted bool // soft-deleted
}

func newState() *state {
	return &state{schemas: map[int]*stored{}, ids: map[string]int{}, subjects: map[string]*subj{}}
}

// identity is what makes two registrations the same schema (I2): type,
// canonical text and references.
func identity(schemaType, schema string, refs []Reference) string {
	r, _ := json.Marshal(refs)
	return schemaType + "\x00" + schema + "\x00" + string(r)
}

// apply applies one record of the topic. A record it cannot read is
// skipped with an error (the caller logs it): the topic may hold key types
// of newer registries.
func (st *state) apply(key, value []byte) error {
	var k recordKey
	if err := json.Unmarshal(key, &k); err != nil {
		return fmt.Errorf("schemaregistry: unreadable key %q: %v", key, err)
	}
	subject := ""
	if k.Subject != nil {
		subject = *k.Subject
	}
	switch k.KeyType {
	case keySchema:
		if value == nil {
			st.removeVersion(subject, k.Version)
			return nil
		}
		var v schemaValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("schemaregistry: unreadable SCHEMA value of %s/%d: %v", subject, k.Version, err)
		}
		if v.SchemaType == "" {
			v.SchemaType = typeAvro
		}
		if _, ok := st.schemas[v.ID]; !ok {
			st.schemas[v.ID] = &stored{id: v.ID, schemaType: v.SchemaType, schema: v.Schema, refs: v.References}
			st.ids[identity(v.SchemaType, v.Schema, v.References)] = v.ID
		}
		st.maxID = max(st.maxID, v.ID)
		s := st.subject(v.Subject)
		i := sort.Search(len(s.versions), func(i int) bool { return s.versions[i].number >= v.Version })
		nv := ver{number: v.Version, id: v.ID, deleted: v.Deleted}
		if i < len(s.versions) && s.versions[i].number == v.Version {
			s.versions[i] = nv
		} else {
			s.versions = append(s.versions, ver{})
			copy(s.versions[i+1:], s.versions[i:])
			s.versions[i] = nv
		}
	case keyConfig:
		level := ""
		if value != nil {
			var v configValue
			if err := json.Unmarshal(value, &v); err != nil {
				return fmt.Errorf("schemaregistry: unreadable CONFIG value: %v", err)
			}
			level = v.CompatibilityLevel
		}
		if subject == "" {
			st.level = level
		} else {
			st.subject(subject).level = level
			st.maybeDropSubject(subject)
		}
	case keyDeleteSubject:
		if value == nil {
			return nil
		}
		var v deleteSubjectValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("schemaregistry: unreadable DELETE_SUBJECT value: %v", err)
		}
		if s := st.subjects[subject]; s != nil {
			for i := range s.versions {
				if s.versions[i].number <= v.Version {
					s.versions[i].deleted = true
				}
			}
		}
	}
	return nil
}

func (st *state) subject(name string) *subj {
	s := st.subjects[name]
	if s == nil {
		s = &subj{}
		st.subjects[name] = s
	}
	return s
}

func (st *state) maybeDropSubject(name string) {
	if s := st.subjects[name]; s != nil && len(s.versions) == 0 && s.level == "" {
		delete(st.subjects, name)
	}
}

// removeVersion applies a permanent delete; the schema itself goes when no
// subject version (soft-deleted or not) uses its id any more.
func (st *state) removeVersion(subject string, number int) {
	s := st.subjects[subject]
	if s == nil {
		return
	}
	id := 0
	for i, v := range s.versions {
		if v.number == number {
			id = v.id
			s.versions = append(s.versions[:i], s.versions[i+1:]...)
			break
		}
	}
	st.maybeDropSubject(subject)
	if id == 0 {
		return
	}
	for _, o := range st.subjects {
		for _, v := range o.versions {
			if v.id == id {
				return
			}
		}
	}
	if sc := st.schemas[id]; sc != nil {
		delete(st.ids, identity(sc.schemaType, sc.schema, sc.refs))
		delete(st.schemas, id)
	}
}

// live reports whether the subject has a version not soft-deleted.
func (s *subj) live() bool {
	for _, v := range s.versions {
		if !v.deleted {
			return true
		}
	}
	return false
}

// find returns the version numbered n (-1: the latest), skipping
// soft-deleted ones unless deleted.
func (s *subj) find(n int, deleted bool) (ver, bool) {
	for i := len(s.versions) - 1; i >= 0; i-- {
		v := s.versions[i]
		if v.deleted && !deleted {
			continue
		}
		if n == -1 || v.number == n {
			return v, true
		}
	}
	return ver{}, false
}

// findID returns the latest live version with schema id.
func (s *subj) findID(id int) (ver, bool) {
	for i := len(s.versions) - 1; i >= 0; i-- {
		if v := s.versions[i]; v.id == id && !v.deleted {
			return v, true
		}
	}
	return ver{}, false
}

// nextVersion is the number a new version gets: one past the highest,
// soft-deleted ones included, as Confluent does.
func (s *subj) nextVersion() int {
	if len(s.versions) == 0 {
		return 1
	}
	return s.versions[len(s.versions)-1].number + 1
}

// levelOf is the compatibility level in force for subject.
func (st *state) levelOf(subject string) string {
	if s := st.subjects[subject]; s != nil && s.level != "" {
		return s.level
	}
	if st.level != "" {
		return st.level
	}
	return LevelBackward
}
