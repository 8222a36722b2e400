// Package srtest starts the embedded schema registry (package
// schemaregistry) on an embedded broker for tests, behind an HTTP server
// that counts the requests it serves and can be made to answer 503.
package srtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/schemaregistry"
)

// Registry is a running registry.
type Registry struct {
	// URL is its base URL.
	URL string
	// Broker holds its _schemas topic; tests may create their topics on
	// it too.
	Broker *broker.Broker
	// Requests counts the HTTP requests served (503s included).
	Requests atomic.Int64
	// Down, while positive, makes each request answer 503 and decrements.
	Down atomic.Int64
}

// Start starts a registry (with users, if any, required by basic auth) on
// a new embedded broker holding topics; both close with the test.
func Start(t testing.TB, topics map[string]int32, users map[string]string) *Registry {
	t.Helper()
	br, err := broker.Start(broker.Options{Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	return StartOn(t, br, users)
}

// StartOn starts a registry (with users, if any, required by basic auth)
// on br, which the caller closes; the registry closes with the test.
func StartOn(t testing.TB, br *broker.Broker, users map[string]string) *Registry {
	t.Helper()
	secrets := make(map[string]kafkasec.Secret, len(users))
	for u, p := range users {
		secrets[u] = kafkasec.Secret(p)
	}
	srv, err := schemaregistry.Start(context.Background(), schemaregistry.Config{Brokers: br.Addrs(), Users: secrets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := &Registry{Broker: br}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Requests.Add(1)
		if r.Down.Add(-1) >= 0 {
			http.Error(w, `{"error_code":50301,"message":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		r.Down.Store(0)
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	r.URL = hs.URL
	return r
}
