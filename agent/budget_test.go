package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// TestBudgetNeverExceeded is the ledger's property (B1, B2): under random
// budgets (per key, per model, per job) and random sequences of calls
// (keys, models, token counts) and clock advances, no window of any
// budget ever holds more requests than its limit, nor more tokens than its
// limit plus the tokens of one call; and a call is refused only when a
// budget covering it is spent. The test keeps its own count of every
// window's spend to check the ledger against.
func TestBudgetNeverExceeded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		models := []string{"big", "small"}
		var bs []Budget
		for i := range rapid.IntRange(1, 4).Draw(t, "budgets") {
			b := Budget{Name: fmt.Sprintf("b%d", i),
				Scope:  rapid.SampledFrom([]BudgetScope{BudgetPerKey, BudgetPerModel, BudgetPerJob}).Draw(t, "scope"),
				Tokens: rapid.Int64Range(0, 500).Draw(t, "tokens"), Requests: rapid.Int64Range(0, 6).Draw(t, "requests"),
				Window: time.Duration(rapid.IntRange(1, 10).Draw(t, "window")) * time.Second}
			if b.Tokens == 0 && b.Requests == 0 {
				b.Requests = 1
			}
			if rapid.Bool().Draw(t, "oneModel") {
				b.Models = []string{rapid.SampledFrom(models).Draw(t, "model")}
			}
			bs = append(bs, b)
		}
		clk := clock.NewManual(time.UnixMilli(rapid.Int64Range(0, 1e12).Draw(t, "start")))
		l := newBudgets(bs, models, 1, clk, nil)
		type win struct {
			budget int
			part   string
			start  int64
		}
		spentTokens, spentReqs := map[win]int64{}, map[win]int64{}
		winOf := func(i int, key, m string) win {
			b := bs[i]
			part := ""
			switch b.Scope {
			case BudgetPerKey:
				part = key
			case BudgetPerModel:
				part = m
			}
			now, w := clk.Now().UnixMilli(), b.Window.Milliseconds()
			return win{i, part, now - now%w}
		}
		covers := func(b Budget, m string) bool { return len(b.Models) == 0 || slices.Contains(b.Models, m) }
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.IntRange(0, 5).Draw(t, "op") == 0 {
				clk.Advance(time.Duration(rapid.IntRange(1, 4000).Draw(t, "advance")) * time.Millisecond)
				continue
			}
			key := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "key")
			m := rapid.SampledFrom(models).Draw(t, "model")
			tokens := rapid.Int64Range(0, 300).Draw(t, "callTokens")
			spent := false
			for i, b := range bs {
				w := winOf(i, key, m)
				if covers(b, m) && (b.Requests > 0 && spentReqs[w] >= b.Requests || b.Tokens > 0 && spentTokens[w] >= b.Tokens) {
					spent = true
				}
			}
			a, err := l.admit(context.Background(), []byte(key), 0, m)
			if err != nil {
				var be *BudgetError
				if !errors.As(err, &be) || !spent {
					t.Fatalf("call %s/%s refused (%v) though no budget covering it is spent", key, m, err)
				}
				continue
			}
			if spent {
				t.Fatalf("call %s/%s let through though a budget covering it is spent", key, m)
			}
			l.charge(&a, tokens)
			for i, b := range bs {
				if !covers(b, m) {
					continue
				}
				w := winOf(i, key, m)
				spentReqs[w]++
				spentTokens[w] += tokens
				if b.Requests > 0 && spentReqs[w] > b.Requests {
					t.Fatalf("budget %s window %v: %d requests, limit %d", b.Name, w, spentReqs[w], b.Requests)
				}
				if b.Tokens > 0 && spentTokens[w]-tokens >= b.Tokens {
					t.Fatalf("budget %s window %v: %d tokens, limit %d plus one call's %d", b.Name, w, spentTokens[w], b.Tokens, tokens)
				}
			}
		}
	})
}

// tokenModel answers "re:<prompt>" reporting a fixed number of prompt and
// completion tokens, and counts its calls.
type tokenModel struct {
	name   string
	tokens int
	calls  atomic.Int64
	// block, when set, makes calls with that prompt wait for the context.
	block string
}

func (m *tokenModel) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	m.calls.Add(1)
	p := lastUser(req)
	if m.block != "" && p == m.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &model.Response{Message: model.Assistant(m.name + ":" + p),
		Usage: model.Usage{PromptTokens: m.tokens / 2, CompletionTokens: m.tokens - m.tokens/2}}, nil
}

// budgetAgent answers each input with one call to model "big".
func budgetAgent(models map[string]model.ChatModel) *Agent {
	return &Agent{Models: models, Actions: []Action{NewAction("chat", func(c *RunnerContext, ev Event) error {
		in, err := Input[msg](ev)
		if err != nil {
			return err
		}
		resp, err := c.Chat("big", model.Request{Messages: []model.Message{model.User(in.Text)}})
		if err != nil {
			return err
		}
		c.Output(resp.Message.Content)
		return nil
	}, TypeInput)}}
}

// runBudgetJob runs inputs through budgetAgent with the budgets and returns
// the outputs, the failed inputs' keys, texts and reasons, and the
// metrics.
func runBudgetJob(t *testing.T, models map[string]model.ChatModel, bs []Budget, inputs ...msg) ([]string, []string, *runtime.Metrics) {
	t.Helper()
	tag := weir.NewOutputTag[FailedInput]("failed")
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	var steps []step[msg]
	for i, in := range inputs {
		steps = append(steps, rec(in, int64(i+1)))
	}
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]())
	out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", budgetAgent(models), Options{ContinueOnError: true, FailedInputs: tag, Budgets: bs})
	rc := record(out)
	var mu sync.Mutex
	var failed []runtime.Record[FailedInput]
	weir.Transform(weir.SideOutput(out, tag), "failed", func() runtime.OneInputOperator[FailedInput, struct{}] {
		return &failedSink{mu: &mu, got: &failed}
	})
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := values(rc.events)
	slices.Sort(got)
	var fails []string
	for _, r := range failed {
		in, _ := r.Value.Input.(msg)
		if !errors.Is(r.Value.Err, ErrBudgetExceeded) {
			t.Fatalf("failed input %s: %v, want a budget error", in.Text, r.Value.Err)
		}
		fails = append(fails, in.Text+" "+r.Value.Reason())
	}
	slices.Sort(fails)
	return got, fails, env.Metrics()
}

// TestBudgetFailsToDeadLetters: a per-key budget of 250 tokens a day lets
// a key's calls through while its spend is below 250 (the third call
// crosses it: 300) and fails the next one, whose input goes to the
// FailedInputs with a reason naming the budget; another key has its own
// budget. The spend is exported per budget.
func TestBudgetFailsToDeadLetters(t *testing.T) {
	big := &tokenModel{name: "big", tokens: 100}
	bs := []Budget{{Name: "per-user", Tokens: 250, Window: 24 * time.Hour}}
	got, fails, m := runBudgetJob(t, map[string]model.ChatModel{"big": big}, bs,
		msg{Key: "A", Text: "a1"}, msg{Key: "A", Text: "a2"}, msg{Key: "A", Text: "a3"}, msg{Key: "A", Text: "a4"}, msg{Key: "B", Text: "b1"})
	if want := []string{"big:a1", "big:a2", "big:a3", "big:b1"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if len(fails) != 1 || !strings.HasPrefix(fails[0], "a4 ") || !strings.Contains(fails[0], `budget "per-user" spent`) {
		t.Fatalf("failed inputs %q, want a4's naming budget per-user", fails)
	}
	if n := big.calls.Load(); n != 4 {
		t.Fatalf("%d model calls, want 4 (a4's refused before the call)", n)
	}
	if n := m.Sum("agent", MetricBudgetSpentTokens); n != 400 {
		t.Fatalf("%s = %d, want 400", MetricBudgetSpentTokens, n)
	}
	if n := m.Sum("agent", MetricBudgetRejected); n != 1 {
		t.Fatalf("%s = %d, want 1", MetricBudgetRejected, n)
	}
}

// TestBudgetFallsBack: past a per-job request budget of model big, calls
// go to model small, which has a budget of its own that fails.
func TestBudgetFallsBack(t *testing.T) {
	big := &tokenModel{name: "big", tokens: 10}
	small := &tokenModel{name: "small", tokens: 1}
	bs := []Budget{
		{Name: "big-per-job", Scope: BudgetPerJob, Models: []string{"big"}, Requests: 2, Window: time.Hour, OnLimit: BudgetFallback, Fallback: "small"},
		{Name: "small-per-job", Scope: BudgetPerModel, Models: []string{"small"}, Requests: 2, Window: time.Hour},
	}
	got, fails, m := runBudgetJob(t, map[string]model.ChatModel{"big": big, "small": small}, bs,
		msg{Key: "A", Text: "1"}, msg{Key: "A", Text: "2"}, msg{Key: "A", Text: "3"}, msg{Key: "A", Text: "4"}, msg{Key: "A", Text: "5"})
	if want := []string{"big:1", "big:2", "small:3", "small:4"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if len(fails) != 1 || !strings.HasPrefix(fails[0], "5 ") || !strings.Contains(fails[0], "small-per-job") {
		t.Fatalf("failed inputs %q, want 5's naming small-per-job", fails)
	}
	if n := m.Sum("agent", MetricBudgetFallbacks); n != 3 {
		t.Fatalf("%s = %d, want 3 (calls 3, 4, 5)", MetricBudgetFallbacks, n)
	}
	if n := m.Sum("agent", MetricModelCalls); n != 4 {
		t.Fatalf("%s = %d, want 4 (the fallback's calls counted under its name)", MetricModelCalls, n)
	}
}

// TestBudgetWaitsForTheNextWindow: with OnLimit wait, the call past a
// budget waits until the window rolls over on the job's clock, then goes
// through: nothing fails, every input is answered, and the wait is
// counted. The window is short on the real clock; nothing here asserts a
// time.
func TestBudgetWaitsForTheNextWindow(t *testing.T) {
	big := &tokenModel{name: "big", tokens: 1}
	bs := []Budget{{Name: "per-key", Requests: 1, Window: 50 * time.Millisecond, OnLimit: BudgetWait}}
	got, fails, m := runBudgetJob(t, map[string]model.ChatModel{"big": big}, bs, msg{Key: "A", Text: "1"}, msg{Key: "A", Text: "2"}, msg{Key: "A", Text: "3"})
	if want := []string{"big:1", "big:2", "big:3"}; !slices.Equal(got, want) || len(fails) != 0 {
		t.Fatalf("outputs %v, failed %v; want %v and none failed", got, fails, want)
	}
	if n := m.Sum("agent", MetricBudgetWaits); n < 1 {
		t.Fatalf("%s = %d, want at least 1", MetricBudgetWaits, n)
	}
}

// TestBudgetOptionsValidated: bad budgets are refused with errors that say
// what to change, before the job starts.
func TestBudgetOptionsValidated(t *testing.T) {
	err := Options{Budgets: []Budget{
		{Name: "", Tokens: 1, Window: time.Hour},
		{Name: "x", Scope: "user", Window: time.Hour},
		{Name: "x", Requests: 1, OnLimit: "retry"},
		{Name: "y", Requests: 1, Window: time.Hour, OnLimit: BudgetFallback, Models: []string{"a"}, Fallback: "a"},
	}}.Validate()
	for _, want := range []string{"Name is empty", `Scope "user": want key (the default), model or job`, "want a positive Tokens, Requests or both",
		`Name "x" is used twice`, "Window 0s: want a positive duration", `OnLimit "retry": want fail (the default), wait or fallback`, "would fall back to itself"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	def, cerr := compile(budgetAgent(map[string]model.ChatModel{"big": &tokenModel{}}))
	if cerr != nil {
		t.Fatal(cerr)
	}
	if err := validateBudgetModels([]Budget{{Name: "b", Models: []string{"gpt"}, Fallback: "tiny"}}, def); err == nil ||
		!strings.Contains(err.Error(), `Models "gpt" is not a model of the agent; its models are [big]`) || !strings.Contains(err.Error(), `Fallback "tiny"`) {
		t.Fatalf("validateBudgetModels = %v", err)
	}
}

// budgetRestoreJob runs key A's inputs through budgetAgent under a per-key
// budget of 3 requests a day, pausing after the first two until end is
// closed; restore names the checkpoint to start from.
func budgetRestoreJob(a *Agent, dir, restore string, end <-chan struct{}, opts Options, before, after []string) (*weir.Environment, *recorder[string], *[]runtime.Record[FailedInput]) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
	var steps []step[msg]
	ts := int64(1)
	for _, s := range before {
		steps = append(steps, rec(msg{Key: "A", Text: s}, ts))
		ts++
	}
	steps = append(steps, pause[msg](end))
	for _, s := range after {
		steps = append(steps, rec(msg{Key: "A", Text: s}, ts))
		ts++
	}
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]()).UID("src")
	tag := weir.NewOutputTag[FailedInput]("failed")
	opts.ContinueOnError, opts.FailedInputs = true, tag
	opts.Budgets = []Budget{{Name: "per-user", Requests: 3, Window: 24 * time.Hour}}
	out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, opts).UID("agent")
	var mu sync.Mutex
	var failed []runtime.Record[FailedInput]
	weir.Transform(weir.SideOutput(out, tag), "failed", func() runtime.OneInputOperator[FailedInput, struct{}] {
		return &failedSink{mu: &mu, got: &failed}
	})
	return env, record(out), &failed
}

// TestBudgetSpendSurvivesRestore: the spend of a per-key budget is in the
// checkpoint. Two calls before it, a restore, then the third input is let
// through and the fourth refused: a restore that reset the budget would
// let both through.
func TestBudgetSpendSurvivesRestore(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "checkpoints")
	m1 := &tokenModel{name: "big", tokens: 10}
	env, rc, _ := budgetRestoreJob(budgetAgent(map[string]model.ChatModel{"big": m1}), dir, "", make(chan struct{}), Options{}, []string{"1", "2"}, nil)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.waitFor(t, ctx, "2's output", hasValue("big:2"))
	_, cpDir, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()

	done := make(chan struct{})
	close(done)
	m2 := &tokenModel{name: "big", tokens: 10}
	env2, rc2, failed := budgetRestoreJob(budgetAgent(map[string]model.ChatModel{"big": m2}), filepath.Join(t.TempDir(), "cp2"), cpDir, done, Options{}, []string{"1", "2"}, []string{"3", "4"})
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(rc2.events); !slices.Equal(got, []string{"big:3"}) {
		t.Fatalf("outputs after the restore %v, want [big:3]", got)
	}
	if len(*failed) != 1 || !errors.Is((*failed)[0].Value.Err, ErrBudgetExceeded) {
		t.Fatalf("failed inputs after the restore %+v, want 4's, refused by the budget", *failed)
	}
	if n := m2.calls.Load(); n != 1 {
		t.Fatalf("%d calls after the restore, want 1", n)
	}
}

// holdingAgent calls model "big" and outputs the reply, after waiting
// for hold to close when the reply is big:2 (entered is closed then): the
// action is unfinished with its call made.
func holdingAgent(m model.ChatModel, hold <-chan struct{}, entered chan<- struct{}) *Agent {
	return &Agent{Models: map[string]model.ChatModel{"big": m}, Actions: []Action{
		NewAction("chat", func(c *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			resp, err := c.Chat("big", model.Request{Messages: []model.Message{model.User(in.Text)}})
			if err != nil {
				return err
			}
			if s := resp.Message.Content; s == "big:2" {
				if entered != nil {
					close(entered)
				}
				select {
				case <-hold:
				case <-c.Context().Done():
					return c.Context().Err()
				}
			}
			c.Output(resp.Message.Content)
			return nil
		}, TypeInput),
	}}
}

// TestBudgetReplayedCallsNotChargedTwice: with an action-state store, a
// call made before a checkpoint (recorded, its action unfinished) is
// replayed after the restore, not made and not
// charged again: under a budget of 3 requests, inputs 1 and 2 spent 2
// before the checkpoint, so after it input 3 goes through and 4 is
// refused. Charging the replay would refuse 3.
func TestBudgetReplayedCallsNotChargedTwice(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	m1 := &tokenModel{name: "big", tokens: 10}
	entered := make(chan struct{})
	env, _, _ := budgetRestoreJob(holdingAgent(m1, make(chan struct{}), entered), filepath.Join(t.TempDir(), "cp"), "", make(chan struct{}),
		Options{Store: store.Factory()}, []string{"1", "2"}, nil)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("input 2 did not reach its hold")
	}
	_, cpDir, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()

	done := make(chan struct{})
	close(done)
	m2 := &tokenModel{name: "big", tokens: 10}
	env2, rc2, failed := budgetRestoreJob(holdingAgent(m2, done, nil), filepath.Join(t.TempDir(), "cp2"), cpDir, done,
		Options{Store: store.Factory()}, []string{"1", "2"}, []string{"3", "4"})
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	got := values(rc2.events)
	slices.Sort(got)
	if !slices.Equal(got, []string{"big:2", "big:3"}) {
		t.Fatalf("outputs after the restore %v, want [big:2 big:3] (2 replayed, 3 let through)", got)
	}
	if len(*failed) != 1 || !errors.Is((*failed)[0].Value.Err, ErrBudgetExceeded) {
		t.Fatalf("failed inputs after the restore %+v, want 4's, refused by the budget", *failed)
	}
	if n := m2.calls.Load(); n != 1 {
		t.Fatalf("%d calls after the restore, want 1 (3; 2's replayed)", n)
	}
}

// BenchmarkBudgetCheck is the cost a budget adds to a model call: the
// same call (a model that answers at once, reporting 100 tokens) without
// budgets, behind one per-key budget (1,000 keys in turn), and behind a
// per-key, a per-model and a per-job budget; serial and from 8 goroutines
// at once (the action workers of one subtask share the ledger's lock).
func BenchmarkBudgetCheck(b *testing.B) {
	m := model.Func(func(context.Context, model.Request) (*model.Response, error) {
		return &model.Response{Usage: model.Usage{PromptTokens: 60, CompletionTokens: 40}}, nil
	})
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user-%d", i)
	}
	const huge = 1 << 60
	cases := []struct {
		name string
		bs   []Budget
	}{
		{"none", nil},
		{"per-key", []Budget{{Name: "k", Tokens: huge, Window: 24 * time.Hour}}},
		{"key+model+job", []Budget{{Name: "k", Tokens: huge, Window: 24 * time.Hour},
			{Name: "m", Scope: BudgetPerModel, Requests: huge, Window: time.Minute},
			{Name: "j", Scope: BudgetPerJob, Tokens: huge, Window: time.Hour}}},
	}
	req := model.Request{Messages: []model.Message{model.User("hi")}}
	for _, c := range cases {
		b.Run(c.name+"/serial", func(b *testing.B) {
			l := newBudgets(c.bs, []string{"big"}, 1, clock.Real, nil)
			rcs := make([]*RunnerContext, len(keys))
			ms := make([]model.ChatModel, len(keys))
			for i := range keys {
				rcs[i] = &RunnerContext{bkey: keys[i]}
				ms[i] = m
				if l != nil {
					ms[i] = l.guard(rcs[i], "big", m, nil)
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := ms[i%len(ms)].Chat(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel8", func(b *testing.B) {
			l := newBudgets(c.bs, []string{"big"}, 1, clock.Real, nil)
			var next atomic.Int64
			ctx := context.Background()
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				var cm model.ChatModel = m
				if l != nil {
					cm = l.guard(&RunnerContext{bkey: keys[i%len(keys)]}, "big", m, nil)
				}
				for pb.Next() {
					if _, err := cm.Chat(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestBudgetWaitOnTheJobClock: a call past a BudgetWait budget waits on
// the job's clock until its window rolls over, then is let through; a
// wait whose context ends fails with a BudgetError wrapping the context's
// error.
func TestBudgetWaitOnTheJobClock(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(10_500))
	l := newBudgets([]Budget{{Name: "w", Requests: 1, Window: time.Second, OnLimit: BudgetWait}}, []string{"big"}, 1, clk, nil)
	if _, err := l.admit(context.Background(), []byte("A"), 0, "big"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.admit(context.Background(), []byte("A"), 0, "big")
		done <- err
	}()
	for l.metrics[0].waits.Value() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the call went through before the window rolled over: %v", err)
	default:
	}
	clk.Set(time.UnixMilli(11_000))
	if err := <-done; err != nil {
		t.Fatalf("after the window rolled over: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for l.metrics[0].waits.Value() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := l.admit(ctx, []byte("A"), 0, "big")
	if !errors.Is(err, ErrBudgetExceeded) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cut-short wait: %v, want a budget error wrapping context.Canceled", err)
	}
}
