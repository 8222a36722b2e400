package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The seed's result, small: under the end-offset policy nothing is out of
// order; under time-outs, partitions that start late lose their history to
// lateness.
func TestExperimentSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var buf bytes.Buffer
	res, err := Run(ctx, Config{Topics: 4, Partitions: 2, Items: 50, HistoryRecords: 4000,
		Stagger: 1200 * time.Millisecond, Timeout: 100 * time.Millisecond,
		Live: 400 * time.Millisecond, LiveRate: 500}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3", len(res))
	}
	dec := json.NewDecoder(&buf)
	for _, want := range res {
		var got map[string]any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("output line for %s: %v", want.Policy, err)
		}
		for _, k := range []string{"policy", "records", "outOfOrder", "outOfOrderFraction", "releaseLatencyMs", "historyEventsPerSec",
			"rawEventsPerSec", "historyVsRaw"} {
			if _, ok := got[k]; !ok {
				t.Fatalf("output %v lacks %q", got, k)
			}
		}
	}
	timeouts := int64(0)
	for _, r := range res {
		t.Logf("%+v", r)
		if r.HistoryRecords == 0 || r.LiveRecords == 0 || r.Records != r.HistoryRecords+r.LiveRecords {
			t.Fatalf("%s: counts %+v", r.Policy, r)
		}
		if r.HistoryEventsPerSec <= 0 || r.RawEventsPerSec <= 0 || r.HistoryVsRaw <= 0 {
			t.Fatalf("%s: replay rates %+v", r.Policy, r)
		}
		switch r.Policy {
		case "end-offsets":
			// Live records late by more than the clock's lag (a loaded
			// machine) are beyond any policy; the history must be exact.
			if r.HistoryOutOfOrder != 0 {
				t.Fatalf("end-offsets: %d history records out of order, want 0", r.HistoryOutOfOrder)
			}
			if r.ReleaseLatencyMs.P50 <= 0 {
				t.Fatalf("end-offsets: release latency %+v", r.ReleaseLatencyMs)
			}
		default:
			timeouts += r.HistoryOutOfOrder
		}
	}
	if timeouts == 0 {
		t.Fatalf("no record out of order under the time-out policies: the experiment did not reproduce the failure")
	}
}

// The sweep runs a time-out policy once per time-out and end offsets once,
// each result saying its time-out. A time-out below the readers' start
// stagger puts history out of order; a long one holds the history's tail
// back until every partition has been silent for the time-out (a lower
// bound on the staggered pass, whatever the load); end offsets do neither.
func TestTimeoutSweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := 2 * time.Second
	res, err := Run(ctx, Config{Topics: 4, Partitions: 2, Items: 50, HistoryRecords: 4000,
		Stagger: 1200 * time.Millisecond, Timeouts: []time.Duration{100 * time.Millisecond, long},
		Live: 400 * time.Millisecond, LiveRate: 500, Policies: []string{"timeout", "end-offsets"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3 (timeout twice, end-offsets once)", len(res))
	}
	for i, want := range []struct {
		policy  string
		timeout float64
	}{{"timeout", 100}, {"timeout", 2000}, {"end-offsets", 0}} {
		r := res[i]
		t.Logf("%+v", r)
		if r.Policy != want.policy || r.TimeoutMs != want.timeout {
			t.Fatalf("result %d: policy %s, timeout %v ms; want %s, %v ms", i, r.Policy, r.TimeoutMs, want.policy, want.timeout)
		}
		if r.HistoryEventsPerSec != 0 || r.RawEventsPerSec != 0 {
			t.Fatalf("result %d: a sweep leaves the replay passes out, got %+v", i, r)
		}
		if r.HistoryRecords == 0 || r.HistoryOutOfOrderFraction != float64(r.HistoryOutOfOrder)/float64(r.HistoryRecords) {
			t.Fatalf("result %d: history fraction %v of %d/%d", i, r.HistoryOutOfOrderFraction, r.HistoryOutOfOrder, r.HistoryRecords)
		}
	}
	if res[0].HistoryOutOfOrder == 0 {
		t.Fatalf("a 100 ms time-out under a 1.2 s start stagger put no history record out of order")
	}
	if res[1].HistoryStaggeredMs < float64(long.Milliseconds()) {
		t.Fatalf("the history's tail was released %v ms after the start, before the %v time-out could mark a partition idle", res[1].HistoryStaggeredMs, long)
	}
	if res[2].HistoryOutOfOrder != 0 {
		t.Fatalf("end-offsets: %d history records out of order, want 0", res[2].HistoryOutOfOrder)
	}
}

// eventCodec decodes what it encodes, and refuses cut-short bytes.
func TestEventCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := Event{Item: rapid.String().Draw(t, "item"), TS: rapid.Int64().Draw(t, "ts"), Live: rapid.Bool().Draw(t, "live"),
			Topic: rapid.IntRange(0, 1<<20).Draw(t, "topic"), Partition: rapid.Int32().Draw(t, "p"), Offset: rapid.Int64().Draw(t, "off")}
		b, err := eventCodec{}.Append([]byte("x"), e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := eventCodec{}.Decode(b[1:])
		if err != nil || got != e {
			t.Fatalf("decoded %+v, %v; want %+v", got, err, e)
		}
		if _, err := (eventCodec{}).Decode(b[1 : len(b)-1]); err == nil {
			t.Fatalf("decoded %d bytes cut short without error", len(b)-2)
		}
	})
}
