package schemaregistry_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/schemaregistry"
)

// call makes one raw HTTP request and returns the status and the decoded
// Confluent error code (0 when the body has none).
func call(t *testing.T, method, url, contentType, body string) (int, int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Code    int    `json:"error_code"`
		Message string `json:"message"`
	}
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Code, string(b)
}

func TestBadRequestsGetConfluentErrorCodes(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, url := startRegistry(t, b, schemaregistry.Config{})
	if _, err := cl.CreateSchema(ctx(t), "a", sr.Schema{Schema: ordersV1}); err != nil {
		t.Fatal(err)
	}
	const v1 = "application/vnd.schemaregistry.v1+json"
	for _, c := range []struct {
		method, path, ctype, body string
		status, code              int
	}{
		{"GET", "/subjects/nope/versions", "", "", 404, 40401},
		{"GET", "/subjects/nope/versions/latest", "", "", 404, 40401},
		{"GET", "/subjects/a/versions/9", "", "", 404, 40402},
		{"GET", "/subjects/a/versions/abc", "", "", 422, 42202},
		{"GET", "/subjects/a/versions/0", "", "", 422, 42202},
		{"GET", "/schemas/ids/99", "", "", 404, 40403},
		{"GET", "/schemas/ids/x", "", "", 404, 40403},
		{"POST", "/subjects/a/versions", v1, `{"schema":"{\"type\":\"record\",\"name\":\"R\"}"}`, 422, 42201},
		{"POST", "/subjects/a/versions", v1, `{"schema":"not json"}`, 422, 42201},
		{"POST", "/subjects/a/versions", v1, `{"schema":"{}","schemaType":"XML"}`, 422, 42201},
		{"POST", "/subjects/a/versions", v1, `{"schema":""}`, 422, 42201},
		{"POST", "/subjects/a/versions", "application/json", `{"schema":`, 500, 50005},
		{"POST", "/subjects/a/versions", "text/plain", `{"schema":"\"int\""}`, 415, 415},
		{"POST", "/subjects/b/versions", v1, `{"schema":"\"int\"","references":[{"name":"x","subject":"nope","version":1}]}`, 422, 42201},
		{"POST", "/subjects/a", v1, `{"schema":"\"int\""}`, 404, 40403},
		{"POST", "/subjects/nope", v1, `{"schema":"\"int\""}`, 404, 40401},
		{"PUT", "/config", v1, `{"compatibility":"SIDEWAYS"}`, 422, 42203},
		{"PUT", "/config/a", "application/json", `{"compatibility":"sideways"}`, 422, 42203},
		{"GET", "/config/nope", "", "", 404, 40408},
		{"DELETE", "/subjects/nope", "", "", 404, 40401},
		{"DELETE", "/subjects/a?permanent=true", "", "", 404, 40405},
		{"DELETE", "/subjects/a/versions/1?permanent=true", "", "", 404, 40407},
		{"POST", "/compatibility/subjects/a/versions/7", v1, `{"schema":"\"int\""}`, 404, 40402},
		{"POST", "/compatibility/subjects/nope/versions/1", v1, `{"schema":"\"int\""}`, 404, 40401},
		{"GET", "/no/such/path", "", "", 404, 404},
	} {
		status, code, body := call(t, c.method, url+c.path, c.ctype, c.body)
		if status != c.status || code != c.code {
			t.Errorf("%s %s %s: status %d code %d (%s); want %d %d", c.method, c.path, c.body, status, code, body, c.status, c.code)
		}
	}
	// A new subject's compatibility check against latest: nothing to be
	// incompatible with.
	if status, _, body := call(t, "POST", url+"/compatibility/subjects/new/versions/latest", v1, `{"schema":"\"int\""}`); status != 200 || !strings.Contains(body, `"is_compatible":true`) {
		t.Errorf("compatibility of a new subject: %d %s", status, body)
	}
}

func TestBasicAuth(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, url := startRegistry(t, b, schemaregistry.Config{Users: map[string]string{"alice": "pw"}})
	if _, err := cl.Subjects(ctx(t)); code(err) != 401 {
		t.Fatalf("without credentials: %v; want 401", err)
	}
	bad, _ := sr.NewClient(sr.URLs(url), sr.BasicAuth("alice", "wrong"))
	if _, err := bad.Subjects(ctx(t)); code(err) != 401 {
		t.Fatalf("wrong password: %v; want 401", err)
	}
	good, _ := sr.NewClient(sr.URLs(url), sr.BasicAuth("alice", "pw"))
	if _, err := good.CreateSchema(ctx(t), "a", sr.Schema{Schema: `"int"`}); err != nil {
		t.Fatalf("right password: %v", err)
	}
}

// TestParallelRegistrations: distinct schemas registered at once get
// distinct ids, one schema registered at once by many gets one id (I4).
func TestParallelRegistrations(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)
	if r := cl.SetCompatibility(c, sr.SetCompatibility{Level: sr.CompatNone}); r[0].Err != nil {
		t.Fatal(r[0].Err) // the records below have different names
	}
	const n = 16
	ids := make([]int, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s sr.Schema
			subject := fmt.Sprintf("s%d", i%4)
			if i < n {
				s.Schema = fmt.Sprintf(`{"type":"record","name":"R%d","fields":[]}`, i)
			} else {
				s.Schema = `{"type":"record","name":"Same","fields":[]}`
			}
			ids[i], errs[i] = cl.RegisterSchema(c, subject, s, -1, -1)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	distinct := slices.Clone(ids[:n])
	slices.Sort(distinct)
	if len(slices.Compact(distinct)) != n {
		t.Fatalf("distinct schemas got ids %v; want %d distinct", ids[:n], n)
	}
	same := ids[n:]
	for _, id := range same {
		if id != same[0] || slices.Contains(ids[:n], id) {
			t.Fatalf("one schema registered in parallel got ids %v (distinct ones %v); want one id, not theirs", same, ids[:n])
		}
	}
	// Every subject has the shared schema once.
	for s := range 4 {
		got, err := cl.LookupSchema(c, fmt.Sprintf("s%d", s), sr.Schema{Schema: `{"type":"record","name":"Same","fields":[]}`})
		if err != nil || got.ID != same[0] {
			t.Fatalf("lookup in s%d = %+v, %v", s, got, err)
		}
		versions, _ := cl.SubjectVersions(c, fmt.Sprintf("s%d", s))
		if len(versions) != n/4+1 {
			t.Fatalf("s%d has versions %v; want %d", s, versions, n/4+1)
		}
	}
}

func TestReferences(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)
	common := "syntax = \"proto3\";\npackage shop;\nmessage Money { int64 units = 1; string currency = 2; }\n"
	if _, err := cl.CreateSchema(c, "money", sr.Schema{Schema: common, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	order := "syntax = \"proto3\";\npackage shop;\nimport \"shop/money.proto\";\nmessage Order { int64 id = 1; Money total = 2; }\n"
	refs := []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: 1}}
	if _, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf}); code(err) != 42201 {
		t.Fatalf("an import without its reference: %v; want 42201", err)
	}
	ss, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.SchemaByID(c, ss.ID)
	if err != nil || got.Type != sr.TypeProtobuf || !slices.Equal(got.References, refs) {
		t.Fatalf("SchemaByID = %+v, %v", got, err)
	}
	if err := cl.DeleteSchema(c, "money", 1, sr.SoftDelete); code(err) != 42206 {
		t.Fatalf("deleting a referenced schema: %v; want 42206", err)
	}
	// Avro: a named type from another subject.
	money := `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"units","type":"long"}]}`
	if _, err := cl.CreateSchema(c, "avro-money", sr.Schema{Schema: money}); err != nil {
		t.Fatal(err)
	}
	avroOrder := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"total","type":"shop.Money"}]}`
	if _, err := cl.CreateSchema(c, "avro-orders", sr.Schema{Schema: avroOrder, References: []sr.SchemaReference{{Name: "shop.Money", Subject: "avro-money", Version: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// TestProtobufSerializedDescriptors: Confluent's JavaScript and Go
// serializers register Protobuf schemas (and their references) as base64
// FileDescriptorProtos and fetch them with ?format=serialized.
func TestProtobufSerializedDescriptors(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)
	money := "syntax = \"proto3\";\npackage shop;\nmessage Money { int64 units = 1; }\n"
	if _, err := cl.CreateSchema(c, "money", sr.Schema{Schema: money, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	order := "syntax = \"proto3\";\npackage shop;\nimport \"shop/money.proto\";\nimport \"google/protobuf/timestamp.proto\";\n" +
		"message Order { int64 id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }\n"
	refs := []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: 1}}
	ss, err := cl.CreateSchema(c, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatal(err)
	}
	serial := sr.WithParams(c, sr.Format("serialized"))
	got, err := cl.SchemaByID(serial, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(got.Schema)
	if err != nil {
		t.Fatalf("format=serialized gave %q: %v", got.Schema, err)
	}
	var fdp descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(raw, &fdp); err != nil || len(fdp.MessageType) != 1 || fdp.MessageType[0].GetName() != "Order" ||
		!slices.Contains(fdp.Dependency, "shop/money.proto") {
		t.Fatalf("serialized descriptor = %v, %v", &fdp, err)
	}
	refText, err := cl.SchemaByVersion(serial, "money", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Register both as a serializer does: the reference, then the schema,
	// each as base64 descriptors.
	if _, err := cl.CreateSchema(c, "money-b64", sr.Schema{Schema: refText.Schema.Schema, Type: sr.TypeProtobuf}); err != nil {
		t.Fatalf("registering a base64 descriptor: %v", err)
	}
	b64, err := cl.CreateSchema(c, "orders-b64", sr.Schema{Schema: got.Schema, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money-b64", Version: 1}}})
	if err != nil {
		t.Fatalf("registering a base64 descriptor with a reference: %v", err)
	}
	again, err := cl.SchemaByID(serial, b64.ID)
	if err != nil || again.Schema != got.Schema {
		t.Fatalf("a base64 schema is given back as registered: %v, %v", again.Schema, err)
	}
	if found, err := cl.LookupSchema(c, "orders-b64", sr.Schema{Schema: got.Schema, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money-b64", Version: 1}}}); err != nil || found.ID != b64.ID {
		t.Fatalf("lookup of a base64 schema = %+v, %v", found, err)
	}
	// A field number reused with another type, as a descriptor, is refused.
	bad := proto.Clone(&fdp).(*descriptorpb.FileDescriptorProto)
	bad.MessageType[0].Field[0].Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	braw, _ := proto.Marshal(bad)
	if _, err := cl.CreateSchema(c, "orders-b64", sr.Schema{Schema: base64.StdEncoding.EncodeToString(braw), Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money-b64", Version: 1}}}); code(err) != 409 {
		t.Fatalf("an incompatible descriptor: %v; want 409", err)
	}
}
