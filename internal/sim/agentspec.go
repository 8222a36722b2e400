package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// AgentFault is what the scripted model or tool does with one input of the
// agent branch (Spec.Agent).
type AgentFault string

// The agent branch's faults, drawn per input.
const (
	// AgentOK: the model answers (after AgentInput.Retries transient
	// failures, which the model client retries under the same
	// idempotency key) and the tool takes effect: a decision line.
	AgentOK AgentFault = ""
	// AgentPermanent: the model fails with an error that is not
	// retryable (HTTP 400): the input is dead-lettered.
	AgentPermanent AgentFault = "model-permanent"
	// AgentHang: the model call hangs until the action's time-out: the
	// input is dead-lettered (timeout).
	AgentHang AgentFault = "model-hang"
	// AgentLate: the model answers only once the action's context is
	// done (its time-out in virtual time, or a cancellation), ignoring
	// it. The action then finds its context done
	// at the tool call, and the input is dead-lettered (timeout); after a
	// restore that runs the input again, the recorded answer is replayed
	// at once and the tool call made in time: a decision line. Either is
	// right, never both.
	AgentLate AgentFault = "model-late"
	// AgentToolRejected: the tool call fails (the external system
	// refuses it, without effect): the input is dead-lettered.
	AgentToolRejected AgentFault = "tool-rejected"
)

// AgentSpec is the agent branch of a seed's job (in about a third of the
// seeds): keyBy -> agent.Apply with a scripted model and a tool whose call
// is a side effect into a simulated external system, its action states in
// the WAL store, failed inputs to a dead-letter output.
type AgentSpec struct {
	// MaxConcurrentKeys is agent.Options.MaxConcurrentKeys (2-4, or 0:
	// the default, 256).
	MaxConcurrentKeys int `json:"max_concurrent_keys"`
	// TimeoutMS is agent.Options.ActionTimeout, in milliseconds of the
	// job's clock: virtual time (agentTime).
	TimeoutMS int `json:"timeout_ms"`
	// Every says which records the agent takes: those whose ID is a
	// multiple of it (60 to 120 of them, so that a seed stays
	// fast: every action is a few hand-offs between goroutines and a
	// group commit of the WAL).
	Every int64 `json:"every"`
	// Store is the action-state store (drawn from a stream of its own:
	// agentStoreStream).
	Store AgentStore `json:"store"`
	// StoreFaults are the Kafka store's retriable broker faults (1-3
	// requests in a row from the At-th of its kind, counted over the run).
	StoreFaults []Fault `json:"store_faults,omitempty"`
	// Inputs holds the script of every record, by its ID.
	Inputs []AgentInput `json:"-"`
	// Await is the waits for answers (agentawait.go), or nil.
	Await *AwaitSpec `json:"await,omitempty"`
}

// AgentStore names the agent branch's action-state store.
type AgentStore string

const (
	// StoreWAL: agent/wal on the machine's disk (a crashable vfs.MemFS
	// of its own: a machine crash keeps what it synced, torn writes
	// aside). Checkpointed, and a Queuer.
	StoreWAL AgentStore = "wal"
	// StoreMemory: one agent.MemoryStore for the whole run, which every
	// attempt opens as the previous one left it: a store outside the
	// process whose every Put is durable when it returns. Neither
	// Checkpointed nor a Queuer: the operator's other path (Put for
	// every call result, Prune without a horizon, no markers).
	StoreMemory AgentStore = "memory"
	// StoreKafka: agent/kafkastore on a kfake cluster of the run's own
	// (agentkafka.go), outside the machine, with retriable broker faults
	// (AgentSpec.StoreFaults). Checkpointed, and a Queuer. Half the seeds
	// drawn with the memory store get it (agentKafkaStream).
	StoreKafka AgentStore = "kafka"
)

// AgentInput is what the scripted model and tool do for one input.
type AgentInput struct {
	Verdict            string
	Prompt, Completion int // the model's token counts
	// Retries is the number of transient failures (HTTP 503) before the
	// model answers.
	Retries int
	Fault   AgentFault
	// DelayMicros is the model call's latency (honouring cancellation).
	DelayMicros int
	// Notify is the number of notify calls a second action makes after
	// the decision (0-2; agentmore.go).
	Notify int
}

func (a *AgentSpec) timeout() time.Duration { return time.Duration(a.TimeoutMS) * time.Millisecond }

// takes reports whether the agent takes record id.
func (a *AgentSpec) takes(id int64) bool { return id%a.Every == 0 }

// Faults counts the inputs with each fault (retries counted apart).
func (a *AgentSpec) faults() map[AgentFault]int {
	n := map[AgentFault]int{}
	for id, in := range a.Inputs {
		if !a.takes(int64(id)) {
			continue
		}
		if in.Fault != AgentOK {
			n[in.Fault]++
		}
		if in.Retries > 0 {
			n["retried"]++
		}
	}
	return n
}

func (a *AgentSpec) String() string {
	f := a.faults()
	return fmt.Sprintf("agent (every %d, keys at once %d, time-out %dms, %s store; %d retried, %d permanent, %d hung, %d late, %d tool-rejected%s)",
		a.Every, a.MaxConcurrentKeys, a.TimeoutMS, a.Store, f["retried"], f[AgentPermanent], f[AgentHang], f[AgentLate], f[AgentToolRejected], a.moreShape()+a.awaitShape())
}

// agentStream is the constant of the seed's stream the agent branch is
// drawn from (after everything else, so that earlier seeds keep their
// workloads and fault schedules).
const agentStream = 0xa6e7

// agentStoreStream is the constant of the stream the agent's store is
// drawn from (a stream of its own, so that the agent's script, drawn
// from agentStream, stays what it was for every seed).
const agentStoreStream = 0xa6e8

// drawStore draws the action-state store of a's seed: the WAL in half the
// seeds, the memory store in the other half.
func drawStore(seed uint64) AgentStore {
	rng := rand.New(rand.NewPCG(seed, agentStoreStream))
	if rng.IntN(2) == 0 {
		return StoreWAL
	}
	return StoreMemory
}

// generateAgent draws the agent branch of s (nil in about two thirds of
// the seeds).
func generateAgent(s *Spec) *AgentSpec {
	rng := rand.New(rand.NewPCG(s.Seed, agentStream))
	if rng.IntN(3) != 0 {
		return nil
	}
	a := &AgentSpec{MaxConcurrentKeys: []int{0, 2, 3, 4}[rng.IntN(4)], TimeoutMS: 20 + 10*rng.IntN(2),
		Every: int64(max(1, s.Records/60)), Store: drawStore(s.Seed)}
	verdicts := []string{"approve", "reject", "hold"}
	// At most one hung and one late model call a seed (they cost no real
	// time now that the time-out is virtual, but the draws stay as they
	// were, so that seeds keep their scripts).
	hang, late := -1, -1
	if rng.IntN(2) == 0 {
		hang = rng.IntN(s.Records/int(a.Every)) * int(a.Every)
	}
	if rng.IntN(2) == 0 {
		late = rng.IntN(s.Records/int(a.Every)) * int(a.Every)
	}
	a.Inputs = make([]AgentInput, s.Records)
	for i := range a.Inputs {
		in := AgentInput{Verdict: verdicts[rng.IntN(len(verdicts))], Prompt: 5 + rng.IntN(200), Completion: 1 + rng.IntN(50)}
		switch u := rng.Float64(); {
		case u < 0.03:
			in.Fault = AgentPermanent
		case u < 0.06:
			in.Fault = AgentToolRejected
		case u < 0.14:
			in.Retries = 1 + rng.IntN(2)
		}
		if rng.IntN(10) == 0 {
			in.DelayMicros = 50 + rng.IntN(450)
		}
		switch i {
		case hang:
			in.Fault = AgentHang
		case late:
			in.Fault = AgentLate
		}
		a.Inputs[i] = in
	}
	return a
}
