package format_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/internal/srtest"
)

// The registry of these tests is the embedded one (package
// schemaregistry) on an embedded broker (internal/srtest).

const schema = `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`

// TestClientCaches: an id, a subject's version and a registration are
// each fetched once (R1), and a 404 is ErrUnknownSchema naming the id.
func TestClientCaches(t *testing.T) {
	reg := srtest.Start(t, nil, nil)
	hits := &reg.Requests
	c, err := format.NewClient(format.RegistryConfig{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := c.Register(ctx, "s-value", sr.Schema{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	h0 := hits.Load()
	for range 100 {
		if _, err := c.Register(ctx, "s-value", sr.Schema{Schema: schema}); err != nil {
			t.Fatal(err)
		}
		s, err := c.SchemaByID(ctx, id)
		if err != nil || s.Schema == "" {
			t.Fatalf("SchemaByID: %v %v", s, err)
		}
		if _, err := c.SchemaByVersion(ctx, "s-value", -1); err != nil {
			t.Fatal(err)
		}
	}
	if got := hits.Load() - h0; got != 1 { // the latest version, once
		t.Fatalf("%d requests for 300 look-ups; want 1", got)
	}
	if got := c.Requests(); got != hits.Load() {
		t.Fatalf("Requests() = %d; the registry saw %d", got, hits.Load())
	}
	_, err = c.SchemaByID(ctx, 999)
	if !errors.Is(err, format.ErrUnknownSchema) || !strings.Contains(err.Error(), "schema id 999") {
		t.Fatalf("unknown id: %v; want ErrUnknownSchema naming 999", err)
	}
}

// TestClientRetriesThenGivesUp: a registry answering 503 is retried with
// back-off (R2) and, past RetryLimit, the fetch fails with ErrUnavailable;
// one that recovers within the limit is waited for.
func TestClientRetriesThenGivesUp(t *testing.T) {
	reg := srtest.Start(t, nil, nil)
	setup, _ := format.NewClient(format.RegistryConfig{URL: reg.URL})
	id, err := setup.Register(context.Background(), "s", sr.Schema{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	down := &reg.Down
	down.Store(3)
	c, _ := format.NewClient(format.RegistryConfig{URL: reg.URL, RetryLimit: time.Minute})
	if _, err := c.SchemaByID(context.Background(), id); err != nil {
		t.Fatalf("after 3 failures: %v; want the schema", err)
	}
	down.Store(1 << 30)
	c, _ = format.NewClient(format.RegistryConfig{URL: reg.URL, RetryLimit: 300 * time.Millisecond})
	_, err = c.SchemaByID(context.Background(), id)
	if !errors.Is(err, format.ErrUnavailable) {
		t.Fatalf("always down: %v; want ErrUnavailable", err)
	}
	if n := c.Requests(); n < 2 {
		t.Fatalf("%d requests; want it retried", n)
	}
}

// TestClientBasicAuth: the credentials are sent; wrong ones make Check
// say so, without the password in the error.
func TestClientBasicAuth(t *testing.T) {
	reg := srtest.Start(t, nil, map[string]string{"svc": "s3cret"})
	c, _ := format.NewClient(format.RegistryConfig{URL: reg.URL, Username: "svc", Password: "s3cret"})
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, _ = format.NewClient(format.RegistryConfig{URL: reg.URL, Username: "svc", Password: "wrong-pw"})
	err := c.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("wrong password: %v; want refused credentials, no password", err)
	}
}

func TestRegistryConfigValidate(t *testing.T) {
	for _, c := range []format.RegistryConfig{{}, {URL: "localhost:8081"}, {URL: "http://r", Password: "x"}} {
		if _, err := format.NewClient(c); err == nil {
			t.Errorf("NewClient(%+v): no error", c)
		}
	}
}
