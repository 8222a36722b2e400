package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/internal/durability"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// AgentInput is an input of the agent job: an id and the key it runs
// under.
type AgentInput struct {
	ID  int    `json:"id"`
	Key string `json:"key"`
}

// AgentSpec configures the agent job (AgentJob) of a worker.
type AgentSpec struct {
	// Service is the side-effect service's base URL (durability.Service)
	// and Trial the trial its calls count under.
	Service string `json:"service"`
	Trial   int    `json:"trial"`
	// Store is the action-state store: "kafka" (the topic ActionTopic on
	// Brokers) or "wal" (under StoreDir, on this machine's disk).
	Store       string   `json:"store"`
	Brokers     []string `json:"brokers"`
	ActionTopic string   `json:"actionTopic,omitempty"`
	StoreDir    string   `json:"storeDir,omitempty"`
	// CallDelay is the service's time per call.
	CallDelay time.Duration `json:"callDelay"`
	// Pace bounds each source task's inputs per second (0: no bound).
	Pace int `json:"pace,omitempty"`
	// AllowRepeats is agent.Options.AllowRepeatedSideEffects.
	AllowRepeats bool `json:"allowRepeats,omitempty"`
}

// AgentMaxConcurrentKeys is the agent operator's MaxConcurrentKeys in
// AgentJob: at most that many calls of a keyed task are in flight.
const AgentMaxConcurrentKeys = 16

// AgentJob is the agent experiment's job: inputs keyed by Key, each
// answered by an agent (agent.Apply) whose one action makes one durable
// call (agent.Durable) to the side-effect service, passing the call's
// idempotency key, and outputs "<id> <answer>" through the exactly-once
// sink. Its action states go to the store s.Store names.
func AgentJob(outTopic string, s AgentSpec) cluster.Job[AgentInput, AgentInput, string, string] {
	j := cluster.Job[AgentInput, AgentInput, string, string]{
		Source:     kafka.JSON[AgentInput](),
		Watermarks: watermark.NoWatermarks[AgentInput](),
		Key:        func(in AgentInput) string { return in.Key },
		Keyed: func(ks weir.KeyedStream[string, AgentInput]) weir.Stream[string] {
			return agent.Apply[string, AgentInput, string](ks, "agent", effectAgent(s),
				agent.Options{Store: agentStore(s), MaxConcurrentKeys: AgentMaxConcurrentKeys, AllowRepeatedSideEffects: s.AllowRepeats}).UID("agent")
		},
		Sink: kafka.SinkOptions[string]{Topic: outTopic, Serialize: kafka.SerializeString(nil)},
	}
	if s.Pace > 0 {
		j.Upstream = func(in weir.Stream[AgentInput]) weir.Stream[AgentInput] {
			return weir.Transform(in, "pace", func() runtime.OneInputOperator[AgentInput, AgentInput] {
				return &pacer[AgentInput]{perSec: s.Pace}
			})
		}
	}
	return j
}

func agentStore(s AgentSpec) agent.StoreFactory {
	if s.Store == "wal" {
		return wal.Factory(s.StoreDir, wal.Options{})
	}
	return kafkastore.Factory(kafkastore.Options{Brokers: s.Brokers, Topic: s.ActionTopic})
}

func effectAgent(s AgentSpec) *agent.Agent {
	client := &http.Client{Timeout: 30 * time.Second}
	return &agent.Agent{Actions: []agent.Action{agent.NewAction("effect", func(c *agent.RunnerContext, ev agent.Event) error {
		in, err := agent.Input[AgentInput](ev)
		if err != nil {
			return err
		}
		res, err := agent.Durable(c, "effect", in.ID, func(ctx context.Context, key string) (string, error) {
			return durability.CallService(ctx, client, s.Service, s.Trial, in.ID, key, s.CallDelay)
		})
		if err != nil {
			return err
		}
		c.Output(strconv.Itoa(in.ID) + " " + res)
		return nil
	}, agent.TypeInput)}}
}

// ProduceAgentInputs writes inputs 0..n-1 to topic, input i to partition
// i mod partitions, under key "k<i mod keys>".
func ProduceAgentInputs(ctx context.Context, brokers []string, topic string, partitions, n, keys int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v, _ := json.Marshal(AgentInput{ID: i, Key: "k" + strconv.Itoa(i%keys)})
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// AgentOutputs reads the committed outputs of the agent job
// (read_committed, up to the end offsets when it starts) and counts them
// per input id; an output that names no input is an error.
func AgentOutputs(ctx context.Context, brokers []string, topic string, inputs int) ([]int, error) {
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.String())
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[string]()))
	if err := env.Execute(ctx); err != nil {
		return nil, err
	}
	seen := make([]int, inputs)
	for _, o := range got.Values() {
		idStr, ans, _ := strings.Cut(o, " ")
		id, err := strconv.Atoi(idStr)
		if err != nil || id < 0 || id >= inputs || ans != "done-"+idStr {
			return nil, fmt.Errorf("scaleout: output %q answers no input", o)
		}
		seen[id]++
	}
	return seen, nil
}

// AgentResult is what an agent kill run measured.
type AgentResult struct {
	// Store is the action-state store: "kafka" or "wal".
	Store string `json:"store"`
	// Processes at the start; Killed (SIGKILL) and Added during the run;
	// KilledTasks the unfinished tasks the killed process owned, and
	// KilledKeyedTasks the keyed ones among them (whose agents were
	// restored elsewhere).
	Processes        int `json:"processes"`
	Killed           int `json:"killed"`
	Added            int `json:"added"`
	KilledTasks      int `json:"killedTasks"`
	KilledKeyedTasks int `json:"killedKeyedTasks"`
	// KeyedRestarts counts the keyed tasks started again (after the
	// kill, or handed over to the added process).
	KeyedRestarts int `json:"keyedRestarts"`
	// Inputs; LostInputs, inputs whose side effect never happened.
	Inputs     int `json:"inputs"`
	LostInputs int `json:"lostInputs"`
	// LostOutputs and DuplicateOutputs: inputs with no committed answer,
	// and answers committed more than once (read_committed).
	LostOutputs      int `json:"lostOutputs"`
	DuplicateOutputs int `json:"duplicateOutputs"`
	// Effects applied by the service (which honours idempotency keys),
	// and DuplicateEffects, inputs whose effect was asked for under more
	// than one key (applied twice even by such a service).
	Effects          int `json:"effects"`
	DuplicateEffects int `json:"duplicateEffects"`
	// ResidualWindowEffects: calls repeated under the same key, which a
	// service ignoring the key would apply twice: calls in flight when
	// their task stopped (killed, or handed over) whose results were not
	// recorded. ResidualBound is KeyedRestarts × AgentMaxConcurrentKeys,
	// the calls that can be in flight in the tasks that stopped.
	ResidualWindowEffects int `json:"residualWindowEffects"`
	ResidualBound         int `json:"residualBound"`
	// RebalanceSeconds runs from the kill until every task of the killed
	// process ran elsewhere; Seconds is the run's duration.
	RebalanceSeconds float64 `json:"rebalanceSeconds"`
	Seconds          float64 `json:"seconds"`
}

// OK reports whether every input was answered once, every effect asked
// for under one key, and the repeats stayed within the residual window.
func (r AgentResult) OK() bool {
	return r.LostInputs == 0 && r.LostOutputs == 0 && r.DuplicateOutputs == 0 && r.DuplicateEffects == 0 &&
		r.Effects == r.Inputs && r.ResidualWindowEffects <= r.ResidualBound
}

// RunAgent runs the agent kill run with the given store on a broker and a
// side-effect service of its own: cfg.Processes workers run AgentJob
// (cfg.AgentInputs inputs over cfg.AgentKeys keys, cfg.Partitions source
// tasks, cfg.KeyedTasks keyed tasks); once the agents have made
// cfg.KillAfter of the inputs' side effects, the worker running the most tasks
// (keyed ones first) is killed with SIGKILL; once its tasks run
// elsewhere a worker is added; the run ends when every task has
// finished. The workers of a "wal" run share one store directory (one
// machine).
func RunAgent(ctx context.Context, cfg Config, store string) (AgentResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return AgentResult{}, err
	}
	if store != "kafka" && store != "wal" {
		return AgentResult{}, fmt.Errorf("scaleout: agent store %q: want kafka or wal", store)
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "scaleout agent (%s): "+format+"\n", append([]any{store}, args...)...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-scaleout-agent-"); err != nil {
			return AgentResult{}, err
		}
		defer os.RemoveAll(dir)
	}
	b, err := broker.Start(broker.Options{Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		return AgentResult{}, err
	}
	defer b.Close()
	svc := durability.NewService()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return AgentResult{}, err
	}
	srv := &http.Server{Handler: svc}
	go srv.Serve(ln)
	defer srv.Close()

	brokers := b.Addrs()
	group := "agent-" + store
	input, out := group+"-in", group+"-out"
	for _, t := range []struct {
		name  string
		parts int
	}{{input, cfg.Partitions}, {out, 2}} {
		if err := createTopic(ctx, brokers, t.name, t.parts); err != nil {
			return AgentResult{}, err
		}
	}
	if err := ProduceAgentInputs(ctx, brokers, input, cfg.Partitions, cfg.AgentInputs, cfg.AgentKeys); err != nil {
		return AgentResult{}, err
	}
	s := WorkerSpec{Brokers: brokers, Group: group, SourceTopic: input, OutTopic: out, KeyedTasks: cfg.KeyedTasks,
		CheckpointBase: filepath.Join(dir, group), CheckpointInterval: cfg.CheckpointInterval,
		Agent: &AgentSpec{Service: "http://" + ln.Addr().String(), Store: store, Brokers: brokers,
			ActionTopic: group + "-actions", StoreDir: filepath.Join(dir, group+"-wal"), CallDelay: cfg.CallDelay, Pace: cfg.AgentPace}}
	logf("%d inputs over %d keys, %d processes", cfg.AgentInputs, cfg.AgentKeys, cfg.Processes)
	// The kill waits until the agents have made KillAfter of the effects,
	// so that keyed tasks run, with calls in flight.
	kr, err := killRun(ctx, cfg, s, logf, func() bool {
		return float64(svc.Effects(s.Agent.Trial)) >= cfg.KillAfter*float64(cfg.AgentInputs)
	})
	if err != nil {
		return AgentResult{}, err
	}
	res := AgentResult{Store: store, Processes: cfg.Processes, Killed: kr.killed, Added: kr.added, KilledTasks: kr.killedTasks,
		KilledKeyedTasks: kr.killedKeyed, Inputs: cfg.AgentInputs, RebalanceSeconds: kr.rebalance, Seconds: kr.seconds}
	starts := 0
	for _, ev := range kr.evs {
		if ev.Kind == cluster.TaskStarted && strings.HasPrefix(ev.Task, "keyed-") {
			starts++
		}
	}
	res.KeyedRestarts = max(0, starts-cfg.KeyedTasks)
	res.ResidualBound = res.KeyedRestarts * min(cfg.AgentKeys, AgentMaxConcurrentKeys)
	seen, err := AgentOutputs(ctx, brokers, out, cfg.AgentInputs)
	if err != nil {
		return res, err
	}
	for _, n := range seen {
		if n == 0 {
			res.LostOutputs++
		} else {
			res.DuplicateOutputs += n - 1
		}
	}
	keysOf, repeats := svc.Counts(s.Agent.Trial)
	for id := range cfg.AgentInputs {
		switch n := keysOf[id]; {
		case n == 0:
			res.LostInputs++
		case n > 1:
			res.DuplicateEffects += n - 1
		}
		res.Effects += min(keysOf[id], 1)
	}
	res.ResidualWindowEffects = repeats
	logf("%d lost inputs, %d lost and %d duplicated outputs, %d effects, %d duplicated, %d calls repeated under their key (bound %d)",
		res.LostInputs, res.LostOutputs, res.DuplicateOutputs, res.Effects, res.DuplicateEffects, repeats, res.ResidualBound)
	if res.KilledKeyedTasks == 0 {
		return res, errors.New("scaleout: the killed process ran no keyed task: no agent was restored elsewhere")
	}
	return res, nil
}
