package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
	"github.com/weirproject/weir/format/jsonschema"
	"github.com/weirproject/weir/format/protobuf"
	"github.com/weirproject/weir/internal/srtest"
	"github.com/weirproject/weir/pipeline"
)

const ordersAvsc = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"customer","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

// TestAvroKeyedCount: Avro records (a decimal and a timestamp-millis used
// as the event time) from the broker, with the writers' schemas in a
// registry, counted per customer in event-time windows; an unknown schema
// id, a corrupt payload and a JSON record (wrong magic byte) become dead
// letters naming what is wrong, and the job goes on. The registry sees a
// handful of requests, not one per record (R1).
//
// The registry is the embedded one (package schemaregistry).
func TestAvroKeyedCount(t *testing.T) {
	ctx := context.Background()
	reg := srtest.Start(t, map[string]int32{"orders": 2}, nil)
	hits, br := &reg.Requests, reg.Broker

	cl, err := format.NewClient(format.RegistryConfig{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "orders-value", Schema: ordersAvsc, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 600
	customers := []string{"ann", "bob", "cy"}
	var recs []*kgo.Record
	for i := range n {
		b, err := enc.AppendRecord(nil, map[string]any{"customer": customers[i%3], "amount": "12.50", "at": float64(1_700_000_000_000 + i*100)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Value: b})
	}
	recs = append(recs,
		&kgo.Record{Value: format.AppendHeader(nil, 4242)},
		&kgo.Record{Value: append(format.AppendHeader(nil, enc.ID()), 0x7f)},
		&kgo.Record{Value: []byte(`{"customer":"ann"}`)})
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "order.avsc"), []byte(ordersAvsc), 0o644)
	src := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s}
source:
  kafka:
    topics: [orders]
    bounded: true
    format: {avro: {schema: order.avsc}}
  timestamp: at
  deadLetters: bad
steps:
  - keyBy: customer
  - window:
      tumbling: 1h
      aggregate: {orders: count}
sink:
  file: {path: %s}
outputs:
  bad:
    file: {path: %s}
`, br.Addrs()[0], reg.URL, filepath.Join(dir, "counts.jsonl"), filepath.Join(dir, "bad.jsonl"))
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644)
	spec, err := pipeline.ParseFile(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	before := hits.Load()
	sum, err := pipeline.Run(ctx, spec, pipeline.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.SourceRecords != n || sum.SourceDeadLetters != 3 {
		t.Fatalf("summary %+v; want %d records and 3 dead letters", sum, n)
	}
	counts := map[string]float64{}
	for _, r := range readLines(t, filepath.Join(dir, "counts.jsonl")) {
		counts[r["customer"].(string)] += r["orders"].(float64)
	}
	for _, c := range customers {
		if counts[c] != n/3 {
			t.Errorf("count of %s = %v; want %d (all %v)", c, counts[c], n/3, counts)
		}
	}
	var reasons []string
	for _, r := range readLines(t, filepath.Join(dir, "bad.jsonl")) {
		reasons = append(reasons, r["reason"].(string))
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"schema id 4242: schema id unknown", fmt.Sprintf("schema id %d: payload does not decode", enc.ID()), "not the magic byte"} {
		if !strings.Contains(all, want) {
			t.Errorf("dead letters:\n%s\nwant one saying %q", all, want)
		}
	}
	if got := hits.Load() - before; got > 10 {
		t.Errorf("%d registry requests for %d records; want a handful (ids cached)", got, n+3)
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestRegistryDownAtBuild: a registry that does not answer fails the job
// when it is built, with the URL in the error (R3).
func TestRegistryDownAtBuild(t *testing.T) {
	br, err := broker.Start(broker.Options{Topics: map[string]int32{"orders": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	src := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: "http://127.0.0.1:1"}
source:
  kafka: {topics: [orders], format: {avro: {}}}
sink:
  stdout: {}
`, br.Addrs()[0])
	spec, err := pipeline.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = pipeline.Build(ctx, spec, pipeline.Options{})
	if err == nil || !strings.Contains(err.Error(), "schema registry http://127.0.0.1:1 does not answer") {
		t.Fatalf("Build: %v; want the registry named as not answering", err)
	}
}

// TestFormatParseErrors: each mistake in a format or registry key is one
// line naming it and what is accepted; a literal password is refused
// without being repeated.
func TestFormatParseErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`kafka: {brokers: ["h:1"]}
source: {kafka: {topics: [a], format: {avro: {}}}}
sink: {stdout: {}}`, `f.yaml:2:31: source.kafka.format: avro needs kafka.schemaRegistry`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: {url: "http://r:8081", basicAuth: {user: u, password: hunter2}}}
source: {kafka: {topics: [a]}}
sink: {stdout: {}}`, `kafka.schemaRegistry.basicAuth.password: a literal secret is refused`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "r:8081"}
source: {kafka: {topics: [a]}}
sink: {stdout: {}}`, `want http://host:port`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "http://r:8081"}
source: {kafka: {topics: [a], format: xml}}
sink: {stdout: {}}`, `source.kafka.format: "xml": want json, or one of {avro: {...}}`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "http://r:8081"}
source: {kafka: {topics: [a], format: {avro: {autoRegister: true}}}}
sink: {stdout: {}}`, `source.kafka.format.avro: unknown key "autoRegister"`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "http://r:8081"}
source: {kafka: {topics: [a]}}
sink: {kafka: {topic: b, format: {avro: {autoRegister: true}}}}`, `sink.kafka.format.avro: autoRegister needs schema`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "http://r:8081"}
source: {kafka: {topics: [a]}}
sink: {kafka: {topic: b, keyFormat: {avro: {}}}}`, `f.yaml:3:26: sink.kafka.keyFormat: needs key, the field whose value is written as the record key`},
		{`kafka: {brokers: ["h:1"], schemaRegistry: "http://r:8081"}
source: {kafka: {topics: [a], keyField: k}}
sink: {stdout: {}}`, `source.kafka.keyField: needs keyFormat`},
		{`kafka: {brokers: ["h:1"]}
source: {kafka: {topics: [a], keyFormat: {protobuf: {}}}}
sink: {stdout: {}}`, `source.kafka.keyFormat: protobuf needs kafka.schemaRegistry`},
	} {
		_, err := pipeline.Parse("f.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Parse:\n%s\nerror %v; want %q (and no secret)", c.src, err, c.want)
		}
	}
}

// TestProtobufToAvroAndJSONSchema: Protobuf records (a Timestamp as the
// event time) counted per customer and written as Avro (the schema
// auto-registered) to one topic and as validated JSON Schema records to
// another; both read back. A JSON Schema source that validates sends an
// invalid record to its dead letters.
func TestProtobufToAvroAndJSONSchema(t *testing.T) {
	ctx := context.Background()
	reg := srtest.Start(t, map[string]int32{"pb": 1, "avro-out": 1, "js-out": 1}, nil)
	br := reg.Broker
	cl, _ := format.NewClient(format.RegistryConfig{URL: reg.URL})
	const proto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order { string customer = 1; int64 cents = 2; google.protobuf.Timestamp at = 3; }`
	enc, err := protobuf.NewEncoder(ctx, protobuf.Options{Registry: cl, Subject: "pb-value", Schema: proto, AutoRegister: true, Message: "shop.Order"})
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("pb"))
	defer prod.Close()
	var recs []*kgo.Record
	for i := range 30 {
		b, err := enc.AppendRecord(nil, map[string]any{"customer": []string{"ann", "bob"}[i%2], "cents": float64(i), "at": float64(1_700_000_000_000 + i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Value: b})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "count.avsc"), []byte(`{"type":"record","name":"Count","fields":[
 {"name":"customer","type":"string"},{"name":"orders","type":"long"},
 {"name":"windowEnd","type":{"type":"long","logicalType":"timestamp-millis"}}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "count.schema.json"), []byte(`{"type":"object","required":["customer","orders"],
 "properties":{"orders":{"type":"integer","minimum":1}}}`), 0o644)
	src := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s}
source:
  kafka: {topics: [pb], bounded: true, format: {protobuf: {}}}
  timestamp: at
steps:
  - keyBy: customer
  - window: {tumbling: 1h, aggregate: {orders: count}}
  - tee: js
sink:
  kafka: {topic: avro-out, format: {avro: {schema: count.avsc, autoRegister: true}}}
outputs:
  js:
    kafka: {topic: js-out, format: {jsonSchema: {schema: count.schema.json, autoRegister: true, validate: true}}}
`, br.Addrs()[0], reg.URL)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644)
	spec, err := pipeline.ParseFile(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(ctx, spec, pipeline.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	read := func(topic string) []*kgo.Record {
		c, _ := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer c.Close()
		var out []*kgo.Record
		for len(out) < 2 {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		return out
	}
	ad, _ := avro.NewDecoder(avro.Options{Registry: cl})
	got := map[string]any{}
	for _, r := range read("avro-out") {
		m, err := ad.Record(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[m["customer"].(string)] = m["orders"]
	}
	if got["ann"] != float64(15) || got["bob"] != float64(15) {
		t.Fatalf("avro counts %v; want 15 each", got)
	}
	jd, _ := jsonschema.NewDecoder(jsonschema.Options{Registry: cl, Validate: true})
	for _, r := range read("js-out") {
		var m map[string]any
		if err := jd.Decode(r.Value, &m); err != nil || m["orders"] != float64(15) {
			t.Fatalf("json schema record %v %v", m, err)
		}
	}

	// A validating JSON Schema source: the invalid record is a dead letter.
	bad := append(format.AppendHeader(nil, 0), `{"customer":"cy","orders":0}`...)
	first := read("js-out")[0].Value
	copy(bad[1:5], first[1:5]) // the schema id the sink registered
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "js-out", Value: bad}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src2 := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s}
source:
  kafka: {topics: [js-out], bounded: true, format: {jsonSchema: {validate: true}}}
  deadLetters: bad
sink:
  file: {path: %s}
outputs:
  bad:
    file: {path: %s}
`, br.Addrs()[0], reg.URL, filepath.Join(dir, "ok.jsonl"), filepath.Join(dir, "bad.jsonl"))
	spec2, err := pipeline.Parse(filepath.Join(dir, "p2.yaml"), []byte(src2))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := pipeline.Run(ctx, spec2, pipeline.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.SourceRecords != 2 || sum.SourceDeadLetters != 1 {
		t.Fatalf("summary %+v; want 2 records and 1 dead letter", sum)
	}
	if b := readLines(t, filepath.Join(dir, "bad.jsonl")); len(b) != 1 || !strings.Contains(b[0]["reason"].(string), "does not validate") {
		t.Fatalf("dead letters %v", b)
	}
}

// TestRegistryDownWhileRunning: the registry answers at build, then stops
// answering before the first record's schema is fetched: the source
// retries until kafka.schemaRegistry.retryLimit, then the job fails
// (naming the registry) instead of dropping the record (R2).
func TestRegistryDownWhileRunning(t *testing.T) {
	ctx := context.Background()
	reg := srtest.Start(t, map[string]int32{"orders": 1}, nil)
	cl, _ := format.NewClient(format.RegistryConfig{URL: reg.URL})
	enc, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "orders-value", Schema: ordersAvsc, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := enc.AppendRecord(nil, map[string]any{"customer": "ann", "amount": "1.00", "at": float64(1)})
	prod, _ := kgo.NewClient(kgo.SeedBrokers(reg.Broker.Addrs()...), kgo.DefaultProduceTopic("orders"))
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: b}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s, retryLimit: 500ms}
source:
  kafka: {topics: [orders], bounded: true, format: {avro: {}}}
  deadLetters: bad
sink:
  stdout: {}
outputs:
  bad:
    stdout: {}
`, reg.Broker.Addrs()[0], reg.URL)
	spec, err := pipeline.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j, err := pipeline.Build(ctx, spec, pipeline.Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	reg.Down.Store(1 << 30)
	rj, err := j.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = rj.Wait()
	if !errors.Is(err, format.ErrUnavailable) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("job ended with %v; want it failed with ErrUnavailable naming the record", err)
	}
	if n := reg.Requests.Load(); n < 3 {
		t.Fatalf("%d registry requests; want the fetch retried", n)
	}
}
