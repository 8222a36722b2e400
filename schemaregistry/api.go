package schemaregistry

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// contentType is what every response is sent as.
const contentType = "application/vnd.schemaregistry.v1+json"

// requestTypes are the request content types accepted (an absent one too).
var requestTypes = []string{"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"}

// maxBody bounds a request body.
const maxBody = 16 << 20

func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { reply(w, map[string]any{}) })
	m.HandleFunc("GET /schemas/types", func(w http.ResponseWriter, r *http.Request) { reply(w, schemaTypes) })
	m.HandleFunc("GET /schemas", s.getSchemas)
	m.HandleFunc("GET /schemas/ids/{id}", s.getByID)
	m.HandleFunc("GET /schemas/ids/{id}/schema", s.getByID)
	m.HandleFunc("GET /schemas/ids/{id}/versions", s.getIDVersions)
	m.HandleFunc("GET /schemas/ids/{id}/subjects", s.getIDVersions)
	m.HandleFunc("GET /subjects", s.getSubjects)
	m.HandleFunc("POST /subjects/{subject}/versions", s.register)
	m.HandleFunc("POST /subjects/{subject}", s.lookup)
	m.HandleFunc("DELETE /subjects/{subject}", s.deleteSubject)
	m.HandleFunc("GET /subjects/{subject}/versions", s.getVersions)
	m.HandleFunc("GET /subjects/{subject}/versions/{version}", s.getVersion)
	m.HandleFunc("GET /subjects/{subject}/versions/{version}/schema", s.getVersion)
	m.HandleFunc("GET /subjects/{subject}/versions/{version}/referencedby", s.getReferencedBy)
	m.HandleFunc("DELETE /subjects/{subject}/versions/{version}", s.deleteVersion)
	m.HandleFunc("GET /config", s.getConfig)
	m.HandleFunc("PUT /config", s.putConfig)
	m.HandleFunc("DELETE /config", s.deleteConfig)
	m.HandleFunc("GET /config/{subject}", s.getConfig)
	m.HandleFunc("PUT /config/{subject}", s.putConfig)
	m.HandleFunc("DELETE /config/{subject}", s.deleteConfig)
	m.HandleFunc("POST /compatibility/subjects/{subject}/versions/{version}", s.checkCompat)
	m.HandleFunc("POST /compatibility/subjects/{subject}/versions", s.checkCompat)
	m.HandleFunc("GET /mode", s.getMode)
	m.HandleFunc("GET /mode/{subject}", s.getMode)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, apiErr(CodeNotFound, "HTTP 404 Not Found"))
	})
	return s.guard(m)
}

// guard checks basic authentication and the request's content type.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.Users) > 0 {
			u, p, ok := r.BasicAuth()
			want, known := s.cfg.Users[u]
			if !ok || !known || subtle.ConstantTimeCompare([]byte(p), []byte(want)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="weir schema registry"`)
				fail(w, apiErr(CodeUnauthorized, "Unauthorized"))
				return
			}
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPut {
			if ct := r.Header.Get("Content-Type"); ct != "" {
				mt, _, err := mime.ParseMediaType(ct)
				if err != nil || !slices.Contains(requestTypes, mt) {
					fail(w, apiErr(CodeUnsupportedMediaType, "HTTP 415 Unsupported Media Type: %q; want one of %s", ct, strings.Join(requestTypes, ", ")))
					return
				}
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		next.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", contentType)
	b, _ := json.Marshal(v)
	w.Write(b)
}

func fail(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(e.Status())
	b, _ := json.Marshal(e)
	w.Write(b)
}

func flag(r *http.Request, name string) bool { return r.URL.Query().Get(name) == "true" }

// schemaRequest is the body of register, lookup and compatibility checks.
type schemaRequest struct {
	Schema     string          `json:"schema"`
	SchemaType string          `json:"schemaType"`
	References []Reference     `json:"references"`
	ID         int             `json:"id"`
	Version    int             `json:"version"`
	Metadata   json.RawMessage `json:"metadata"`
	RuleSet    json.RawMessage `json:"ruleSet"`
}

// schemaResponse is a subject version (or, without subject and version, a
// schema by id).
type schemaResponse struct {
	Subject    string      `json:"subject,omitempty"`
	Version    int         `json:"version,omitempty"`
	ID         int         `json:"id,omitempty"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func response(subject string, version int, sc *stored) schemaResponse {
	t := sc.schemaType
	if t == typeAvro {
		t = "" // as Confluent: AVRO is the default and left out
	}
	return schemaResponse{Subject: subject, Version: version, ID: sc.id, SchemaType: t, References: sc.refs, Schema: sc.schema}
}

// readSchema decodes and checks a schema request: the type, the canonical
// text (I2).
func readSchema(r *http.Request) (*schemaRequest, *Error) {
	var req schemaRequest
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, apiErr(42209, "Schema too large: the request is over %d bytes", maxBody)
		}
		return nil, apiErr(CodeJSONParseError, "Reading the request: %v", err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, apiErr(CodeJSONParseError, "Unrecognized request body: %v; want {\"schema\": \"...\", \"schemaType\": \"AVRO\"}", err)
	}
	if req.SchemaType == "" {
		req.SchemaType = typeAvro
	}
	req.SchemaType = strings.ToUpper(req.SchemaType)
	if !slices.Contains(schemaTypes, req.SchemaType) {
		return nil, apiErr(CodeInvalidSchema, "Invalid schemaType %q; want AVRO, PROTOBUF or JSON", req.SchemaType)
	}
	if strings.TrimSpace(req.Schema) == "" {
		return nil, apiErr(CodeInvalidSchema, "Empty schema")
	}
	c, e := canonical(req.SchemaType, req.Schema)
	if e != nil {
		return nil, e
	}
	req.Schema = c
	for _, ref := range req.References {
		if ref.Name == "" || ref.Subject == "" {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema: a reference needs a name and a subject (got %+v)", ref)
		}
	}
	return &req, nil
}

func checkSubject(subject string) *Error {
	if subject == "" || strings.IndexFunc(subject, unicode.IsControl) >= 0 {
		return apiErr(CodeInvalidSubject, "Invalid subject %q: want a non-empty name without control characters", subject)
	}
	return nil
}

// parseVersion reads a version path segment: "latest" or -1 is -1, else
// 1 to 2^31-1.
func parseVersion(v string) (int, *Error) {
	if v == "latest" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n == 0 || n < -1 || n > 1<<31-1 {
		return 0, apiErr(CodeInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
	}
	return n, nil
}

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
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
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
		if e := s.write(r.Context(), [2][]byte{schemaKeyBytes(subject, version), mustJSON(val)}); e != nil {
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

// parseLocked resolves refs against the state and parses the schema.
func (s *Server) parseLocked(schemaType, text string, refs []Reference) (*parsed, *Error) {
	deps, e := s.resolveLocked(refs, 0)
	if e != nil {
		return nil, e
	}
	return parseSchema(schemaType, text, deps)
}

// resolveLocked returns the referenced schemas, each after its own
// references, each name once.
func (s *Server) resolveLocked(refs []Reference, depth int) ([]resolved, *Error) {
	if depth > 32 {
		return nil, apiErr(CodeInvalidSchema, "Invalid schema: references nested more than 32 deep (a cycle?)")
	}
	var out []resolved
	for _, ref := range refs {
		sub := s.mu.st.subjects[ref.Subject]
		n := ref.Version
		if n == 0 {
			n = -1
		}
		var v ver
		ok := sub != nil
		if ok {
			v, ok = sub.find(n, false)
		}
		if !ok {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema: reference %q: subject '%s' version %d not found", ref.Name, ref.Subject, ref.Version)
		}
		sc := s.mu.st.schemas[v.id]
		sub2, e := s.resolveLocked(sc.refs, depth+1)
		if e != nil {
			return nil, e
		}
		for _, d := range append(sub2, resolved{name: ref.Name, text: sc.schema}) {
			if !slices.ContainsFunc(out, func(o resolved) bool { return o.name == d.name }) {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// liveParsedLocked parses the subject's live versions, oldest first.
func (s *Server) liveParsedLocked(sub *subj) ([]*parsed, *Error) {
	var out []*parsed
	for _, v := range sub.versions {
		if v.deleted {
			continue
		}
		p, e := s.parsedLocked(v.id)
		if e != nil {
			return nil, e
		}
		out = append(out, p)
	}
	return out, nil
}

// parsedLocked parses the stored schema id once and keeps it: a stored
// schema never changes, and its references name fixed versions.
func (s *Server) parsedLocked(id int) (*parsed, *Error) {
	s.cache.Lock()
	defer s.cache.Unlock()
	if p, ok := s.cache.parsed[id]; ok {
		return p, nil
	}
	sc := s.mu.st.schemas[id]
	p, e := s.parseLocked(sc.schemaType, sc.schema, sc.refs)
	if e != nil {
		return nil, apiErr(CodeStoreError, "Stored schema %d does not parse: %s", id, e.Message)
	}
	s.cache.parsed[id] = p
	return p, nil
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

func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	n, e := parseVersion(r.PathValue("version"))
	if e != nil {
		fail(w, e)
		return
	}
	permanent := flag(r, "permanent")
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
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
	if e := s.write(r.Context(), rec); e != nil {
		fail(w, e)
		return
	}
	reply(w, v.number)
}

func typeOrEmpty(t string) string {
	if t == typeAvro {
		return ""
	}
	return t
}

func (s *Server) deleteSubject(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	permanent := flag(r, "permanent")
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
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
	if e := s.write(r.Context(), recs...); e != nil {
		fail(w, e)
		return
	}
	reply(w, numbers)
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
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if e := s.write(r.Context(), [2][]byte{configKeyBytes(subject), mustJSON(configValue{CompatibilityLevel: level})}); e != nil {
		fail(w, e)
		return
	}
	reply(w, map[string]string{"compatibility": level})
}

func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
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
	if e := s.write(r.Context(), [2][]byte{configKeyBytes(subject), nil}); e != nil {
		fail(w, e)
		return
	}
	reply(w, map[string]string{"compatibility": old})
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

func (s *Server) getMode(w http.ResponseWriter, r *http.Request) {
	reply(w, map[string]string{"mode": "READWRITE"})
}
