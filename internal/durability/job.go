package durability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// ChildEnv is the environment variable that makes a process run one
// attempt of the job (ChildSpec as JSON) instead of its usual work.
const ChildEnv = "WEIR_DURABILITY_CHILD"

// ChildSpec describes one attempt of the experiment's job.
type ChildSpec struct {
	Brokers     []string `json:"brokers"`
	InTopic     string   `json:"in"`
	OutTopic    string   `json:"out"`
	Service     string   `json:"service"` // base URL of the side-effect service
	Trial       int      `json:"trial"`
	Checkpoints string   `json:"checkpoints"`
	Store       string   `json:"store"` // "wal" or "kafka"
	StoreDir    string   `json:"storeDir"`
	ActionTopic string   `json:"actionTopic"` // the Kafka store's topic
	Parallelism int      `json:"parallelism"`
	// CallDelay is how long the service takes per call, so that
	// checkpoints fall between calls.
	CallDelay time.Duration `json:"callDelay"`
}

// Input is one record of the input topic.
type Input struct {
	ID  int    `json:"id"`
	Key string `json:"key"`
}

// MaybeRunChild runs the job and exits if the process was started as a
// child of the experiment (ChildEnv set); otherwise it returns at once.
// Call it first thing in main (and in TestMain).
func MaybeRunChild() {
	spec := os.Getenv(ChildEnv)
	if spec == "" {
		return
	}
	var s ChildSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "durability: %s: %v\n", ChildEnv, err)
		os.Exit(2)
	}
	if err := RunChild(context.Background(), s); err != nil {
		fmt.Fprintln(os.Stderr, "durability child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunChild runs one attempt: the job restored from the latest checkpoint
// in s.Checkpoints if there is one, reading the input topic up to the end
// offsets it finds at start. Each input runs one action that makes one
// durable call to the side-effect service and outputs the input's id
// through the exactly-once Kafka sink.
func RunChild(ctx context.Context, s ChildSpec) error {
	cfg := weir.Config{Parallelism: s.Parallelism, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Interval: 20 * time.Millisecond, Dir: s.Checkpoints, Retain: 3}}
	if dir, _, err := checkpoint.Latest(s.Checkpoints); err == nil {
		cfg.Checkpoint.RestoreFrom = dir
	}
	var factory agent.StoreFactory
	switch s.Store {
	case "wal":
		factory = wal.Factory(s.StoreDir, wal.Options{})
	case "kafka":
		factory = kafkastore.Factory(kafkastore.Options{Brokers: s.Brokers, Topic: s.ActionTopic})
	default:
		return fmt.Errorf("durability: store %q: want wal or kafka", s.Store)
	}
	stop := make(chan struct{})
	close(stop) // bounded: up to the end offsets listed at start
	env := weir.NewEnvironment(cfg)
	src := weir.FromSource(env, "inputs", kafka.NewSource(kafka.Options{
		Brokers: s.Brokers, Topics: []string{s.InTopic}, Stop: stop,
	}, kafka.JSON[Input]()), watermark.NoWatermarks[Input]()).UID("inputs")
	client := &http.Client{Timeout: 30 * time.Second}
	effect := func(c *agent.RunnerContext, ev agent.Event) error {
		in, err := agent.Input[Input](ev)
		if err != nil {
			return err
		}
		res, err := agent.Durable(c, "effect", in.ID, func(ctx context.Context, key string) (string, error) {
			return call(ctx, client, s, in.ID, key)
		})
		if err != nil {
			return err
		}
		c.Output(strconv.Itoa(in.ID) + " " + res)
		return nil
	}
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("effect", effect, agent.TypeInput)}}
	out := agent.Apply[string, Input, string](weir.KeyBy(src, func(in Input) string { return in.Key }), "agent", a,
		agent.Options{Store: factory, MaxConcurrentKeys: maxConcurrentKeys})
	kafka.ExactlyOnceSink(out, "out", kafka.SinkOptions[string]{
		Brokers: s.Brokers, Topic: s.OutTopic,
		TransactionalIDPrefix: fmt.Sprintf("durability-%s-%d", s.Store, s.Trial),
		Serialize:             kafka.SerializeString(nil),
	})
	return env.Execute(ctx)
}

// call makes the side effect: a POST to the service carrying the
// idempotency key.
func call(ctx context.Context, client *http.Client, s ChildSpec, id int, key string) (string, error) {
	return CallService(ctx, client, s.Service, s.Trial, id, key, s.CallDelay)
}

// CallService makes input id's side effect in trial: a POST to the
// Service at base (http://host:port) carrying the idempotency key; the
// service takes delay to answer. It returns the service's answer.
func CallService(ctx context.Context, client *http.Client, base string, trial, id int, key string, delay time.Duration) (string, error) {
	u := base + "/effect?" + url.Values{"trial": {strconv.Itoa(trial)}, "id": {strconv.Itoa(id)},
		"delay": {delay.String()}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("durability: service: " + resp.Status + ": " + string(b))
	}
	return string(b), nil
}

// readOutputs returns every committed output record's value, read with
// weir's own Kafka source (read_committed, up to the last stable offsets).
func readOutputs(ctx context.Context, brokers []string, topic string) ([]string, error) {
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := weir.FromSource(env, "outputs", kafka.NewSource(kafka.Options{
		Brokers: brokers, Topics: []string{topic}, Stop: stop, ReadCommitted: true,
	}, kafka.String()), watermark.NoWatermarks[string]())
	got := weir.Collect(src)
	if err := env.Execute(ctx); err != nil {
		return nil, err
	}
	return got.Values(), nil
}
