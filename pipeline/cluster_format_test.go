package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
	"github.com/weirproject/weir/internal/srtest"
	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/watermark"
)

// clusteredAvroYAML is clusteredYAML's shape in Avro: Avro values and keys
// (the user) from the source, window totals written as Avro with the user
// as an Avro key, the source's dead letters as JSON.
const clusteredAvroYAML = `name: avro-counts
job:
  checkpoint:
    interval: 100ms
    dir: ${CKPT}
kafka:
  brokers: ["${BROKERS}"]
  schemaRegistry: {url: "${REGISTRY}"}
source:
  kafka:
    topics: [events]
    bounded: true
    format: {avro: {}}
    keyFormat: {avro: {}}
    keyField: user
  timestamp: time
  watermark:
    outOfOrderness: 1s
  deadLetters: bad
steps:
  - keyBy: user
  - window:
      tumbling: 10s
      aggregate:
        n: count
        cents: sum(amount)
sink:
  kafka:
    topic: "${OUT}"
    delivery: exactly-once
    key: user
    keyFormat: {avro: {schema: key.avsc, autoRegister: true}}
    format: {avro: {schema: count.avsc, autoRegister: true}}
outputs:
  bad:
    kafka: {topic: "${OUT}-bad", delivery: exactly-once}
`

// TestClusterAvroEqualsLocalRun: the Avro pipeline run in group mode by two
// members commits the same records, key and value, as when run by Run
// (records decoded with the registry's schemas and compared field by
// field), and the same dead letters: the source's, and the sink's (totals
// its Avro schema cannot hold), which do not fail either job.
func TestClusterAvroEqualsLocalRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	br, err := broker.Start(broker.Options{Topics: map[string]int32{"events": 3,
		"local": 2, "local-bad": 1, "clustered": 2, "clustered-bad": 1},
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	reg := srtest.StartOn(t, br, nil)
	brokers := br.Addrs()
	cl, err := format.NewClient(format.RegistryConfig{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}

	// Events over 3 partitions, timestamps rising per partition.
	keys, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "events-key", Schema: `"string"`, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	values, err := avro.NewEncoder(ctx, avro.Options{Registry: cl, Subject: "events-value", AutoRegister: true,
		Schema: `{"type":"record","name":"Event","fields":[{"name":"amount","type":"long"},
		 {"name":"time","type":{"type":"long","logicalType":"timestamp-millis"}}]}`})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	base := int64(1_767_225_600_000)
	var recs []*kgo.Record
	const n, partitions = 2000, 3
	for i := range n {
		k, _ := keys.AppendValue(nil, fmt.Sprintf("u%02d", rng.IntN(20)))
		v, err := values.AppendRecord(nil, map[string]any{"amount": float64(rng.IntN(1000)),
			"time": float64(base + int64(i/partitions)*37 + rng.Int64N(400))})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % partitions), Key: k, Value: v})
	}
	for i := range 3 { // not the wire format: dead letters
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i), Value: []byte(fmt.Sprintf(`{"bad":%d}`, i))})
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "key.avsc"), []byte(`"string"`), 0o644)
	// The user an enum without u19: u19's totals are the sink's dead letters.
	var symbols []string
	for i := range 19 {
		symbols = append(symbols, fmt.Sprintf("%q", fmt.Sprintf("u%02d", i)))
	}
	os.WriteFile(filepath.Join(dir, "count.avsc"), []byte(`{"type":"record","name":"Count","fields":[
 {"name":"user","type":{"type":"enum","name":"User","symbols":[`+strings.Join(symbols, ",")+`]}},
 {"name":"n","type":"long"},{"name":"cents","type":"long"},
 {"name":"windowEnd","type":{"type":"long","logicalType":"timestamp-millis"}}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(clusteredAvroYAML), 0o644)
	t.Setenv("BROKERS", brokers[0])
	t.Setenv("REGISTRY", reg.URL)
	parseWith := func(out string) *pipeline.Spec {
		t.Setenv("OUT", out)
		t.Setenv("CKPT", t.TempDir())
		s, err := pipeline.ParseFile(filepath.Join(dir, "p.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	ls, err := pipeline.Run(ctx, parseWith("local"), pipeline.Options{Logger: quietLog}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := parseWith("clustered")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	sums := make([]pipeline.Summary, 2)
	logs := make([]strings.Builder, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = pipeline.RunCluster(ctx, spec, pipeline.ClusterOptions{Group: "avro-counts", KeyedTasks: 2,
				Member: fmt.Sprintf("m%d", i), SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: quietLog}, &logs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v\n%s", i, err, logs[i].String())
		}
	}

	dec, err := avro.NewDecoder(avro.Options{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	want, got := committedAvro(t, brokers, "local", dec), committedAvro(t, brokers, "clustered", dec)
	if len(want) < 50 || !maps.Equal(want, got) {
		t.Fatalf("clustered totals differ from the local run's:\n got %d distinct %v\nwant %d distinct %v", len(got), got, len(want), want)
	}
	// The source's dead letters (3) and the sink's (u19's totals, which
	// name the topic, here made the local run's).
	wantBad, gotBad := committedRecords(t, brokers, "local-bad"), map[string]int{}
	for r, n := range committedRecords(t, brokers, "clustered-bad") {
		gotBad[strings.ReplaceAll(r, "clustered", "local")] += n
	}
	sinkBad := 0
	for r, n := range wantBad {
		if strings.Contains(r, `"sink":"sink"`) {
			sinkBad += n
			if !strings.Contains(r, `u19`) || !strings.Contains(r, "(topic local): avro: schema id") {
				t.Errorf("sink dead letter %s; want u19's total and the reason", r)
			}
		}
	}
	if len(wantBad) < 4 || sinkBad == 0 || !maps.Equal(wantBad, gotBad) {
		t.Fatalf("dead letters: clustered %v; local %v; want the same: 3 of the source, some of the sink", gotBad, wantBad)
	}
	// Counted: exactly in the local run; in group mode at least as often
	// (a task handed over replays from its checkpoint).
	if ls.DeadLetters != int64(sinkBad) || sums[0].DeadLetters+sums[1].DeadLetters < int64(sinkBad) {
		t.Errorf("sink dead letters counted: local %d, members %d + %d; want %d", ls.DeadLetters, sums[0].DeadLetters, sums[1].DeadLetters, sinkBad)
	}
	t.Logf("%d window totals and %d dead letters (%d of the sink), the same in both runs", len(want), len(wantBad), sinkBad)
}

// committedAvro reads every committed record of topic as "key value" with
// both decoded by dec (the value's JSON keys sorted), and counts each.
func committedAvro(t *testing.T, brokers []string, topic string, dec *avro.Decoder) map[string]int {
	t.Helper()
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quietLog})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.WithMetadata(kafka.Bytes()))
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[kafka.Message[[]byte]]()))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range got.Values() {
		k, err := dec.Value(m.Key)
		if err != nil {
			t.Fatalf("%s: key: %v", topic, err)
		}
		v, err := dec.Record(m.Value)
		if err != nil {
			t.Fatalf("%s: value: %v", topic, err)
		}
		if k != v["user"] {
			t.Fatalf("%s: key %v, value %v: want the user as key", topic, k, v)
		}
		b, _ := json.Marshal(v)
		out[fmt.Sprint(k)+" "+string(b)]++
	}
	return out
}
