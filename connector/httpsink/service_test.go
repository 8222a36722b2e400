package httpsink_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// service is an HTTP service that behaves like one honouring idempotency
// keys: a request whose key it has seen is answered 200 again and its
// records are not taken twice. It records every request.
type service struct {
	srv *httptest.Server
	// fail, if set, may answer a request instead (status and headers
	// written by it) and return true; n counts the requests so far.
	fail func(w http.ResponseWriter, r *http.Request, n int, recs []map[string]any) bool

	mu struct {
		sync.Mutex
		requests   int
		keys       map[string]string // key -> body
		records    []map[string]any  // taken, in order
		duplicates int               // requests with a key seen before
		conflicts  int               // a key seen before with another body
		headers    []http.Header
	}
}

func newService(t *testing.T) *service {
	s := &service{}
	s.mu.keys = map[string]string{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	recs, err := decodeBody(r.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.mu.requests++
	n := s.mu.requests
	s.mu.headers = append(s.mu.headers, r.Header.Clone())
	s.mu.Unlock()
	if s.fail != nil && s.fail(w, r, n, recs) {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if prev, ok := s.mu.keys[key]; ok {
			s.mu.duplicates++
			if prev != string(body) {
				s.mu.conflicts++
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		s.mu.keys[key] = string(body)
	}
	s.mu.records = append(s.mu.records, recs...)
	w.WriteHeader(http.StatusAccepted)
}

// decodeBody reads a JSON value, a JSON array, or JSON lines.
func decodeBody(ct string, body []byte) ([]map[string]any, error) {
	if strings.HasPrefix(ct, "application/x-ndjson") {
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, sc.Err()
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		var out []map[string]any
		err := json.Unmarshal(t, &out)
		return out, err
	}
	var m map[string]any
	err := json.Unmarshal(body, &m)
	return []map[string]any{m}, err
}

func (s *service) snapshot() (records []map[string]any, requests, duplicates, conflicts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.mu.records...), s.mu.requests, s.mu.duplicates, s.mu.conflicts
}

func (s *service) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.records)
}
