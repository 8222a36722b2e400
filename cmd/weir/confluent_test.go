package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/npmtools"
)

// confluentPackages are the npm packages (and versions) of the
// independent clients; .ci/install-npm-tools installs the same.
// @confluentinc/kafka-javascript (librdkafka) is not among them: its
// install downloads a prebuilt binary or librdkafka's dependencies from
// outside the npm registry, which this project's machines cannot reach;
// kafkajs (with kafkajs-snappy for weir's snappy batches) is the Kafka
// client, Confluent's serializers are Confluent's own.
var confluentPackages = []string{"@confluentinc/schemaregistry@1.10.1", "kafkajs@2.2.4", "kafkajs-snappy@1.1.0"}

// confluentClients returns node and the node_modules directory holding
// confluentPackages (internal/npmtools installs them when missing), or
// skips the test saying why.
func confluentClients(t *testing.T) (node, modules string) {
	t.Helper()
	return npmtools.Require(t, "Confluent's npm clients", confluentPackages...)
}

// TestConfluentClientsRoundTrip: Confluent's own serializers
// (@confluentinc/schemaregistry's AvroSerializer, ProtobufSerializer,
// JsonSerializer) produce over SASL_SSL (SCRAM-SHA-512, the broker's CA)
// into `weir broker` and its embedded registry (HTTPS, basic auth); four
// `weir run` pipelines (testdata/confluent/*.yaml) read each format,
// compute and write back in the same format; Confluent's deserializers read
// weir's output, and every record is compared field by field with what
// the input makes: Avro decimals, dates, uuids and timestamp-millis (the
// event time of the windows), a v2 writer read by a v1-reader job (note
// skipped: the output's default "dropped") and a v1 writer read by a
// v2-reader job (note's default "none"), Protobuf int64, enums, repeated
// fields and google.protobuf.Timestamp, JSON Schema validated both ways.
func TestConfluentClientsRoundTrip(t *testing.T) {
	node, modules := confluentClients(t)
	testdata, err := filepath.Abs(filepath.Join("testdata", "confluent"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	const password = "Interop-Pw-7"
	addr, url, _ := startBrokerChildAddrs(t, "--tls-self-signed", ca, "--sasl-user", "SCRAM-SHA-512:weir:"+password,
		"--topic", "avro-in:2", "--topic", "proto-in:2", "--topic", "json-in:2",
		"--topic", "avro-mapped", "--topic", "avro-windows", "--topic", "proto-out", "--topic", "json-out")
	cfg, err := json.Marshal(map[string]string{"brokers": addr, "ca": ca, "user": "weir", "password": password, "registry": url})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runNode := func(script string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(testdata, script), cfgFile}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
		}
		return out
	}

	out := runNode("produce.js", filepath.Join(testdata, "input.json"))
	t.Logf("Confluent's serializers registered schema ids %s", bytes.TrimSpace(out))

	// The four pipelines, as a user runs them.
	env := []string{"WEIR_INTEROP_BROKERS=" + addr, "WEIR_INTEROP_CA=" + ca, "WEIR_INTEROP_REGISTRY=" + url, "WEIR_INTEROP_PASSWORD=" + password}
	var wg sync.WaitGroup
	for _, job := range []string{"avro-mapped", "avro-windows", "proto-mapped", "json-totals"} {
		wg.Go(func() {
			cmd := weirCmd(t, "run", filepath.Join(testdata, job+".yaml"))
			cmd.Env = append(cmd.Env, env...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("weir run %s.yaml: %v\n%s", job, err, out)
				return
			}
			if !noDeadLetters.Match(out) || strings.Contains(string(out), password) {
				t.Errorf("weir run %s.yaml: want no dead letters and no password in the output:\n%s", job, out)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	want := confluentExpected(t, filepath.Join(testdata, "input.json"))
	var args []string
	formats := map[string]string{"avro-mapped": "avro", "avro-windows": "avro", "proto-out": "protobuf", "json-out": "json"}
	for _, topic := range slices.Sorted(maps.Keys(want)) {
		args = append(args, fmt.Sprintf("%s=%s:%d", topic, formats[topic], len(want[topic])))
	}
	got := map[string][]string{}
	for line := range strings.Lines(string(runNode("consume.js", args...))) {
		var r struct {
			Topic, Key string
			Value      map[string]any
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume.js printed %q: %v", line, err)
		}
		got[r.Topic] = append(got[r.Topic], canonical(t, r.Key, r.Value))
	}
	for topic, records := range want {
		var w []string
		for _, r := range records {
			w = append(w, canonical(t, r.key, r.value))
		}
		slices.Sort(w)
		slices.Sort(got[topic])
		if !slices.Equal(got[topic], w) {
			t.Errorf("%s: Confluent's deserializers read\n  %s\nwant\n  %s", topic, strings.Join(got[topic], "\n  "), strings.Join(w, "\n  "))
		}
	}
}

// noDeadLetters is the summary line of a run whose dead-letter output
// (bad) received nothing.
var noDeadLetters = regexp.MustCompile(`(?m)^\s+bad\s+0 records`)

type keyed struct {
	key   string
	value map[string]any
}

// canonical is a record as one JSON line with sorted keys.
func canonical(t *testing.T, key string, value map[string]any) string {
	b, err := json.Marshal(map[string]any{"key": key, "value": value})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// confluentExpected computes, from input.json, what each output topic
// must hold, the way the four pipelines define it.
func confluentExpected(t *testing.T, inputFile string) map[string][]keyed {
	t.Helper()
	raw, err := os.ReadFile(inputFile)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Orders []struct {
			ID, Qty, Writer            float64
			Customer, Amount, Day, UID string
			Time                       float64
			Note                       *string
		}
		Readings []struct {
			Sensor, Kind string
			Value        float64
			Count, At    int64
			Tags         []string
		}
		Payments []struct {
			Account    string
			Amount, Ts float64
			Currency   string
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	want := map[string][]keyed{}
	const minute, hour = 60_000, 3_600_000

	// avro-mapped: the v1 reader skips v2's note; the output schema's
	// default fills it.
	type window struct {
		key   string
		start float64
	}
	type agg struct {
		n, qty float64
		amount *big.Rat
		note   string
	}
	windows := map[window]*agg{}
	var order []window
	for _, o := range in.Orders {
		want["avro-mapped"] = append(want["avro-mapped"], keyed{o.Customer, map[string]any{
			"id": o.ID, "customer": o.Customer, "qty": o.Qty, "amount": o.Amount, "day": o.Day, "uid": o.UID, "time": o.Time,
			"qty2": 2 * o.Qty, "amountText": o.Amount, "dayText": o.Day, "note": "dropped"}})
		// avro-windows: the v2 reader gives v1's records note's default.
		w := window{o.Customer, o.Time - float64(int64(o.Time)%minute)}
		a := windows[w]
		if a == nil {
			a = &agg{amount: new(big.Rat)}
			windows[w] = a
			order = append(order, w)
		}
		amount, ok := new(big.Rat).SetString(o.Amount)
		if !ok {
			t.Fatalf("amount %q", o.Amount)
		}
		a.n++
		a.qty += o.Qty
		a.amount.Add(a.amount, amount)
		a.note = "none"
		if o.Writer == 2 && o.Note != nil {
			a.note = *o.Note
		}
	}
	for _, w := range order {
		a := windows[w]
		want["avro-windows"] = append(want["avro-windows"], keyed{w.key, map[string]any{
			"customer": w.key, "windowStart": w.start, "windowEnd": w.start + minute,
			"orders": a.n, "qty": a.qty, "amount": a.amount.FloatString(2), "note": a.note}})
	}

	kinds := map[string]float64{"TEMPERATURE": 1, "HUMIDITY": 2}
	for _, r := range in.Readings {
		tags := []any{}
		for _, tag := range r.Tags {
			tags = append(tags, tag)
		}
		want["proto-out"] = append(want["proto-out"], keyed{r.Sensor, map[string]any{
			"sensor": r.Sensor, "value": r.Value, "count": fmt.Sprint(r.Count), "kind": kinds[r.Kind], "tags": tags,
			"value10": r.Value * 10, "label": r.Sensor + "/" + r.Kind, "at": float64(r.At)}})
	}

	type total struct{ sum, n float64 }
	totals := map[window]*total{}
	order = nil
	for _, p := range in.Payments {
		w := window{p.Account, p.Ts - float64(int64(p.Ts)%hour)}
		if totals[w] == nil {
			totals[w] = &total{}
			order = append(order, w)
		}
		totals[w].sum += p.Amount
		totals[w].n++
	}
	for _, w := range order {
		want["json-out"] = append(want["json-out"], keyed{w.key, map[string]any{
			"account": w.key, "windowStart": w.start, "windowEnd": w.start + hour, "total": totals[w].sum, "n": totals[w].n}})
	}
	return want
}
