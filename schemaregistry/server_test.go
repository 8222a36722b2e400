package schemaregistry_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/schemaregistry"
)

const (
	ordersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"amount","type":"int"}]}`
	// v2 adds a field with a default and promotes amount int -> long:
	// BACKWARD compatible.
	ordersV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""}]}`
	// bad adds a field without a default: not BACKWARD compatible.
	ordersBad = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"amount","type":"int"},{"name":"customer","type":"string"}]}`
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func startBroker(t *testing.T, opts broker.Options) *broker.Broker {
	t.Helper()
	return testenv.StartBroker(t, opts)
}

// startRegistry starts a registry on b and an HTTP server for it; it
// returns the server (closed by the test's cleanup unless closed before)
// and a franz-go client of it.
func startRegistry(t *testing.T, b *broker.Broker, cfg schemaregistry.Config) (*schemaregistry.Server, *sr.Client, string) {
	t.Helper()
	cfg.Brokers = b.Addrs()
	s, err := schemaregistry.Start(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(s.Handler())
	t.Cleanup(func() { h.Close(); s.Close() })
	cl, err := sr.NewClient(sr.URLs(h.URL))
	if err != nil {
		t.Fatal(err)
	}
	return s, cl, h.URL
}

// code is the Confluent error code of err (0 if it has none).
func code(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

func TestRoundTripWithFranzGoClient(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)

	types, err := cl.SupportedTypes(c)
	if err != nil || !slices.Equal(types, []sr.SchemaType{sr.TypeAvro, sr.TypeProtobuf, sr.TypeJSON}) {
		t.Fatalf("SupportedTypes = %v, %v", types, err)
	}

	ss, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: ordersV1})
	if err != nil {
		t.Fatal(err)
	}
	if ss.ID != 1 || ss.Version != 1 || ss.Subject != "orders-value" {
		t.Fatalf("first registration = %+v; want id 1, version 1", ss)
	}
	// Identical text (whitespace aside) under the same subject: same id,
	// no new version.
	again, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: "{ \"type\": \"record\", \"name\":\"Order\",\"namespace\":\"shop\",\n \"fields\":[{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"amount\",\"type\":\"int\"}]}"})
	if err != nil || again.ID != 1 || again.Version != 1 {
		t.Fatalf("registering again = %+v, %v; want id 1 version 1", again, err)
	}
	// The same schema under another subject: the same id.
	other, err := cl.CreateSchema(c, "refunds-value", sr.Schema{Schema: ordersV1})
	if err != nil || other.ID != 1 || other.Version != 1 {
		t.Fatalf("same schema in another subject = %+v, %v; want id 1 version 1", other, err)
	}

	v2, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: ordersV2})
	if err != nil || v2.ID != 2 || v2.Version != 2 {
		t.Fatalf("v2 = %+v, %v; want id 2 version 2", v2, err)
	}
	byID, err := cl.SchemaByID(c, 2)
	if err != nil || byID.Schema != ordersV2 || byID.Type != sr.TypeAvro {
		t.Fatalf("SchemaByID(2) = %+v, %v", byID, err)
	}
	text, err := cl.SchemaTextByID(c, 1)
	if err != nil || text != ordersV1 {
		t.Fatalf("SchemaTextByID(1) = %q, %v", text, err)
	}
	versions, err := cl.SubjectVersions(c, "orders-value")
	if err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("SubjectVersions = %v, %v", versions, err)
	}
	latest, err := cl.SchemaByVersion(c, "orders-value", -1)
	if err != nil || latest.Version != 2 || latest.ID != 2 || latest.Schema.Schema != ordersV2 {
		t.Fatalf("latest = %+v, %v", latest, err)
	}
	subjects, err := cl.Subjects(c)
	if err != nil || !slices.Equal(subjects, []string{"orders-value", "refunds-value"}) {
		t.Fatalf("Subjects = %v, %v", subjects, err)
	}
	usages, err := cl.SchemaVersionsByID(c, 1)
	if err != nil || len(usages) != 2 {
		t.Fatalf("SchemaVersionsByID(1) = %v, %v; want orders-value/1 and refunds-value/1", usages, err)
	}
	found, err := cl.LookupSchema(c, "orders-value", sr.Schema{Schema: ordersV2})
	if err != nil || found.ID != 2 || found.Version != 2 {
		t.Fatalf("LookupSchema = %+v, %v", found, err)
	}
	if _, err := cl.LookupSchema(c, "refunds-value", sr.Schema{Schema: ordersV2}); code(err) != 40403 {
		t.Fatalf("LookupSchema of an unregistered schema: %v; want 40403", err)
	}

	// Compatibility: BACKWARD by default; a field without default is refused.
	res, err := cl.CheckCompatibility(sr.WithParams(c, sr.Verbose), "orders-value", -1, sr.Schema{Schema: ordersBad})
	if err != nil || res.Is || len(res.Messages) == 0 {
		t.Fatalf("CheckCompatibility(bad) = %+v, %v; want not compatible with messages", res, err)
	}
	if _, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: ordersBad}); code(err) != 409 {
		t.Fatalf("registering an incompatible schema: %v; want error code 409", err)
	}
	cr := cl.Compatibility(c)
	if cr[0].Err != nil || cr[0].Level != sr.CompatBackward {
		t.Fatalf("global compatibility = %+v", cr[0])
	}
	set := cl.SetCompatibility(c, sr.SetCompatibility{Level: sr.CompatNone}, "orders-value")
	if set[0].Err != nil || set[0].Level != sr.CompatNone {
		t.Fatalf("SetCompatibility = %+v", set[0])
	}
	if got := cl.Compatibility(c, "orders-value"); got[0].Err != nil || got[0].Level != sr.CompatNone {
		t.Fatalf("subject compatibility = %+v", got[0])
	}
	if got := cl.Compatibility(c, "refunds-value"); code(got[0].Err) != 40408 {
		t.Fatalf("compatibility of a subject without its own: %+v; want 40408", got[0])
	}
	bad, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: ordersBad})
	if err != nil || bad.Version != 3 || bad.ID != 3 {
		t.Fatalf("registering under NONE = %+v, %v; want id 3 version 3", bad, err)
	}

	// Deletes: soft, then permanent; the id's schema stays while used.
	if err := cl.DeleteSchema(c, "orders-value", 3, sr.HardDelete); code(err) != 40407 {
		t.Fatalf("hard delete before soft: %v; want 40407", err)
	}
	if err := cl.DeleteSchema(c, "orders-value", 3, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if versions, _ := cl.SubjectVersions(c, "orders-value"); !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("versions after soft delete = %v", versions)
	}
	if _, err := cl.SchemaByVersion(c, "orders-value", 3); code(err) != 40402 {
		t.Fatalf("soft-deleted version: %v; want 40402", err)
	}
	if err := cl.DeleteSchema(c, "orders-value", 3, sr.HardDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SchemaByID(c, 3); code(err) != 40403 {
		t.Fatalf("schema of a permanently deleted version: %v; want 40403", err)
	}
	deleted, err := cl.DeleteSubject(c, "refunds-value", sr.SoftDelete)
	if err != nil || !slices.Equal(deleted, []int{1}) {
		t.Fatalf("DeleteSubject = %v, %v", deleted, err)
	}
	if _, err := cl.SubjectVersions(c, "refunds-value"); code(err) != 40401 {
		t.Fatalf("versions of a deleted subject: %v; want 40401", err)
	}
	if _, err := cl.DeleteSubject(c, "refunds-value", sr.HardDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SchemaByID(c, 1); err != nil {
		t.Fatalf("id 1 is still used by orders-value: %v", err)
	}
	// A subject name with a slash, escaped in the path.
	if ss, err := cl.CreateSchema(c, "team/orders-value", sr.Schema{Schema: ordersV1}); err != nil || ss.ID != 1 || ss.Subject != "team/orders-value" {
		t.Fatalf("a subject with a slash = %+v, %v", ss, err)
	}
	// A new schema after deletes still gets a new id (never 3 again).
	next, err := cl.CreateSchema(c, "payments-value", sr.Schema{Schema: `"string"`})
	if err != nil || next.ID != 4 {
		t.Fatalf("after deletes = %+v, %v; want id 4", next, err)
	}
}

// TestRestartKeepsIdsAndSubjects stops the registry and starts a new one
// on the same broker: it reads the topic back (I1, I5).
func TestRestartKeepsIdsAndSubjects(t *testing.T) {
	b := startBroker(t, broker.Options{})
	s1, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)
	if _, err := cl.CreateSchema(c, "a", sr.Schema{Schema: ordersV1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(c, "a", sr.Schema{Schema: ordersV2}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(c, "b", sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON}); err != nil {
		t.Fatal(err)
	}
	if r := cl.SetCompatibility(c, sr.SetCompatibility{Level: sr.CompatFull}, "b"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if err := cl.DeleteSchema(c, "a", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	s1.Close()

	_, cl2, _ := startRegistry(t, b, schemaregistry.Config{})
	if v, err := cl2.SubjectVersions(c, "a"); err != nil || !slices.Equal(v, []int{2}) {
		t.Fatalf("versions of a after restart = %v, %v; want [2]", v, err)
	}
	if s, err := cl2.SchemaByVersion(c, "b", 1); err != nil || s.ID != 3 || s.Type != sr.TypeJSON {
		t.Fatalf("b/1 after restart = %+v, %v; want id 3, JSON", s, err)
	}
	if r := cl2.Compatibility(c, "b"); r[0].Err != nil || r[0].Level != sr.CompatFull {
		t.Fatalf("level of b after restart = %+v", r[0])
	}
	if s, err := cl2.SchemaByID(c, 1); err != nil || s.Schema != ordersV1 {
		t.Fatalf("id 1 after restart = %+v, %v", s, err)
	}
	next, err := cl2.CreateSchema(c, "c", sr.Schema{Schema: `"string"`})
	if err != nil || next.ID != 4 {
		t.Fatalf("first registration after restart = %+v, %v; want id 4", next, err)
	}
}
