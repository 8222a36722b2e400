package eventlog_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/watermark"
)

type question struct {
	User string `json:"user"`
	N    int    `json:"n"`
}

// logAgent: "ask" calls the model, counts the key's questions in
// short-term memory and sends a "check" event; "check" outputs the
// answer: a tree of two actions per input.
func logAgent() *agent.Agent {
	return &agent.Agent{
		Models: map[string]model.ChatModel{"llm": &model.Offline{Seed: 1}},
		Actions: []agent.Action{
			agent.NewAction("ask", func(c *agent.RunnerContext, ev agent.Event) error {
				q, err := agent.Input[question](ev)
				if err != nil {
					return err
				}
				resp, err := c.Chat("llm", model.Request{Messages: []model.Message{model.User("q" + strconv.Itoa(q.N))}})
				if err != nil {
					return err
				}
				n, _, _ := agent.Recall[int](c.ShortTerm(), "asked")
				if err := c.ShortTerm().Set("asked", n+1); err != nil {
					return err
				}
				return c.Send(agent.NewEvent("check", resp.Message.Content, nil))
			}, agent.TypeInput),
			agent.NewAction("check", func(c *agent.RunnerContext, ev agent.Event) error {
				s, err := agent.ValueAs[string](ev)
				if err != nil {
					return err
				}
				c.Output(s)
				return nil
			}, "check"),
		},
	}
}

func runLogged(t *testing.T, listeners ...agent.Listener) {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.Generate(env, "questions", 20, func(i int64) weir.Record[question] {
		return weir.Record[question]{Value: question{User: "u" + strconv.Itoa(int(i%4)), N: int(i)}, Timestamp: i}
	}, watermark.ForMonotonous[question]())
	out := agent.Apply[string, question, string](weir.KeyBy(src, func(q question) string { return q.User }), "assistant",
		logAgent(), agent.Options{Listeners: listeners})
	weir.Collect(out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
}

// wantKinds is the entries of one input, in order: the "ask" run (start,
// model call and result, end), then on applying it the memory update,
// then the "check" run and its output.
var wantKinds = []string{
	agent.LogActionStart, agent.LogModelCall, agent.LogModelResult, agent.LogActionEnd, agent.LogMemory,
	agent.LogActionStart, agent.LogActionEnd, agent.LogOutput,
}

// checkKey checks the entries of one key: five inputs, each with the
// entries of wantKinds in that order, sequence numbers 0..4.
func checkKey(t *testing.T, key string, es []agent.LogEntry) {
	t.Helper()
	if len(es) != 5*len(wantKinds) {
		t.Fatalf("key %s: %d entries, want %d: %v", key, len(es), 5*len(wantKinds), es)
	}
	for i, e := range es {
		seq, k := int64(i/len(wantKinds)), wantKinds[i%len(wantKinds)]
		if e.Key != key || e.Seq != seq || e.Kind != k || e.Replayed {
			t.Fatalf("key %s entry %d: %v; want seq %d kind %s", key, i, e, seq, k)
		}
		switch e.Kind {
		case agent.LogModelCall, agent.LogModelResult:
			if e.Name != "llm" || e.Action != "ask" || e.EventType != agent.TypeInput {
				t.Fatalf("entry %v", e)
			}
		case agent.LogMemory:
			if d, ok := e.Data.(map[string]any); !ok || d["asked"] != float64(seq+1) {
				t.Fatalf("memory entry %v", e)
			}
		case agent.LogOutput:
			if e.Action != "check" || e.EventType != "check" || !strings.Contains(e.Data.(string), "q") {
				t.Fatalf("output entry %v", e)
			}
		}
	}
}

// TestFileLog: every action's start, model call and result, memory update,
// output and end reach the JSON-lines file, per key in order; reading
// with a key returns that key's entries only.
func TestFileLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	w, err := eventlog.CreateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := 0
	count := agent.ListenerFunc(func(*agent.LogEntry) { mu.Lock(); seen++; mu.Unlock() })
	runLogged(t, w, count)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]agent.LogEntry{}
	err = eventlog.ReadFile(path, "", func(e agent.LogEntry) error {
		byKey[e.Key] = append(byKey[e.Key], e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(byKey) != 4 || seen != 20*len(wantKinds) {
		t.Fatalf("%d keys, %d entries seen by the second listener", len(byKey), seen)
	}
	for k, es := range byKey {
		checkKey(t, k, es)
	}
	var one []agent.LogEntry
	if err := eventlog.ReadFile(path, "u2", func(e agent.LogEntry) error { one = append(one, e); return nil }); err != nil {
		t.Fatal(err)
	}
	checkKey(t, "u2", one)
}

// TestKafkaLog: the same entries through a topic of the embedded broker.
func TestKafkaLog(t *testing.T) {
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopic("agent-log", 3, nil); err != nil {
		t.Fatal(err)
	}
	w, err := eventlog.NewKafkaWriter(b.Addrs(), "agent-log")
	if err != nil {
		t.Fatal(err)
	}
	runLogged(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	byKey := map[string][]agent.LogEntry{}
	if err := eventlog.ReadTopic(ctx, b.Addrs(), kafkasec.Security{}, "agent-log", "", func(e agent.LogEntry) error {
		byKey[e.Key] = append(byKey[e.Key], e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range byKey {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, []string{"u0", "u1", "u2", "u3"}) {
		t.Fatalf("keys %v", keys)
	}
	for k, es := range byKey {
		checkKey(t, k, es)
	}
}
