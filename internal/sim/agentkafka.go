package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
)

// The agent's Kafka store (AgentSpec.Store kafka): the action states in a
// compacted topic of a kfake cluster of the run's own, on a virtual
// network, through agent/kafkastore's public API (Factory) only. The
// cluster is outside the machine: it keeps everything it acknowledged
// through process and machine crashes, as a Kafka cluster does, so what
// is tested is the store's and the operator's use of it: S17 (a state
// acknowledged is found by a later Get, after restores from the
// checkpoints' markers) and S11 (its residual window: what was not
// acknowledged when the process died runs again). Retriable broker
// errors strike the store's produces and fetches (AgentSpec.StoreFaults,
// counted over the whole run), which its franz-go client must absorb.

// agentKafkaStream is the constant of the stream the Kafka store is drawn
// from: half the agent seeds that had the memory store (drawn from
// agentStoreStream, which stays) get it, so the WAL's seeds, and the
// planted bugs' seeds of the WAL, stay the WAL's.
const agentKafkaStream = 0xa6e9

// agentStateTopic is the Kafka store's topic.
const agentStateTopic = "agent-states"

// generateAgentKafka switches a's store to the Kafka store in half the
// seeds with the memory store, with 1-3 retriable broker faults.
func generateAgentKafka(s *Spec) {
	a := s.Agent
	if a == nil || a.Store != StoreMemory {
		return
	}
	rng := rand.New(rand.NewPCG(s.Seed, agentKafkaStream))
	if rng.IntN(2) != 0 {
		return
	}
	a.Store = StoreKafka
	for range 1 + rng.IntN(3) {
		// Fetch, ListOffsets or Produce. ListOffsets since 2026-12-05:
		// the store's Open and Restore failed on one retriable
		// partition error of their listing (13 of the first 40 seeds
		// with the store failed S4 so); they now retry within
		// RequestTimeout (kafkastore.TestListOffsetsRetriesRetriableErrors).
		r := kafkaRequests[[]int{0, 1, 2}[rng.IntN(3)]]
		// A store fetches and lists offsets only when it opens and
		// restores, a few times a run; it produces a batch per group
		// commit.
		at := 1 + rng.Int64N(4)
		if r.key == kmsg.Produce {
			at = 1 + rng.Int64N(30)
		}
		a.StoreFaults = append(a.StoreFaults, Fault{Kind: FaultBrokerRetriable, Request: r.key.Name(),
			Err: r.retriable[rng.IntN(len(r.retriable))].Message, At: at, Repeat: 1 + rng.IntN(3)})
	}
}

// agentKafka is the Kafka store's cluster for one run.
type agentKafka struct {
	kc     *kafkaCluster
	disarm func()
}

// startAgentKafka starts the cluster and arms the store's faults.
func startAgentKafka(a *AgentSpec) (*agentKafka, error) {
	kc := &kafkaCluster{vn: &kfake.VirtualNetwork{}}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(kafkaPort), kfake.ListenFn(kc.vn.Listen))
	if err != nil {
		return nil, fmt.Errorf("sim: kfake for the agent's store: %w", err)
	}
	kc.mu.c = c
	faults := make([]*Fault, len(a.StoreFaults))
	for i := range a.StoreFaults {
		faults[i] = &a.StoreFaults[i]
	}
	as, disarm := kc.arm(faults)
	k := &agentKafka{kc: kc, disarm: func() {
		disarm()
		for _, x := range as {
			x.f.Struck = x.struck.Load()
		}
	}}
	return k, nil
}

// factory opens the Kafka store of one agent subtask.
func (k *agentKafka) factory() agent.StoreFactory {
	return kafkastore.Factory(kafkastore.Options{Brokers: k.kc.seeds(), Topic: agentStateTopic,
		DeliveryTimeout: 20 * time.Second, RequestTimeout: 5 * time.Second,
		ClientOptions: k.kc.clientOpts()})
}

// close removes the faults, notes which struck, and stops the cluster.
func (k *agentKafka) close() {
	k.disarm()
	k.kc.close()
}
