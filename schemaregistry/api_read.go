package schemaregistry

import (
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func (s *Server) getSchemas(w http.ResponseWriter, r *http.Request) {
	prefix, deleted, latestOnly := r.URL.Query().Get("subjectPrefix"), flag(r, "deleted"), flag(r, "latestOnly")
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []schemaResponse{}
	for _, name := range s.subjectNamesLocked(prefix, deleted, false) {
		sub := s.mu.st.subjects[name]
		var vs []ver
		for _, v := range sub.versions {
			if deleted || !v.deleted {
				vs = append(vs, v)
			}
		}
		if latestOnly && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			out = append(out, response(name, v.number, s.mu.st.schemas[v.id]))
		}
	}
	reply(w, out)
}

func (s *Server) getByID(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id <= 0 {
		fail(w, apiErr(CodeSchemaNotFound, "Schema %s not found", r.PathValue("id")))
		return
	}
	s.mu.RLock()
	sc := s.mu.st.schemas[id]
	var res schemaResponse
	if sc != nil {
		res = s.responseLocked(r, "", 0, sc)
	}
	s.mu.RUnlock()
	if sc == nil {
		fail(w, schemaNotFound(id))
		return
	}
	if strings.HasSuffix(r.URL.Path, "/schema") {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, res.Schema)
		return
	}
	reply(w, res)
}

// responseLocked is response with the schema in the format the request
// asks for (?format=serialized: a Protobuf schema as a base64
// FileDescriptorProto, as Confluent's serializers fetch it).
func (s *Server) responseLocked(r *http.Request, subject string, version int, sc *stored) schemaResponse {
	res := response(subject, version, sc)
	if sc.schemaType == typeProtobuf && r.URL.Query().Get("format") == "serialized" {
		p, _ := s.parsedLocked(sc.id)
		res.Schema = serialized(sc, p)
	}
	return res
}

func (s *Server) getIDVersions(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id <= 0 {
		fail(w, apiErr(CodeSchemaNotFound, "Schema %s not found", r.PathValue("id")))
		return
	}
	deleted := flag(r, "deleted")
	type subjectVersion struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.st.schemas[id] == nil {
		fail(w, schemaNotFound(id))
		return
	}
	versions := []subjectVersion{}
	subjects := []string{}
	for _, name := range s.subjectNamesLocked("", true, false) {
		seen := false
		for _, v := range s.mu.st.subjects[name].versions {
			if v.id == id && (deleted || !v.deleted) {
				versions = append(versions, subjectVersion{name, v.number})
				if !seen {
					subjects = append(subjects, name)
					seen = true
				}
			}
		}
	}
	if strings.HasSuffix(r.URL.Path, "/subjects") {
		reply(w, subjects)
		return
	}
	reply(w, versions)
}

// subjectNamesLocked lists subjects with versions, sorted: live ones, with
// soft-deleted ones too when deleted, or only those when deletedOnly.
func (s *Server) subjectNamesLocked(prefix string, deleted, deletedOnly bool) []string {
	names := []string{}
	for name, sub := range s.mu.st.subjects {
		if len(sub.versions) == 0 || !strings.HasPrefix(name, prefix) {
			continue
		}
		live := sub.live()
		if (deletedOnly && !live) || (!deletedOnly && (live || deleted)) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (s *Server) getSubjects(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	reply(w, s.subjectNamesLocked(r.URL.Query().Get("subjectPrefix"), flag(r, "deleted"), flag(r, "deletedOnly")))
}

// subjectLocked finds a subject with versions (live ones unless deleted).
func (s *Server) subjectLocked(name string, deleted bool) (*subj, *Error) {
	sub := s.mu.st.subjects[name]
	if sub == nil || len(sub.versions) == 0 || (!deleted && !sub.live()) {
		return nil, subjectNotFound(name)
	}
	return sub, nil
}

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	deleted, deletedOnly := flag(r, "deleted"), flag(r, "deletedOnly")
	s.mu.RLock()
	defer s.mu.RUnlock()
	sub, e := s.subjectLocked(subject, deleted || deletedOnly)
	if e != nil {
		fail(w, e)
		return
	}
	out := []int{}
	for _, v := range sub.versions {
		if (deletedOnly && v.deleted) || (!deletedOnly && (deleted || !v.deleted)) {
			out = append(out, v.number)
		}
	}
	reply(w, out)
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	n, e := parseVersion(r.PathValue("version"))
	if e != nil {
		fail(w, e)
		return
	}
	deleted := flag(r, "deleted")
	s.mu.RLock()
	sub, e := s.subjectLocked(subject, deleted)
	var res schemaResponse
	if e == nil {
		if v, ok := sub.find(n, deleted); !ok {
			e = versionNotFound(subject, n)
		} else {
			res = s.responseLocked(r, subject, v.number, s.mu.st.schemas[v.id])
		}
	}
	s.mu.RUnlock()
	if e != nil {
		fail(w, e)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/schema") {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, res.Schema)
		return
	}
	reply(w, res)
}

func (s *Server) getReferencedBy(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	n, e := parseVersion(r.PathValue("version"))
	if e != nil {
		fail(w, e)
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sub, e := s.subjectLocked(subject, false)
	if e != nil {
		fail(w, e)
		return
	}
	v, ok := sub.find(n, false)
	if !ok {
		fail(w, versionNotFound(subject, n))
		return
	}
	reply(w, s.referrersLocked(subject, v.number))
}

// referrersLocked lists the ids of live versions whose schema references
// subject's version.
func (s *Server) referrersLocked(subject string, version int) []int {
	ids := []int{}
	for _, sub := range s.mu.st.subjects {
		for _, v := range sub.versions {
			if v.deleted {
				continue
			}
			for _, ref := range s.mu.st.schemas[v.id].refs {
				if ref.Subject == subject && ref.Version == version && !slices.Contains(ids, v.id) {
					ids = append(ids, v.id)
				}
			}
		}
	}
	sort.Ints(ids)
	return ids
}

// lookup is POST /subjects/{subject}: is this schema registered under
// the subject?
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	req, e := readSchema(r)
	if e != nil {
		fail(w, e)
		return
	}
	deleted := flag(r, "deleted")
	s.mu.RLock()
	defer s.mu.RUnlock()
	sub, e := s.subjectLocked(subject, deleted)
	if e != nil {
		fail(w, e)
		return
	}
	if id, ok := s.mu.st.ids[identity(req.SchemaType, req.Schema, req.References)]; ok {
		for i := len(sub.versions) - 1; i >= 0; i-- {
			if v := sub.versions[i]; v.id == id && (deleted || !v.deleted) {
				reply(w, response(subject, v.number, s.mu.st.schemas[id]))
				return
			}
		}
	}
	fail(w, apiErr(CodeSchemaNotFound, "Schema not found under subject '%s'", subject))
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.mu.RLock()
	defer s.mu.RUnlock()
	level := s.mu.st.level
	if subject != "" {
		if sub := s.mu.st.subjects[subject]; sub != nil && sub.level != "" {
			level = sub.level
		} else if !flag(r, "defaultToGlobal") {
			fail(w, apiErr(CodeSubjectCompatNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subject))
			return
		}
	}
	if level == "" {
		level = LevelBackward
	}
	reply(w, map[string]string{"compatibilityLevel": level})
}

// checkCompat is POST /compatibility/subjects/{subject}/versions[/{v}]:
// against one version (latest by default) in the direction of the
// subject's level, or without a version against every live version under
// the level.
func (s *Server) checkCompat(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	n, all := -1, r.PathValue("version") == ""
	if !all {
		var e *Error
		if n, e = parseVersion(r.PathValue("version")); e != nil {
			fail(w, e)
			return
		}
	}
	req, e := readSchema(r)
	if e != nil {
		fail(w, e)
		return
	}
	s.mu.RLock()
	msgs, e := s.compatLocked(subject, n, all, req)
	s.mu.RUnlock()
	if e != nil {
		fail(w, e)
		return
	}
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if flag(r, "verbose") {
		if msgs == nil {
			msgs = []string{}
		}
		out["messages"] = msgs
	}
	reply(w, out)
}

func (s *Server) compatLocked(subject string, n int, all bool, req *schemaRequest) ([]string, *Error) {
	p, e := s.parseLocked(req.SchemaType, req.Schema, req.References)
	if e != nil {
		return nil, e
	}
	sub := s.mu.st.subjects[subject]
	if sub == nil || !sub.live() {
		if n == -1 {
			return nil, nil // nothing to be incompatible with
		}
		return nil, subjectNotFound(subject)
	}
	level := s.mu.st.levelOf(subject)
	if all {
		olds, e := s.liveParsedLocked(sub)
		if e != nil {
			return nil, e
		}
		return checkLevel(level, p, olds), nil
	}
	v, ok := sub.find(n, false)
	if !ok {
		return nil, versionNotFound(subject, n)
	}
	old, e := s.parsedLocked(v.id)
	if e != nil {
		return nil, e
	}
	return checkLevel(level, p, []*parsed{old}), nil
}
