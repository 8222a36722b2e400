package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
	"github.com/weirproject/weir/internal/srtest"
	"github.com/weirproject/weir/pipeline"
)

// readTopic reads the first n records of topic.
func readTopic(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []*kgo.Record
	for len(out) < n {
		c.PollFetches(context.Background()).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestKeyFormats: Avro keys (a string schema, subject orders-key) beside
// Avro values that lack the customer: source.kafka.keyFormat decodes each
// key into the field keyField names, which the pipeline keys by; a record
// whose key is not in the wire format is a dead letter saying so. The sink
// writes the customer as an Avro key (keyFormat, subject counts-key
// registered) beside a JSON value.
func TestKeyFormats(t *testing.T) {
	ctx := context.Background()
	reg := srtest.Start(t, map[string]int32{"orders": 2, "counts": 1}, nil)
	br := reg.Broker
	cl, err := format.NewClient(format.RegistryConfig{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "orders-key", Schema: `"string"`, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	values, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "orders-value", AutoRegister: true,
		Schema: `{"type":"record","name":"Order","fields":[{"name":"cents","type":"long"},
		 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`})
	if err != nil {
		t.Fatal(err)
	}
	customers := []string{"ann", "bob", "cy"}
	var recs []*kgo.Record
	for i := range 90 {
		k, err := keys.AppendValue(nil, customers[i%3])
		if err != nil {
			t.Fatal(err)
		}
		v, err := values.AppendRecord(nil, map[string]any{"cents": float64(i), "at": float64(1_700_000_000_000 + i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Key: k, Value: v})
	}
	good, _ := values.AppendRecord(nil, map[string]any{"cents": float64(1), "at": float64(1_700_000_000_000)})
	recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte("ann"), Value: good})
	prod, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "key.avsc"), []byte(`"string"`), 0o644)
	src := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s}
source:
  kafka:
    topics: [orders]
    bounded: true
    format: {avro: {}}
    keyFormat: {avro: {}}
    keyField: customer
  timestamp: at
  deadLetters: bad
steps:
  - keyBy: customer
  - window: {tumbling: 1h, aggregate: {orders: count, cents: sum(cents)}}
sink:
  kafka:
    topic: counts
    key: customer
    keyFormat: {avro: {schema: key.avsc, autoRegister: true}}
outputs:
  bad:
    file: {path: bad.jsonl}
`, br.Addrs()[0], reg.URL)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644)
	spec, err := pipeline.ParseFile(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := pipeline.Run(ctx, spec, pipeline.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.SourceRecords != 90 || sum.SourceDeadLetters != 1 {
		t.Fatalf("summary %+v; want 90 records and 1 dead letter", sum)
	}
	bad := readLines(t, filepath.Join(dir, "bad.jsonl"))
	if len(bad) != 1 || !strings.Contains(bad[0]["reason"].(string), "key: format: first byte is not the magic byte") {
		t.Fatalf("dead letters %v; want the record whose key is not in the wire format", bad)
	}

	kd, err := avro.NewDecoder(avro.Options{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range readTopic(t, br.Addrs(), "counts", 3) {
		k, err := kd.Value(r.Key)
		if err != nil {
			t.Fatalf("key %q: %v", r.Key, err)
		}
		var v map[string]any
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if k != v["customer"] || v["orders"] != float64(30) {
			t.Errorf("record key %v value %v; want the customer as key, 30 orders", k, v)
		}
		got = append(got, k.(string))
	}
	if slices.Sort(got); !slices.Equal(got, customers) {
		t.Errorf("keys %v; want %v", got, customers)
	}
	if s, err := cl.SchemaByVersion(ctx, "counts-key", -1); err != nil || s.Schema.Schema != `"string"` {
		t.Errorf("subject counts-key: %+v, %v; want the key schema registered", s, err)
	}
}

// TestKafkaSinkDeadLetters: the three formats' sinks (JSON Schema with
// validate, Avro, Protobuf) each fed records some of which they cannot
// write: those become dead letters of the sink on the source's
// deadLetters output, with the reason, counted; the job goes on and the
// other records are written. Without a dead-letter output they are
// dropped and counted as such.
func TestKafkaSinkDeadLetters(t *testing.T) {
	ctx := context.Background()
	reg := srtest.Start(t, map[string]int32{"in": 1, "js-out": 1, "avro-out": 1, "pb-out": 1}, nil)
	br := reg.Broker
	prod, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for _, v := range []string{
		`{"customer":"ann","orders":3}`, // every format writes it
		`{"customer":"bob","orders":0}`, // below the JSON schema's minimum
		`{"customer":"cy"}`,             // no orders: JSON Schema requires it, Avro has no default
		`{"customer":5,"orders":1}`,     // a number for a string: none writes it
	} {
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "count.schema.json"), []byte(`{"type":"object","required":["customer","orders"],
 "properties":{"customer":{"type":"string"},"orders":{"type":"integer","minimum":1}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "count.avsc"), []byte(`{"type":"record","name":"Count","fields":[
 {"name":"customer","type":"string"},{"name":"orders","type":"long"}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "count.proto"), []byte(`syntax = "proto3";
package shop;
message Count { string customer = 1; int64 orders = 2; }`), 0o644)
	yaml := func(deadLetters bool) string {
		s := fmt.Sprintf(`kafka:
  brokers: [%s]
  schemaRegistry: {url: %s}
source:
  kafka: {topics: [in], bounded: true}
steps:
  - tee: av
  - tee: pb
sink:
  kafka: {topic: js-out, format: {jsonSchema: {schema: count.schema.json, autoRegister: true, validate: true}}}
outputs:
  av:
    kafka: {topic: avro-out, format: {avro: {schema: count.avsc, autoRegister: true}}}
  pb:
    kafka: {topic: pb-out, format: {protobuf: {schema: count.proto, autoRegister: true, message: shop.Count}}}
`, br.Addrs()[0], reg.URL)
		if deadLetters {
			s = strings.Replace(s, "bounded: true}\n", "bounded: true}\n  deadLetters: bad\n", 1) + "  bad:\n    file: {path: bad.jsonl}\n"
		}
		return s
	}
	run := func(deadLetters bool) pipeline.Summary {
		p := filepath.Join(dir, fmt.Sprintf("p-%v.yaml", deadLetters))
		os.WriteFile(p, []byte(yaml(deadLetters)), 0o644)
		spec, err := pipeline.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := pipeline.Run(ctx, spec, pipeline.Options{}, nil)
		if err != nil {
			t.Fatalf("the job failed: %v; want the records its sinks cannot write as dead letters", err)
		}
		return sum
	}

	sum := run(true)
	if sum.DeadLetters != 6 || sum.DeadLettersDropped != 0 || sum.Dropped != 0 {
		t.Errorf("summary %+v; want 6 dead letters (3 JSON Schema, 2 Avro, 1 Protobuf), none dropped", sum)
	}
	if want := map[string]int64{"sink": 1, "av": 2, "pb": 3}; sum.Outputs["sink"] != want["sink"] || sum.Outputs["av"] != want["av"] || sum.Outputs["pb"] != want["pb"] {
		t.Errorf("outputs %v; want %v written", sum.Outputs, want)
	}
	perSink := map[string]int{}
	for _, d := range readLines(t, filepath.Join(dir, "bad.jsonl")) {
		sink, reason := d["sink"].(string), d["reason"].(string)
		perSink[sink]++
		v, _ := d["value"].(map[string]any)
		if v["customer"] == nil || !strings.HasPrefix(reason, "sink "+sink+" (topic ") {
			t.Errorf("dead letter %v; want the record and a reason naming the sink and topic", d)
		}
		switch {
		case sink == "sink" && !strings.Contains(reason, "value does not validate against its JSON schema"),
			sink == "output-av" && !strings.Contains(reason, "avro: schema id"),
			sink == "output-pb" && !strings.Contains(reason, "customer: got float64; want a string"):
			t.Errorf("dead letter of %s: reason %q", sink, reason)
		}
	}
	if want := map[string]int{"sink": 3, "output-av": 2, "output-pb": 1}; fmt.Sprint(perSink) != fmt.Sprint(want) {
		t.Errorf("dead letters per sink %v; want %v", perSink, want)
	}
	readTopic(t, br.Addrs(), "js-out", 1)
	readTopic(t, br.Addrs(), "avro-out", 2)
	readTopic(t, br.Addrs(), "pb-out", 3)

	sum = run(false)
	if sum.DeadLetters != 6 || sum.DeadLettersDropped != 6 || sum.Dropped != 6 {
		t.Errorf("summary without deadLetters %+v; want 6 dead letters, all dropped and counted", sum)
	}
}
