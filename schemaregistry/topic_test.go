package schemaregistry_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/schemaregistry"
)

// readTopic returns the records of topic, up to its end.
func readTopic(t *testing.T, b *broker.Broker, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestTopicHoldsConfluentRecords: the topic is compacted, has one
// partition, and holds keys and values in Confluent's shapes.
func TestTopicHoldsConfluentRecords(t *testing.T) {
	b := startBroker(t, broker.Options{})
	_, cl, _ := startRegistry(t, b, schemaregistry.Config{})
	c := ctx(t)
	if _, err := cl.CreateSchema(c, "a", sr.Schema{Schema: `"string"`}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(c, "p", sr.Schema{Schema: "syntax = \"proto3\";\nmessage M { int64 id = 1; }", Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	if r := cl.SetCompatibility(c, sr.SetCompatibility{Level: sr.CompatFull}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if err := cl.DeleteSchema(c, "a", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(mustClient(t, b))
	td, err := adm.ListTopics(c, schemaregistry.DefaultTopic)
	if err != nil || len(td[schemaregistry.DefaultTopic].Partitions) != 1 {
		t.Fatalf("topic %s: %+v, %v; want 1 partition", schemaregistry.DefaultTopic, td, err)
	}
	rc, err := adm.DescribeTopicConfigs(c, schemaregistry.DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(schemaregistry.DefaultTopic, nil); err != nil || !slices.ContainsFunc(v.Configs, func(c kadm.Config) bool {
		return c.Key == "cleanup.policy" && c.MaybeValue() == "compact"
	}) {
		t.Fatalf("topic configs %+v, %v; want cleanup.policy=compact", v, err)
	}

	var got []string
	for _, r := range readTopic(t, b, schemaregistry.DefaultTopic) {
		if strings.Contains(string(r.Key), "NOOP") {
			continue
		}
		got = append(got, string(r.Key)+" "+string(r.Value))
	}
	want := []string{
		`{"keytype":"SCHEMA","subject":"a","version":1,"magic":1} {"subject":"a","version":1,"id":1,"schema":"\"string\"","deleted":false}`,
		`{"keytype":"SCHEMA","subject":"p","version":1,"magic":1} {"subject":"p","version":1,"id":2,"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";\nmessage M { int64 id = 1; }","deleted":false}`,
		`{"keytype":"CONFIG","subject":null,"magic":0} {"compatibilityLevel":"FULL"}`,
		`{"keytype":"SCHEMA","subject":"a","version":1,"magic":1} {"subject":"a","version":1,"id":1,"schema":"\"string\"","deleted":true}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("topic records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func mustClient(t *testing.T, b *broker.Broker) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestReadsATopicWrittenByConfluent: records as Confluent's registry
// writes them (a subject's level, DELETE_SUBJECT, NOOP, an unknown key
// type, a tombstone) are read at start.
func TestReadsATopicWrittenByConfluent(t *testing.T) {
	b := startBroker(t, broker.Options{})
	if err := b.CreateTopic("_confluent", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	schema := func(subject string, version, id int, text string) [2]string {
		k, _ := json.Marshal(map[string]any{"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})
		v, _ := json.Marshal(map[string]any{"subject": subject, "version": version, "id": id, "schema": text, "deleted": false})
		return [2]string{string(k), string(v)}
	}
	recs := [][2]string{
		{`{"keytype":"NOOP","magic":0}`, ""},
		schema("x", 1, 7, `"int"`),
		schema("x", 2, 9, `"long"`),
		schema("y", 1, 7, `"int"`),
		schema("y", 2, 12, `"double"`),
		{`{"keytype":"CONFIG","subject":"x","magic":0}`, `{"compatibilityLevel":"FORWARD"}`},
		{`{"keytype":"MODE","subject":null,"magic":0}`, `{"mode":"READWRITE"}`},
		{`{"keytype":"DELETE_SUBJECT","subject":"y","magic":0}`, `{"subject":"y","version":2}`},
		{`{"keytype":"SCHEMA","subject":"y","version":2,"magic":1}`, "\x00tombstone"},
	}
	cl := mustClient(t, b)
	for _, kv := range recs {
		r := &kgo.Record{Topic: "_confluent", Key: []byte(kv[0]), Value: []byte(kv[1])}
		if kv[1] == "\x00tombstone" {
			r.Value = nil
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	_, rcl, _ := startRegistry(t, b, schemaregistry.Config{Topic: "_confluent"})
	c := ctx(t)
	if v, err := rcl.SubjectVersions(c, "x"); err != nil || !slices.Equal(v, []int{1, 2}) {
		t.Fatalf("x versions = %v, %v", v, err)
	}
	if r := rcl.Compatibility(c, "x"); r[0].Level != sr.CompatForward {
		t.Fatalf("x level = %+v", r[0])
	}
	if _, err := rcl.SubjectVersions(c, "y"); code(err) != 40401 {
		t.Fatalf("y after DELETE_SUBJECT: %v; want 40401", err)
	}
	if v, err := rcl.SubjectVersions(sr.WithParams(c, sr.ShowDeleted), "y"); err != nil || !slices.Equal(v, []int{1}) {
		t.Fatalf("y with deleted = %v, %v; want [1] (2 was permanently deleted)", v, err)
	}
	if _, err := rcl.SchemaByID(c, 12); code(err) != 40403 {
		t.Fatalf("id 12 after its only version's tombstone: %v; want 40403", err)
	}
	id, err := rcl.RegisterSchema(c, "z", sr.Schema{Schema: `"string"`}, -1, -1)
	if err != nil || id != 13 {
		t.Fatalf("a new schema = %d, %v; want 13 (one past the highest id read)", id, err)
	}
}

func TestRefusesATopicOfSeveralPartitions(t *testing.T) {
	b := startBroker(t, broker.Options{})
	if err := b.CreateTopic("_many", 3, nil); err != nil {
		t.Fatal(err)
	}
	_, err := schemaregistry.Start(ctx(t), schemaregistry.Config{Brokers: b.Addrs(), Topic: "_many"})
	if err == nil || !strings.Contains(err.Error(), "has 3 partitions; want 1") {
		t.Fatalf("Start on a 3-partition topic: %v", err)
	}
	if _, err := schemaregistry.Start(ctx(t), schemaregistry.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Brokers is empty") {
		t.Fatalf("Start without brokers: %v", err)
	}
}
