package schemaregistry

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
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
	m.HandleFunc("PUT /mode", s.putMode)
	m.HandleFunc("PUT /mode/{subject}", s.putMode)
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
			if !ok || !known || subtle.ConstantTimeCompare([]byte(p), []byte(string(want))) != 1 {
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

func typeOrEmpty(t string) string {
	if t == typeAvro {
		return ""
	}
	return t
}

func (s *Server) getMode(w http.ResponseWriter, r *http.Request) {
	reply(w, map[string]string{"mode": "READWRITE"})
}

// putMode accepts READWRITE, the only mode, and refuses the others
// (IMPORT, READONLY, READONLY_OVERRIDE) with 42204.
func (s *Server) putMode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Mode string `json:"mode"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		fail(w, apiErr(CodeJSONParseError, "Unrecognized request body: %v; want {\"mode\": \"READWRITE\"}", err))
		return
	}
	if req.Mode != "READWRITE" {
		fail(w, apiErr(CodeInvalidMode, "Invalid mode %q: this registry has READWRITE only", req.Mode))
		return
	}
	reply(w, map[string]string{"mode": "READWRITE"})
}
