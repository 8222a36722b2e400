package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// chatServer speaks the OpenAI chat-completions wire format on 127.0.0.1:
// it counts requests, keeps their Idempotency-Key headers and bodies, and
// answers with what answer returns for the decoded request (a status and
// a body). A request waits at gate "request<n>" (n from 1) of g when g has
// it.
type chatServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	keys   []string
	bodies []map[string]any
	g      *gates
	answer func(n int, body map[string]any) (int, string)
}

func newChatServer(t *testing.T, g *gates, answer func(n int, body map[string]any) (int, string)) *chatServer {
	s := &chatServer{g: g, answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %s", b)
		}
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get(model.IdempotencyHeader))
		s.bodies = append(s.bodies, body)
		n, gs := len(s.keys), s.g
		s.mu.Unlock()
		if gs != nil {
			if err := gs.wait(r.Context(), fmt.Sprint("request", n)); err != nil {
				return
			}
		}
		status, reply := s.answer(n, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, reply)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *chatServer) setGates(g *gates) {
	s.mu.Lock()
	s.g = g
	s.mu.Unlock()
}

func (s *chatServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

func (s *chatServer) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func (s *chatServer) client() *model.OpenAIClient {
	return model.OpenAI(model.OpenAIConfig{BaseURL: s.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test",
		Retry: model.RetryPolicy{Attempts: 3, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}})
}

// chatReply is a chat-completions reply with text content, or with one
// call of tool name with arguments args when name is not "".
func chatReply(text, name, args string) string {
	msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
	finish := "stop"
	if name != "" {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}
		finish = "tool_calls"
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
		"model": "gpt-test-0613", "choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}})
	return string(b)
}

const serverError = `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`

// callsJob runs agent a with opts on the script, restoring from restore
// when it is not "", checkpointing into a fresh directory.
func callsJob[OUT any](t *testing.T, a *Agent, opts Options, restore string, steps ...step[msg]) (*weir.Environment, *recorder[OUT]) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), RestoreFrom: restore}})
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]()).UID("src")
	out := Apply[string, msg, OUT](weir.KeyBy(src, keyOfMsg), "agent", a, opts).UID("agent")
	return env, record(out)
}

// restoreAndRun runs the agent again from checkpoint cp on the same
// script, to its end.
func restoreAndRun[OUT any](t *testing.T, ctx context.Context, a *Agent, opts Options, cp string, steps ...step[msg]) ([]OUT, *runtime.Metrics) {
	t.Helper()
	done := make(chan struct{})
	close(done)
	env, rc := callsJob[OUT](t, a, opts, cp, append(steps, pause[msg](done))...)
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	return values(evs), env.Metrics()
}

// TestChatDurableByDefault: with a store, a model call made by Chat is
// recorded; the OpenAI client sends the call's idempotency key (derived
// from the run and the call's position) on every attempt; the re-run after
// a restore gets the recorded reply, usage and all, without a request. With
// NonDurableCalls the call is made again and carries no key.
func TestChatDurableByDefault(t *testing.T) {
	for _, nonDurable := range []bool{false, true} {
		t.Run(fmt.Sprintf("NonDurableCalls=%v", nonDurable), func(t *testing.T) {
			ctx := testCtx(t)
			srv := newChatServer(t, nil, func(n int, _ map[string]any) (int, string) {
				if n == 1 {
					return 500, serverError // retried by the client
				}
				return 200, chatReply(fmt.Sprint("answer ", n), "", "")
			})
			var mu sync.Mutex
			var ids []RunID
			var replies []model.Response
			var g *gates
			a := &Agent{Models: map[string]model.ChatModel{"m": srv.client()},
				Actions: []Action{NewAction("ask", func(c *RunnerContext, ev Event) error {
					in, _ := Input[msg](ev)
					resp, err := c.Chat("m", model.Request{Messages: []model.Message{model.User(in.Text)}})
					if err != nil {
						return err
					}
					id, err := c.RunID()
					if err != nil {
						return err
					}
					mu.Lock()
					ids, replies = append(ids, id), append(replies, *resp)
					mu.Unlock()
					if err := g.wait(c.Context(), "hang"); err != nil { // the crash comes here
						return err
					}
					c.Output(resp.Message.Content)
					return nil
				}, TypeInput)}}
			opts := Options{Store: NewMemoryStore().Factory(), NonDurableCalls: nonDurable}
			input := rec(msg{Key: "A", Text: "capital of France?"}, 1)

			g = newGates("hang")
			env, _ := callsJob[string](t, a, opts, "", input, pause[msg](make(chan struct{})))
			cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "hang") }, func() {})
			if srv.requests() != 2 {
				t.Fatalf("%d requests before the crash, want 2 (a 500 and its retry)", srv.requests())
			}
			want := idempotencyKey(ids[0], 0, "chat:m")
			if h := srv.headers(); nonDurable && (h[0] != "" || h[1] != "") {
				t.Fatalf("a non-durable call sent idempotency keys %q", h)
			} else if !nonDurable && (h[0] != want || h[1] != want) {
				t.Fatalf("Idempotency-Key headers %q, want %q on both attempts", h, want)
			}

			// Tokens are counted per model (the 500 was retried inside the
			// client: one call).
			if bm := env.Metrics(); modelMetric(bm, "modelCalls", "m") != 1 || modelMetric(bm, "modelInputTokens", "m") != 31 ||
				modelMetric(bm, "modelOutputTokens", "m") != 7 {
				t.Fatalf("model counters before the crash: %+v", bm.Snapshot())
			}

			g = newGates()
			got, m := restoreAndRun[string](t, ctx, a, opts, cp, input)
			if nonDurable {
				if srv.requests() != 3 || !reflect.DeepEqual(got, []string{"answer 3"}) {
					t.Fatalf("non-durable: %d requests (want 3), outputs %q", srv.requests(), got)
				}
				if modelMetric(m, "modelInputTokens", "m") != 31 {
					t.Fatalf("the call made again was not counted: %+v", m.Snapshot())
				}
				return
			}
			if modelMetric(m, "modelCalls", "m") != 0 || modelMetric(m, "modelInputTokens", "m") != 0 {
				t.Fatalf("the replayed call was counted: %+v", m.Snapshot())
			}
			if srv.requests() != 2 {
				t.Fatalf("the restored run made %d requests, want none", srv.requests()-2)
			}
			if !reflect.DeepEqual(got, []string{"answer 2"}) || m.Sum("agent", "callsReplayed") != 1 {
				t.Fatalf("outputs %q, callsReplayed %d", got, m.Sum("agent", "callsReplayed"))
			}
			if len(replies) != 2 || !reflect.DeepEqual(replies[0], replies[1]) || replies[1].Usage.PromptTokens != 31 {
				t.Fatalf("the replayed reply differs from the recorded one:\n%+v", replies)
			}
			if !ids[0].Equal(ids[1]) {
				t.Fatalf("run ids differ: %v %v", ids[0], ids[1])
			}
		})
	}
}

// TestChatDivergence: a re-run whose request differs from the one recorded
// at its position is a divergence: the model is called live.
func TestChatDivergence(t *testing.T) {
	ctx := testCtx(t)
	srv := newChatServer(t, nil, func(n int, body map[string]any) (int, string) {
		msgs := body["messages"].([]any)
		return 200, chatReply("re: "+msgs[0].(map[string]any)["content"].(string), "", "")
	})
	var prompt atomic.Value
	prompt.Store("first")
	var g *gates
	a := &Agent{Models: map[string]model.ChatModel{"m": srv.client()},
		Actions: []Action{NewAction("ask", func(c *RunnerContext, ev Event) error {
			resp, err := c.Chat("m", model.Request{Messages: []model.Message{model.User(prompt.Load().(string))}})
			if err != nil {
				return err
			}
			if err := g.wait(c.Context(), "hang"); err != nil {
				return err
			}
			c.Output(resp.Message.Content)
			return nil
		}, TypeInput)}}
	opts := Options{Store: NewMemoryStore().Factory()}
	input := rec(msg{Key: "A"}, 1)
	g = newGates("hang")
	env, _ := callsJob[string](t, a, opts, "", input, pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "hang") }, func() {})

	prompt.Store("second")
	g = newGates()
	got, m := restoreAndRun[string](t, ctx, a, opts, cp, input)
	if !reflect.DeepEqual(got, []string{"re: second"}) || srv.requests() != 2 {
		t.Fatalf("outputs %q after %d requests, want the live reply after 2", got, srv.requests())
	}
	if m.Sum("agent", "divergences") != 1 || m.Sum("agent", "callsReplayed") != 0 {
		t.Fatalf("divergences %d (want 1), callsReplayed %d (want 0)", m.Sum("agent", "divergences"), m.Sum("agent", "callsReplayed"))
	}
}

// mcpMailer is an MCP server (official SDK, in memory) with a tool "email"
// that counts its calls and keeps the idempotency key of each from the
// request's _meta; it reports a tool error (IsError) for the address
// "nobody".
type mcpMailer struct {
	mu    sync.Mutex
	keys  []any
	calls atomic.Int64
}

func (m *mcpMailer) connect(t *testing.T, ctx context.Context) *tool.MCPClient {
	type emailArgs struct {
		To string `json:"to"`
	}
	type emailResult struct {
		ID string `json:"id"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mailer", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "email", Description: "Sends an email"}, func(_ context.Context, req *mcp.CallToolRequest, in emailArgs) (*mcp.CallToolResult, emailResult, error) {
		n := m.calls.Add(1)
		m.mu.Lock()
		m.keys = append(m.keys, req.Params.Meta[tool.MCPIdempotencyMetaKey])
		m.mu.Unlock()
		if in.To == "nobody" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such mailbox"}}}, emailResult{}, nil
		}
		return nil, emailResult{ID: fmt.Sprint("mail-", n)}, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tool.ConnectMCP(ctx, ct, "mailer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); ss.Close() })
	return c
}

// TestToolCallsDurableByDefault: with a store, tool calls made by CallTool
// are recorded: a Go tool gets the call's idempotency key in its context,
// an MCP tool in the request's _meta; the re-run after a restore gets the
// recorded results (structured content and IsError included) without
// calling either tool again.
func TestToolCallsDurableByDefault(t *testing.T) {
	ctx := testCtx(t)
	type chargeArgs struct {
		Amount int `json:"amount"`
	}
	type receipt struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	var charges atomic.Int64
	var chargeKeys []string
	charge := tool.MustFunc("charge", "Charges the customer", func(ctx context.Context, a chargeArgs) (receipt, error) {
		key, ok := tool.IdempotencyKey(ctx)
		if !ok {
			return receipt{}, errors.New("no idempotency key")
		}
		chargeKeys = append(chargeKeys, key)
		return receipt{ID: fmt.Sprint("r", charges.Add(1)), Amount: a.Amount}, nil
	})
	mailer := &mcpMailer{}
	tools := append([]tool.Tool{charge}, mailer.connect(t, ctx).Tools()...)
	var mu sync.Mutex
	var ids []RunID
	var results [][]tool.Result
	var g *gates
	a := &Agent{Tools: tools, Actions: []Action{NewAction("pay", func(c *RunnerContext, ev Event) error {
		var rs []tool.Result
		for _, call := range []struct{ name, args string }{
			{"charge", `{"amount": 42}`}, {"email", `{"to":"ann"}`}, {"email", `{"to":"nobody"}`},
		} {
			r, err := c.CallTool(call.name, json.RawMessage(call.args))
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		id, err := c.RunID()
		if err != nil {
			return err
		}
		mu.Lock()
		ids, results = append(ids, id), append(results, rs)
		mu.Unlock()
		if err := g.wait(c.Context(), "hang"); err != nil {
			return err
		}
		c.Output(fmt.Sprintf("%s | %s | %s %v", rs[0].Structured, rs[1].Content, rs[2].Content, rs[2].IsError))
		return nil
	}, TypeInput)}}
	opts := Options{Store: NewMemoryStore().Factory()}
	input := rec(msg{Key: "A"}, 1)
	g = newGates("hang")
	env, _ := callsJob[string](t, a, opts, "", input, pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "hang") }, func() {})
	if charges.Load() != 1 || mailer.calls.Load() != 2 {
		t.Fatalf("before the crash: %d charges, %d emails", charges.Load(), mailer.calls.Load())
	}
	id := ids[0]
	if len(chargeKeys) != 1 || chargeKeys[0] != idempotencyKey(id, 0, "tool:charge") {
		t.Fatalf("the Go tool got keys %q, want [%s]", chargeKeys, idempotencyKey(id, 0, "tool:charge"))
	}
	wantMeta := []any{idempotencyKey(id, 1, "tool:email"), idempotencyKey(id, 2, "tool:email")}
	if !reflect.DeepEqual(mailer.keys, wantMeta) {
		t.Fatalf("the MCP server saw _meta keys %v, want %v", mailer.keys, wantMeta)
	}

	g = newGates()
	got, m := restoreAndRun[string](t, ctx, a, opts, cp, input)
	if charges.Load() != 1 || mailer.calls.Load() != 2 {
		t.Fatalf("after the restore: %d charges, %d emails (want 1 and 2: replayed)", charges.Load(), mailer.calls.Load())
	}
	want := []string{`{"id":"r1","amount":42} | {"id":"mail-1"} | no such mailbox true`}
	if !reflect.DeepEqual(got, want) || m.Sum("agent", "callsReplayed") != 3 {
		t.Fatalf("outputs %q, callsReplayed %d (want %q, 3)", got, m.Sum("agent", "callsReplayed"), want)
	}
	if len(results) != 2 || !reflect.DeepEqual(results[0], results[1]) {
		t.Fatalf("replayed results differ from the recorded ones:\n%+v", results)
	}
}

// failOnceStore is a MemoryStore whose first Put of a completed state of
// action fails: the process dies after the action's calls were recorded,
// before the action was.
type failOnceStore struct {
	*MemoryStore
	action string
	failed atomic.Bool
}

func (s *failOnceStore) Put(st *ActionState) error {
	if st.Completed && st.ID.Action == s.action && s.failed.CompareAndSwap(false, true) {
		return errors.New("simulated crash")
	}
	return s.MemoryStore.Put(st)
}

func (s *failOnceStore) Close() error { return nil }

func (s *failOnceStore) factory() StoreFactory {
	return func(*runtime.Context) (ActionStateStore, error) { return s, nil }
}

// TestReActDurableByDefault: a ReAct run (OpenAI client over HTTP, a Go
// tool) that crashes mid-run, after a model or tool call was recorded but
// before its action was, resumes from the checkpoint taken during its first
// model call: the calls recorded before the crash are replayed and only the
// missing ones are made.
func TestReActDurableByDefault(t *testing.T) {
	for _, crashIn := range []string{"react.chat", "react.tool"} {
		t.Run(crashIn, func(t *testing.T) {
			ctx := testCtx(t)
			srv := newChatServer(t, newGates("request1"), func(n int, body map[string]any) (int, string) {
				for _, m := range body["messages"].([]any) {
					if m.(map[string]any)["role"] == "tool" {
						return 200, chatReply("2 + 3 = "+m.(map[string]any)["content"].(string), "", "")
					}
				}
				return 200, chatReply("", "sum", `{"a":2,"b":3}`)
			})
			var sums atomic.Int64
			var sumKeys sync.Map
			sum := tool.MustFunc("sum", "Adds two integers", func(ctx context.Context, a sumArgs) (int, error) {
				sums.Add(1)
				k, _ := tool.IdempotencyKey(ctx)
				sumKeys.Store(k, true)
				return a.A + a.B, nil
			})
			a := ReAct(srv.client(), []tool.Tool{sum}, ReActOptions{Prompt: textPrompt})
			store := &failOnceStore{MemoryStore: NewMemoryStore(), action: crashIn}
			opts := Options{Store: store.factory()}
			input := rec(msg{Key: "A", Text: "add 2 and 3"}, 1)

			env, _ := callsJob[ReActAnswer](t, a, opts, "", input, pause[msg](make(chan struct{})))
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			srv.g.waitArrived(t, ctx, "request1")
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, cp, err := job.TriggerCheckpoint(cctx) // during the first model call
			cancel()
			if err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			srv.g.release("request1")
			if err := job.Wait(); err == nil || !strings.Contains(err.Error(), "simulated crash") {
				t.Fatalf("the job ended with %v, want the simulated crash", err)
			}
			models, tools := srv.requests(), sums.Load()
			wantTools := int64(0)
			if crashIn == "react.tool" {
				wantTools = 1
			}
			if models != 1 || tools != wantTools {
				t.Fatalf("before the crash: %d model calls, %d tool calls", models, tools)
			}

			srv.setGates(nil)
			got, m := restoreAndRun[ReActAnswer](t, ctx, a, opts, cp, input)
			if len(got) != 1 || !got[0].Complete || got[0].Answer != "2 + 3 = 5" || got[0].Steps != 2 || got[0].ToolCalls != 1 {
				t.Fatalf("answers %+v", got)
			}
			if srv.requests() != 2 || sums.Load() != 1 {
				t.Fatalf("%d model calls, %d tool calls in all; want 2 and 1 (each made once)", srv.requests(), sums.Load())
			}
			if n := m.Sum("agent", "callsReplayed"); n != 1 {
				t.Fatalf("callsReplayed = %d, want 1 (the %s call recorded before the crash)", n, crashIn)
			}
			keys := srv.headers()
			if keys[0] == "" || keys[1] == "" || keys[0] == keys[1] {
				t.Fatalf("model calls' idempotency keys %q: want two distinct keys", keys)
			}
			var seen []string
			sumKeys.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
			if len(seen) != 1 || seen[0] == "" {
				t.Fatalf("the tool saw the keys %q, want one", seen)
			}
		})
	}
}

// TestKeysWithoutStore: without a store, Durable calls are not recorded
// but each gets the idempotency key of its position (not one key for all);
// tool calls are plain calls, without a key.
func TestKeysWithoutStore(t *testing.T) {
	var keys []string
	echo := tool.MustFunc("echo", "Echoes", func(ctx context.Context, _ struct{}) (string, error) {
		k, ok := tool.IdempotencyKey(ctx)
		if ok {
			return "", fmt.Errorf("a plain tool call got key %q", k)
		}
		return "plain", nil
	})
	var id RunID
	a := &Agent{Tools: []tool.Tool{echo}, Actions: []Action{NewAction("twice", func(c *RunnerContext, ev Event) error {
		for range 2 {
			if _, err := Durable(c, "call", nil, func(_ context.Context, key string) (int, error) {
				keys = append(keys, key)
				return 0, nil
			}); err != nil {
				return err
			}
		}
		r, err := c.CallTool("echo", nil)
		if err != nil || r.IsError {
			return fmt.Errorf("tool call: %+v %v", r, err)
		}
		id, err = c.RunID()
		return err
	}, TypeInput)}}
	if _, _, err := runAgent[string](t, a, Options{}, rec(msg{Key: "A"}, 1)); err != nil {
		t.Fatal(err)
	}
	want := []string{idempotencyKey(id, 0, "call"), idempotencyKey(id, 1, "call")}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
}
