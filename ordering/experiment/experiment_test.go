package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
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
