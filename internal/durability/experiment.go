// Package durability is the crash matrix of the agent runtime's
// action-state store (durable execution): an agent job in a child process makes one
// side effect per input through agent.Durable, against a service on
// 127.0.0.1 that counts calls per idempotency key, and writes its outputs
// through kafka.ExactlyOnceSink on the embedded broker. The child is
// killed with SIGKILL at exact steps (internal/killpoint): before a call,
// after the call before its record, after the record before the action
// completes, after outputs before the checkpoint, during the checkpoint,
// and during the store's rebuild after a restore; then restarted from its
// latest checkpoint until an attempt completes.
//
// What it checks, per store:
//
//   - every input answered once: lostInputs and lostOutputs are 0,
//     duplicateOutputs is 0 (read_committed);
//   - every side effect once for a service that honours idempotency keys:
//     duplicateEffects is 0 (each input's effect was asked for under one
//     key only);
//   - for a service that does not, the repeats are counted as
//     residualWindowEffects: the calls repeated because the process died
//     after the service applied them and before their results were
//     recorded, the one window the store cannot close. It is open only for
//     the calls in flight when the process dies, whatever the kill point
//     (other actions run concurrently), so the repeats are bounded by
//     kills × the calls that can be in flight at once (residualBound);
//     a trial without a kill repeats nothing.
package durability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/killpoint"
)

// KillPoints are the steps at which trials kill the child.
var KillPoints = []string{
	"agent.before-call",
	"agent.after-call",
	"agent.after-record",
	"sink.after-write",
	"checkpoint.before-manifest",
	"agent.rebuild",
}

// Config describes an experiment. Zero fields take the defaults in
// parentheses.
type Config struct {
	// Stores to try: "wal", "kafka" (["wal", "kafka"]).
	Stores []string
	// Trials per store (12).
	Trials int
	// Inputs per trial (120) and the keys they spread over (8).
	Inputs, Keys int
	// Parallelism of the job (2).
	Parallelism int
	// MaxKills per trial (3): after that many kills an attempt runs to
	// its end.
	MaxKills int
	// CallDelay is the service's time per call (2ms).
	CallDelay time.Duration
	// Seed for the choice of kill points and hits (1).
	Seed uint64
	// Program and Args start a child: a program that calls
	// MaybeRunChild first (os.Args[0] with no arguments).
	Program string
	Args    []string
	// Log, if set, receives a line per attempt.
	Log io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Stores) == 0 {
		c.Stores = []string{"wal", "kafka"}
	}
	for _, s := range c.Stores {
		if s != "wal" && s != "kafka" {
			return c, fmt.Errorf("durability: store %q: want wal or kafka", s)
		}
	}
	def := func(v *int, d int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 1 {
			return fmt.Errorf("durability: %s %d: want an integer >= 1", name, *v)
		}
		return nil
	}
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{{&c.Trials, 12, "trials"}, {&c.Inputs, 120, "inputs"}, {&c.Keys, 8, "keys"}, {&c.Parallelism, 2, "parallelism"}, {&c.MaxKills, 3, "max kills"}} {
		if err := def(f.v, f.d, f.name); err != nil {
			return c, err
		}
	}
	if c.CallDelay == 0 {
		c.CallDelay = 2 * time.Millisecond
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Program == "" {
		c.Program = os.Args[0]
	}
	return c, nil
}

// Result is what the experiment measured for one store.
type Result struct {
	Store  string `json:"store"`
	Trials int    `json:"trials"`
	// KillPoints counts the kills at each point (a point armed in an
	// attempt that ended before reaching it is not counted).
	KillPoints map[string]int `json:"killPoints"`
	Kills      int            `json:"kills"`
	Inputs     int            `json:"inputs"`
	// LostInputs: inputs whose side effect never happened.
	LostInputs       int `json:"lostInputs"`
	DuplicateOutputs int `json:"duplicateOutputs"`
	LostOutputs      int `json:"lostOutputs"`
	// Effects applied by a service that honours idempotency keys, and
	// inputs whose effect was asked for under more than one key.
	Effects          int `json:"effects"`
	DuplicateEffects int `json:"duplicateEffects"`
	// ResidualWindowEffects: calls repeated with the same key (what a
	// service ignoring the key would have applied twice); ResidualBound:
	// kills × the calls that can be in flight at once, which it may not
	// exceed; RepeatsWithoutKill: repeats in trials without a kill (must
	// be 0).
	ResidualWindowEffects int `json:"residualWindowEffects"`
	ResidualBound         int `json:"residualBound"`
	RepeatsWithoutKill    int `json:"repeatsWithoutKill"`
	// Store speed, measured in the parent on a fresh store: concurrent
	// durable calls (group commit), the same store with one writer at a
	// time (a flush per write), states rebuilt per second when the store
	// reopens, and completed actions looked up per second after that (the
	// replay of inputs whose actions completed before the crash).
	DurableCallsPerSec       float64 `json:"durableCallsPerSec"`
	FlushPerWriteCallsPerSec float64 `json:"flushPerWriteCallsPerSec"`
	RebuildStatesPerSec      float64 `json:"rebuildStatesPerSec"`
	ReplayActionsPerSec      float64 `json:"replayActionsPerSec"`
	Seconds                  float64 `json:"seconds"`
}

// OK reports whether r shows no lost or repeated input, output or effect
// beyond the residual window.
func (r Result) OK() bool {
	return r.LostInputs == 0 && r.LostOutputs == 0 && r.DuplicateOutputs == 0 &&
		r.DuplicateEffects == 0 && r.RepeatsWithoutKill == 0 && r.ResidualWindowEffects <= r.ResidualBound &&
		r.Effects == r.Inputs
}

// Run runs the experiment: per store, cfg.Trials trials on one embedded
// broker and one side-effect service.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := broker.Start(broker.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	svc := NewService()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: svc}
	go srv.Serve(ln)
	defer srv.Close()
	work, err := os.MkdirTemp("", "weir-durability-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	var results []Result
	for _, store := range cfg.Stores {
		began := time.Now()
		r := Result{Store: store, KillPoints: map[string]int{}}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(len(results))))
		for trial := range cfg.Trials {
			tr, err := runTrial(ctx, cfg, b, "http://"+ln.Addr().String(), svc, work, store, len(results)*100000+trial, rng)
			if err != nil {
				return nil, fmt.Errorf("durability: store %s, trial %d: %w", store, trial, err)
			}
			r.Trials++
			r.Inputs += cfg.Inputs
			r.Kills += len(tr.kills)
			for _, p := range tr.kills {
				r.KillPoints[p]++
			}
			r.LostInputs += tr.lostInputs
			r.LostOutputs += tr.lostOutputs
			r.DuplicateOutputs += tr.duplicateOutputs
			r.Effects += tr.effects
			r.DuplicateEffects += tr.duplicateEffects
			r.ResidualWindowEffects += tr.repeats
			r.ResidualBound += len(tr.kills) * inFlight(cfg)
			if len(tr.kills) == 0 {
				r.RepeatsWithoutKill += tr.repeats
			}
		}
		r.Seconds = time.Since(began).Seconds()
		if err := measureStore(store, filepath.Join(work, store+"-speed"), &r); err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

type trialResult struct {
	kills                                     []string
	lostInputs, lostOutputs, duplicateOutputs int
	effects, duplicateEffects, repeats        int
}

func runTrial(ctx context.Context, cfg Config, b *broker.Broker, service string, svc *Service, work, store string, trial int, rng *rand.Rand) (trialResult, error) {
	var tr trialResult
	in, out := fmt.Sprintf("in-%d", trial), fmt.Sprintf("out-%d", trial)
	for _, t := range []string{in, out} {
		if err := b.CreateTopic(t, 4, nil); err != nil {
			return tr, err
		}
	}
	if err := produceInputs(ctx, b.Addrs(), in, cfg); err != nil {
		return tr, err
	}
	dir := filepath.Join(work, strconv.Itoa(trial))
	spec := ChildSpec{Brokers: b.Addrs(), InTopic: in, OutTopic: out, Service: service, Trial: trial,
		Checkpoints: filepath.Join(dir, "checkpoints"), Store: store, StoreDir: filepath.Join(dir, "store"),
		ActionTopic: fmt.Sprintf("actions-%d", trial),
		Parallelism: cfg.Parallelism, CallDelay: cfg.CallDelay}
	js, _ := json.Marshal(spec)
	first := KillPoints[trial%len(KillPoints)]
	if first == "agent.rebuild" {
		// A rebuild needs a restore: kill somewhere first.
		first = KillPoints[rng.IntN(len(KillPoints)-1)]
	}
	for attempt := 0; ; attempt++ {
		if attempt > cfg.MaxKills+3 {
			return tr, fmt.Errorf("no attempt completed after %d kills", len(tr.kills))
		}
		arm := ""
		if len(tr.kills) < cfg.MaxKills {
			p := first
			if attempt > 0 {
				p = KillPoints[rng.IntN(len(KillPoints))]
			}
			arm = fmt.Sprintf("%s@%d", p, hitsFor(p, cfg, rng))
		}
		cmd := exec.CommandContext(ctx, cfg.Program, cfg.Args...)
		cmd.Env = append(os.Environ(), ChildEnv+"="+string(js), killpoint.Env+"="+arm)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "trial %d attempt %d (armed %q): completed\n", trial, attempt, arm)
			}
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			p, _, _ := strings.Cut(arm, "@")
			tr.kills = append(tr.kills, p)
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "trial %d attempt %d: killed at %s\n", trial, attempt, arm)
			}
			continue
		default:
			return tr, fmt.Errorf("attempt %d (armed %q): %v\n%s", attempt, arm, err, stderr.String())
		}
		break
	}
	outs, err := readOutputs(ctx, b.Addrs(), out)
	if err != nil {
		return tr, err
	}
	seen := make([]int, cfg.Inputs)
	for _, o := range outs {
		idStr, _, _ := strings.Cut(o, " ")
		id, err := strconv.Atoi(idStr)
		if err != nil || id < 0 || id >= cfg.Inputs {
			return tr, fmt.Errorf("output %q names no input", o)
		}
		seen[id]++
	}
	for _, n := range seen {
		if n == 0 {
			tr.lostOutputs++
		} else {
			tr.duplicateOutputs += n - 1
		}
	}
	st := svc.trial(trial)
	for id := range cfg.Inputs {
		keys := st.keysOf[id]
		switch {
		case keys == 0:
			tr.lostInputs++
		case keys > 1:
			tr.duplicateEffects += keys - 1
		}
		tr.effects += min(keys, 1)
	}
	tr.repeats = st.repeats
	return tr, nil
}

// maxConcurrentKeys is the agent operator's in-flight limit per subtask
// in the child job.
const maxConcurrentKeys = 16

// inFlight is how many durable calls can be in flight at once in the
// child: one per key running, at most maxConcurrentKeys per subtask.
func inFlight(cfg Config) int { return min(cfg.Keys, maxConcurrentKeys*cfg.Parallelism) }

// hitsFor picks which hit of point p kills the child: one within the
// number of times an attempt reaches p.
func hitsFor(p string, cfg Config, rng *rand.Rand) int {
	switch p {
	case "checkpoint.before-manifest":
		return 1 + rng.IntN(2)
	case "agent.rebuild":
		return 1 + rng.IntN(cfg.Parallelism)
	default:
		return 1 + rng.IntN(max(1, cfg.Inputs/2))
	}
}

func produceInputs(ctx context.Context, brokers []string, topic string, cfg Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, cfg.Inputs)
	for i := range recs {
		v, _ := json.Marshal(Input{ID: i, Key: "k" + strconv.Itoa(i%cfg.Keys)})
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % cfg.Keys)), Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// Service is the side-effect service: it applies an effect once per
// idempotency key and counts the calls that repeat a key, per trial. The
// scale-out experiment's agent job (internal/scaleout) calls it too.
type Service struct {
	mu     sync.Mutex
	trials map[int]*serviceTrial
}

type serviceTrial struct {
	calls   map[string]int // idempotency key -> calls
	keysOf  map[int]int    // input id -> distinct keys
	repeats int
}

// NewService returns a service with no calls.
func NewService() *Service { return &Service{trials: map[int]*serviceTrial{}} }

func (s *Service) trial(t int) *serviceTrial {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.trials[t]
	if st == nil {
		st = &serviceTrial{calls: map[string]int{}, keysOf: map[int]int{}}
		s.trials[t] = st
	}
	return st
}

// Counts returns, for trial t, the number of distinct idempotency keys
// each input id's effect was asked for under (an effect applied once per
// key: more than one is a duplicate effect), and the calls that repeated
// a key (what a service ignoring the key would have applied twice).
func (s *Service) Counts(t int) (keysOf map[int]int, repeats int) {
	st := s.trial(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	keysOf = make(map[int]int, len(st.keysOf))
	for id, n := range st.keysOf {
		keysOf[id] = n
	}
	return keysOf, st.repeats
}

// Effects returns the number of effects applied in trial t so far (one
// per distinct idempotency key).
func (s *Service) Effects(t int) int {
	st := s.trial(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(st.calls)
}

// ServeHTTP serves POST /effect?trial=T&id=I[&delay=D] with an
// Idempotency-Key header: it sleeps D, counts the call and answers
// "done-I".
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	trial, err1 := strconv.Atoi(q.Get("trial"))
	id, err2 := strconv.Atoi(q.Get("id"))
	key := r.Header.Get("Idempotency-Key")
	if err1 != nil || err2 != nil || key == "" {
		http.Error(w, "want trial, id and an Idempotency-Key header", http.StatusBadRequest)
		return
	}
	if d, err := time.ParseDuration(q.Get("delay")); err == nil && d > 0 {
		time.Sleep(d)
	}
	st := s.trial(trial)
	s.mu.Lock()
	st.calls[key]++
	if st.calls[key] == 1 {
		st.keysOf[id]++
	} else {
		st.repeats++
	}
	s.mu.Unlock()
	fmt.Fprintf(w, "done-%d", id)
}
