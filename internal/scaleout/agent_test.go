package scaleout

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// The agent kill run (cluster K1): three worker processes run a clustered
// agent job whose one action makes a durable call to a side-effect
// service on 127.0.0.1 that counts calls per idempotency key; the worker
// running the most tasks (a keyed one among them) is killed with SIGKILL
// mid-run and its tasks restored by the others, then a worker is added.
// Every input must be answered once in the committed output, and every
// effect asked for under one idempotency key (a service honouring the
// key applies each once); calls repeated under their key (the residual
// window, what a service ignoring keys would apply twice) are counted and
// bounded by the calls in flight in the tasks that stopped. With the
// Kafka store the keyed tasks may move to any machine; with the WAL, the
// workers share one store directory (one machine).
// WEIR_CLUSTER_AGENT_TRIALS sets the trials per store (default 1).
func TestAgentKillOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	trials := 1
	if v := os.Getenv("WEIR_CLUSTER_AGENT_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_CLUSTER_AGENT_TRIALS=%q: want an integer >= 1", v)
		}
		trials = n
	}
	for _, store := range []string{"kafka", "wal"} {
		t.Run(store, func(t *testing.T) {
			for trial := range trials {
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				cfg := Config{Processes: 3, Partitions: 4, KeyedTasks: 2, AgentInputs: 1000, AgentKeys: 32,
					CheckpointInterval: 200 * time.Millisecond, KillAfter: 0.3, AgentPace: 100, CallDelay: 2 * time.Millisecond,
					NoThroughput: true, Dir: t.TempDir()}
				if testing.Verbose() {
					cfg.Log = os.Stderr
				}
				res, err := RunAgent(ctx, cfg, store)
				cancel()
				if err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
				t.Logf("trial %d: %+v", trial, res)
				if res.Killed != 1 || res.KilledKeyedTasks == 0 || res.Added != 1 {
					t.Errorf("trial %d: killed %d (owning %d keyed tasks), added %d; want one killed owning a keyed task, one added",
						trial, res.Killed, res.KilledKeyedTasks, res.Added)
				}
				if !res.OK() {
					t.Fatalf("trial %d: guarantees broken: %d lost inputs, %d lost and %d duplicated outputs, %d effects of %d inputs, %d duplicated; %d calls repeated under their key (bound %d)",
						trial, res.LostInputs, res.LostOutputs, res.DuplicateOutputs, res.Effects, res.Inputs, res.DuplicateEffects,
						res.ResidualWindowEffects, res.ResidualBound)
				}
			}
		})
	}
}
