package schemaregistry

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// register is POST /subjects/{subject}/versions (see Server for the write).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if e := checkSubject(subject); e != nil {
		fail(w, e)
		return
	}
	req, e := readSchema(r)
	if e != nil {
		fail(w, e)
		return
	}
	unlock, werr := s.lockWrites()
	if werr != nil {
		fail(w, werr)
		return
	}
	defer unlock()
	id, version, e := s.decideRegister(subject, req)
	if e != nil {
		fail(w, e)
		return
	}
	if version > 0 {
		val := schemaValue{Subject: subject, Version: version, ID: id, References: req.References, Schema: req.Schema}
		if req.SchemaType != typeAvro {
			val.SchemaType = req.SchemaType
		}
		if e := s.write([2][]byte{schemaKeyBytes(subject, version), mustJSON(val)}); e != nil {
			fail(w, e)
			return
		}
	}
	s.mu.RLock()
	res := response(subject, version, s.mu.st.schemas[id])
	if version == 0 { // already registered: the live version holding id
		if v, ok := s.mu.st.subjects[subject].findID(id); ok {
			res.Version = v.number
		}
	}
	s.mu.RUnlock()
	// The id is what clients read; newer registries (and this one) also
	// give back the version and the schema.
	reply(w, res)
}

// decideRegister returns the id of an identical live version (version 0:
// nothing to write), or the id and version of a new one; the caller holds
// writeMu.
func (s *Server) decideRegister(subject string, req *schemaRequest) (id, version int, e *Error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.mu.st
	key := identity(req.SchemaType, req.Schema, req.References)
	sub := st.subjects[subject]
	if existing, ok := st.ids[key]; ok && sub != nil {
		for _, v := range sub.versions {
			if v.id == existing && !v.deleted {
				if req.ID > 0 && req.ID != existing {
					return 0, 0, apiErr(42207, "Schema already registered with id %d instead of input id %d", existing, req.ID)
				}
				return existing, 0, nil
			}
		}
	}
	if req.ID > 0 || req.Version > 0 {
		return 0, 0, apiErr(CodeOperationNotPermitted, "Registering with a given id or version needs IMPORT mode, which this registry does not have")
	}
	p, e := s.parseLocked(req.SchemaType, req.Schema, req.References)
	if e != nil {
		return 0, 0, e
	}
	if sub != nil {
		olds, e := s.liveParsedLocked(sub)
		if e != nil {
			return 0, 0, e
		}
		level := st.levelOf(subject)
		if msgs := checkLevel(level, p, olds); len(msgs) > 0 {
			return 0, 0, apiErr(CodeIncompatibleSchema, "Schema being registered is incompatible with an earlier schema for subject \"%s\" (%s), details: [%s]", subject, level, strings.Join(msgs, "; "))
		}
	}
	id, ok := st.ids[key]
	if !ok {
		id = st.maxID + 1
	}
	version = 1
	if sub != nil {
		version = sub.nextVersion()
	}
	return id, version, nil
}

func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	n, e := parseVersion(r.PathValue("version"))
	if e != nil {
		fail(w, e)
		return
	}
	permanent := flag(r, "permanent")
	unlock, werr := s.lockWrites()
	if werr != nil {
		fail(w, werr)
		return
	}
	defer unlock()
	s.mu.RLock()
	sub, e := s.subjectLocked(subject, permanent)
	var v ver
	var sc *stored
	if e == nil {
		var ok bool
		if v, ok = sub.find(n, permanent); !ok {
			e = versionNotFound(subject, n)
		} else if refs := s.referrersLocked(subject, v.number); len(refs) > 0 {
			e = apiErr(CodeReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v.number, refs)
		} else if permanent && !v.deleted {
			e = apiErr(CodeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.number)
		}
		if e == nil {
			sc = s.mu.st.schemas[v.id]
		}
	}
	s.mu.RUnlock()
	if e != nil {
		fail(w, e)
		return
	}
	rec := [2][]byte{schemaKeyBytes(subject, v.number), nil}
	if !permanent {
		rec[1] = mustJSON(schemaValue{Subject: subject, Version: v.number, ID: v.id, SchemaType: typeOrEmpty(sc.schemaType), References: sc.refs, Schema: sc.schema, Deleted: true})
	}
	if e := s.write(rec); e != nil {
		fail(w, e)
		return
	}
	reply(w, v.number)
}

func (s *Server) deleteSubject(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	permanent := flag(r, "permanent")
	unlock, werr := s.lockWrites()
	if werr != nil {
		fail(w, werr)
		return
	}
	defer unlock()
	s.mu.RLock()
	sub := s.mu.st.subjects[subject]
	var e *Error
	var recs [][2][]byte
	numbers := []int{}
	switch {
	case sub == nil || len(sub.versions) == 0:
		e = subjectNotFound(subject)
	case !permanent && !sub.live():
		e = apiErr(CodeSubjectSoftDeleted, "Subject '%s' was soft deleted. Set permanent=true to delete permanently", subject)
	case permanent && sub.live():
		e = apiErr(CodeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", subject)
	default:
		for _, v := range sub.versions {
			if refs := s.referrersLocked(subject, v.number); len(refs) > 0 {
				e = apiErr(CodeReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v.number, refs)
				break
			}
			if permanent {
				recs = append(recs, [2][]byte{schemaKeyBytes(subject, v.number), nil})
				numbers = append(numbers, v.number)
			} else if !v.deleted {
				sc := s.mu.st.schemas[v.id]
				recs = append(recs, [2][]byte{schemaKeyBytes(subject, v.number), mustJSON(schemaValue{Subject: subject, Version: v.number, ID: v.id, SchemaType: typeOrEmpty(sc.schemaType), References: sc.refs, Schema: sc.schema, Deleted: true})})
				numbers = append(numbers, v.number)
			}
		}
	}
	s.mu.RUnlock()
	if e != nil {
		fail(w, e)
		return
	}
	if e := s.write(recs...); e != nil {
		fail(w, e)
		return
	}
	reply(w, numbers)
}

func (s *Server) putConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		fail(w, apiErr(CodeJSONParseError, "Unrecognized request body: %v; want {\"compatibility\": \"BACKWARD\"}", err))
		return
	}
	level := strings.ToUpper(req.Compatibility)
	if !validLevel(level) {
		fail(w, apiErr(CodeInvalidCompatibilityLevel, "Invalid compatibility level %q. Valid values are %s", req.Compatibility, strings.Join(Levels, ", ")))
		return
	}
	if subject != "" {
		if e := checkSubject(subject); e != nil {
			fail(w, e)
			return
		}
	}
	unlock, werr := s.lockWrites()
	if werr != nil {
		fail(w, werr)
		return
	}
	defer unlock()
	if e := s.write([2][]byte{configKeyBytes(subject), mustJSON(configValue{CompatibilityLevel: level})}); e != nil {
		fail(w, e)
		return
	}
	reply(w, map[string]string{"compatibility": level})
}

func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	unlock, werr := s.lockWrites()
	if werr != nil {
		fail(w, werr)
		return
	}
	defer unlock()
	s.mu.RLock()
	old := s.mu.st.level
	if subject != "" {
		old = ""
		if sub := s.mu.st.subjects[subject]; sub != nil {
			old = sub.level
		}
	}
	s.mu.RUnlock()
	if subject != "" && old == "" {
		fail(w, subjectNotFound(subject))
		return
	}
	if old == "" {
		old = LevelBackward
	}
	if e := s.write([2][]byte{configKeyBytes(subject), nil}); e != nil {
		fail(w, e)
		return
	}
	reply(w, map[string]string{"compatibility": old})
}
