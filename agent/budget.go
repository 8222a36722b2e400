package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
)

// BudgetScope says what a Budget counts apart.
type BudgetScope string

// The scopes of a Budget.
const (
	// BudgetPerKey counts each key's calls apart ("100k tokens per user
	// per day"). A key lives in one subtask, so the limit is exact.
	BudgetPerKey BudgetScope = "key"
	// BudgetPerModel counts each model's calls apart (of the models the
	// budget covers).
	BudgetPerModel BudgetScope = "model"
	// BudgetPerJob counts every call the budget covers together.
	BudgetPerJob BudgetScope = "job"
)

// BudgetOnLimit is what a call does when a budget it counts against is
// spent.
type BudgetOnLimit string

// The behaviours at a budget's limit.
const (
	// BudgetFail fails the call with a *BudgetError: the action fails,
	// and under Options.ContinueOnError its input goes to
	// Options.FailedInputs (the agent's dead letters) with a reason that
	// names the budget. Without ContinueOnError the job fails.
	BudgetFail BudgetOnLimit = "fail"
	// BudgetWait makes the call wait until the budget's window rolls over
	// (on the job's clock), then try again. The input stays in flight
	// and, like any input in flight, holds its subtask's watermark; its
	// key keeps its slot (Options.MaxConcurrentKeys), so a spent per-job
	// budget stops the operator taking input (back-pressure).
	// Options.ActionTimeout cuts the wait short (the action then fails).
	BudgetWait BudgetOnLimit = "wait"
	// BudgetFallback makes the call to Budget.Fallback instead, a model
	// of Agent.Models, which counts against the budgets that cover it
	// (and may itself be spent: then its budget's OnLimit applies).
	BudgetFallback BudgetOnLimit = "fallback"
)

// Budget bounds the tokens and requests of the model calls made through
// RunnerContext.Chat (every attempt of a structured call is a call) per
// key, per model or per job over a tumbling window of processing time.
//
// Windows are aligned to the Unix epoch on the job's clock, like Flink's
// tumbling processing-time windows with offset 0 (a 24h window runs from
// 00:00 UTC to 00:00 UTC). Processing time, not event time: a budget
// bounds what is spent now, and a job catching up on a week of history
// would otherwise spend a week of budgets in minutes.
//
// Enforcement is before the call: a call is let through while the
// window's spend is below the limits (requests spent < Requests, tokens
// spent < Tokens); the request is counted when it is let through and the
// tokens the reply reports when it returns (a failed call counts as a
// request, with no tokens). A call let through just below Tokens may
// cross it, so a budget's tokens are exceeded by at most the tokens of
// the calls in flight when it was reached: one call for a per-key budget
// (a key's actions run one at a time), up to Options.MaxConcurrentKeys
// calls of a subtask for the per-model and per-job ones. Requests are
// never exceeded. A call that returns after its window has rolled over
// charges its tokens to the window it was let through in.
//
// Per-model and per-job budgets are counted per subtask: with parallelism
// p each subtask allows Tokens/p and Requests/p (rounded up). The spend of
// the current window is part of every checkpoint, so a restore continues
// it (a restore at another parallelism shares the per-model and per-job
// spend out evenly); calls replayed from the action-state store are not
// made and not charged again.
type Budget struct {
	// Name names the budget in metrics (label budget), errors and
	// checkpoints; required, unique within the Options. A restore
	// continues the spend of the budget of the same name.
	Name string
	// Scope is what is counted apart; "" means BudgetPerKey.
	Scope BudgetScope
	// Models are the names (in Agent.Models) of the models whose calls
	// count; nil means every model of the agent.
	Models []string
	// Tokens is the most tokens (prompt plus completion) per window;
	// 0 means no token limit.
	Tokens int64
	// Requests is the most calls per window; 0 means no request limit.
	// At least one of Tokens and Requests must be set.
	Requests int64
	// Window is the length of the tumbling window; required (for example
	// 24 * time.Hour).
	Window time.Duration
	// OnLimit is what a call does when the budget is spent; "" means
	// BudgetFail.
	OnLimit BudgetOnLimit
	// Fallback is the model (in Agent.Models) called instead, with
	// OnLimit BudgetFallback; it must not be one of Models.
	Fallback string
}

// ErrBudgetExceeded is what a *BudgetError matches with errors.Is.
var ErrBudgetExceeded = errors.New("agent: budget exceeded")

// BudgetError is the error of a call refused by a budget (BudgetFail, or
// a BudgetWait cut short by the action's context).
type BudgetError struct {
	// Budget is the budget's name; Model the model called.
	Budget, Model string
	// WindowStart and WindowEnd bound the spent window (job clock).
	WindowStart, WindowEnd time.Time
	// Tokens and Requests are the window's spend; TokenLimit and
	// RequestLimit the budget's limits (per subtask for per-model and
	// per-job budgets; 0 means none).
	Tokens, Requests, TokenLimit, RequestLimit int64
	// Err is the context's error when a wait was cut short, else nil.
	Err error
}

func (e *BudgetError) Error() string {
	limit := func(n int64) string {
		if n == 0 {
			return "no limit"
		}
		return fmt.Sprintf("limit %d", n)
	}
	s := fmt.Sprintf("agent: budget %q spent for model %q: %d tokens (%s), %d requests (%s) in the window %s to %s",
		e.Budget, e.Model, e.Tokens, limit(e.TokenLimit), e.Requests, limit(e.RequestLimit),
		e.WindowStart.UTC().Format(time.RFC3339), e.WindowEnd.UTC().Format(time.RFC3339))
	if e.Err != nil {
		s += "; waiting for the next window was cut short: " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrBudgetExceeded) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExceeded }

// Unwrap returns the context's error of a cut-short wait.
func (e *BudgetError) Unwrap() error { return e.Err }

// validateBudgets checks the budgets on their own (validateBudgetModels
// checks them against the agent).
func validateBudgets(bs []Budget) []error {
	var errs []error
	seen := map[string]bool{}
	for i, b := range bs {
		at := fmt.Sprintf("agent: Options.Budgets[%d]", i)
		if b.Name == "" {
			errs = append(errs, fmt.Errorf("%s: Name is empty; want a name for metrics and checkpoints", at))
		} else if seen[b.Name] {
			errs = append(errs, fmt.Errorf("%s: Name %q is used twice; want unique names", at, b.Name))
		}
		seen[b.Name] = true
		switch b.Scope {
		case "", BudgetPerKey, BudgetPerModel, BudgetPerJob:
		default:
			errs = append(errs, fmt.Errorf("%s (%s): Scope %q: want key (the default), model or job", at, b.Name, b.Scope))
		}
		if b.Tokens < 0 || b.Requests < 0 || b.Tokens == 0 && b.Requests == 0 {
			errs = append(errs, fmt.Errorf("%s (%s): Tokens %d, Requests %d: want a positive Tokens, Requests or both (0 means no limit of that kind)", at, b.Name, b.Tokens, b.Requests))
		}
		if b.Window <= 0 {
			errs = append(errs, fmt.Errorf("%s (%s): Window %v: want a positive duration such as 24h", at, b.Name, b.Window))
		} else if b.Window%time.Millisecond != 0 {
			errs = append(errs, fmt.Errorf("%s (%s): Window %v: want whole milliseconds", at, b.Name, b.Window))
		}
		switch b.OnLimit {
		case "", BudgetFail, BudgetWait:
			if b.Fallback != "" {
				errs = append(errs, fmt.Errorf("%s (%s): Fallback %q without OnLimit fallback; set OnLimit to fallback or remove Fallback", at, b.Name, b.Fallback))
			}
		case BudgetFallback:
			if b.Fallback == "" {
				errs = append(errs, fmt.Errorf("%s (%s): OnLimit fallback without Fallback; name the model to call instead", at, b.Name))
			} else if slices.Contains(b.Models, b.Fallback) {
				errs = append(errs, fmt.Errorf("%s (%s): Fallback %q is one of the budget's Models: it would fall back to itself", at, b.Name, b.Fallback))
			}
		default:
			errs = append(errs, fmt.Errorf("%s (%s): OnLimit %q: want fail (the default), wait or fallback", at, b.Name, b.OnLimit))
		}
	}
	return errs
}

// validateBudgetModels checks that the models the budgets name are the
// agent's.
func validateBudgetModels(bs []Budget, def *compiled) error {
	var errs []error
	known := func(i int, what, name string) {
		if _, ok := def.models[name]; !ok {
			errs = append(errs, fmt.Errorf("agent: Options.Budgets[%d] (%s): %s %q is not a model of the agent; its models are %v", i, bs[i].Name, what, name, def.modelNames()))
		}
	}
	for i, b := range bs {
		for _, m := range b.Models {
			known(i, "Models", m)
		}
		if b.Fallback != "" {
			known(i, "Fallback", b.Fallback)
		}
	}
	return errors.Join(errs...)
}

// budgets is the ledger of an operator subtask: the spend of the current
// window of every budget, per key, model or for the whole subtask.
//
// Design. One mutex guards the ledger: admissions and charges come from
// the action goroutines, snapshots from the subtask goroutine, and a
// lookup and an update under one uncontended lock cost far less than a
// model call (BenchmarkBudgetCheck). A bucket belongs to one window; a
// bucket found holding an older window is reset on first use (lazily, so
// no timer is armed per key), and stale buckets are dropped when a
// snapshot is taken. Invariants:
//
//	B1. A call is let through only if, for every budget covering it, the
//	    bucket's requests < request limit and tokens < token limit at that
//	    moment; the request is counted in the same critical section.
//	B2. Tokens are charged to the bucket and window the call was let
//	    through in, at most once per call made (a replayed call is never
//	    made: the ledger is behind Durable).
//	B3. The snapshot holds every bucket of a current window; a restore
//	    takes back those of its key groups (per key) and a share of the
//	    others.
type budgets struct {
	list   []Budget
	limits []limits // per budget: the limits of this subtask
	// byModel lists, per model name, the indexes of the budgets that
	// cover it, in declared order; read-only after Open.
	byModel map[string][]int
	clk     clock.Clock
	metrics []budgetMetrics
	mu      struct {
		sync.Mutex
		// buckets holds, per budget, its buckets by part: the encoded
		// key (per key), the model name (per model), "" (per job).
		buckets []map[string]*bucket
	}
}

type limits struct{ tokens, requests int64 }

type bucket struct {
	window   int64 // start, Unix milliseconds
	tokens   int64
	requests int64
	kg       int // the key's key group (per key)
}

type budgetMetrics struct {
	tokens, requests, rejected, waits, fallbacks *runtime.Counter
}

// Metric names of budgets (label budget).
const (
	// MetricBudgetSpentTokens and MetricBudgetSpentRequests add up the
	// tokens and calls charged to the budget (all keys and windows).
	MetricBudgetSpentTokens   = "budgetSpentTokens"
	MetricBudgetSpentRequests = "budgetSpentRequests"
	// MetricBudgetRejected counts the calls the budget failed
	// (BudgetFail, or a wait cut short), MetricBudgetWaits the calls that
	// waited for its next window, MetricBudgetFallbacks the calls sent to
	// its fallback model.
	MetricBudgetRejected  = "budgetRejectedCalls"
	MetricBudgetWaits     = "budgetWaits"
	MetricBudgetFallbacks = "budgetFallbacks"
)

// newBudgets makes the ledger of a subtask of parallelism par; nil when
// there are no budgets.
func newBudgets(bs []Budget, models []string, par int, clk clock.Clock, ctx *runtime.Context) *budgets {
	if len(bs) == 0 {
		return nil
	}
	b := &budgets{list: bs, byModel: map[string][]int{}, clk: clk}
	for i, bu := range bs {
		b.mu.buckets = append(b.mu.buckets, map[string]*bucket{})
		l := limits{bu.Tokens, bu.Requests}
		if bu.Scope == BudgetPerModel || bu.Scope == BudgetPerJob {
			l.tokens, l.requests = ceilDiv(l.tokens, par), ceilDiv(l.requests, par)
		}
		b.limits = append(b.limits, l)
		for _, m := range models {
			if len(bu.Models) == 0 || slices.Contains(bu.Models, m) {
				b.byModel[m] = append(b.byModel[m], i)
			}
		}
		if ctx != nil {
			lb := runtime.Label{Name: "budget", Value: bu.Name}
			b.metrics = append(b.metrics, budgetMetrics{
				tokens: ctx.LabeledCounter(MetricBudgetSpentTokens, lb), requests: ctx.LabeledCounter(MetricBudgetSpentRequests, lb),
				rejected: ctx.LabeledCounter(MetricBudgetRejected, lb), waits: ctx.LabeledCounter(MetricBudgetWaits, lb),
				fallbacks: ctx.LabeledCounter(MetricBudgetFallbacks, lb)})
		} else {
			b.metrics = append(b.metrics, budgetMetrics{new(runtime.Counter), new(runtime.Counter), new(runtime.Counter), new(runtime.Counter), new(runtime.Counter)})
		}
	}
	return b
}

func ceilDiv(n int64, d int) int64 {
	if n <= 0 || d <= 1 {
		return n
	}
	return (n + int64(d) - 1) / int64(d)
}

// admission is a call let through: the buckets to charge its tokens to.
type admission struct {
	model   string
	buckets [4]*bucket // most calls count against few budgets
	more    []*bucket
	windows [4]int64
	moreW   []int64
	budgets [4]int
	moreB   []int
	n       int
}

func (a *admission) add(b *bucket, budget int) {
	if a.n < len(a.buckets) {
		a.buckets[a.n], a.windows[a.n], a.budgets[a.n] = b, b.window, budget
	} else {
		a.more, a.moreW, a.moreB = append(a.more, b), append(a.moreW, b.window), append(a.moreB, budget)
	}
	a.n++
}

// admit lets a call to model name through (B1), or picks the fallback,
// waits for the next window, or refuses, as the spent budget says. key
// and kg are the run's encoded key and key group.
func (b *budgets) admit(ctx context.Context, key []byte, kg int, name string) (admission, error) {
	for hops := 0; ; {
		now := b.clk.Now().UnixMilli()
		b.mu.Lock()
		blocked, bk := -1, (*bucket)(nil)
		for _, i := range b.byModel[name] {
			k := b.bucketLocked(i, key, kg, name, now)
			l := b.limits[i]
			if l.requests > 0 && k.requests >= l.requests || l.tokens > 0 && k.tokens >= l.tokens {
				blocked, bk = i, k
				break
			}
		}
		if blocked < 0 {
			a := admission{model: name}
			for _, i := range b.byModel[name] {
				k := b.bucketLocked(i, key, kg, name, now)
				k.requests++
				a.add(k, i)
			}
			b.mu.Unlock()
			for i := range a.n {
				b.metrics[a.budget(i)].requests.Inc()
			}
			return a, nil
		}
		spent := *bk
		b.mu.Unlock()
		bu, l := &b.list[blocked], b.limits[blocked]
		w := bu.Window.Milliseconds()
		berr := &BudgetError{Budget: bu.Name, Model: name, WindowStart: time.UnixMilli(spent.window), WindowEnd: time.UnixMilli(spent.window + w),
			Tokens: spent.tokens, Requests: spent.requests, TokenLimit: l.tokens, RequestLimit: l.requests}
		switch bu.OnLimit {
		case BudgetFallback:
			hops++
			if hops > len(b.list) {
				b.metrics[blocked].rejected.Inc()
				return admission{}, fmt.Errorf("%w (its fallbacks are all spent)", berr)
			}
			b.metrics[blocked].fallbacks.Inc()
			name = bu.Fallback
		case BudgetWait:
			// The timer is armed before the wait is counted, so that one
			// who sees the count and moves the clock finds it armed.
			t := clock.NewTimerAt(b.clk, time.UnixMilli(spent.window+w))
			b.metrics[blocked].waits.Inc()
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				b.metrics[blocked].rejected.Inc()
				berr.Err = ctx.Err()
				return admission{}, berr
			}
		default:
			b.metrics[blocked].rejected.Inc()
			return admission{}, berr
		}
	}
}

func (a *admission) budget(i int) int {
	if i < len(a.budgets) {
		return a.budgets[i]
	}
	return a.moreB[i-len(a.budgets)]
}

// charge adds the tokens of a call's reply to the buckets it was let
// through in (B2); a bucket that has moved on to a later window keeps
// them out.
func (b *budgets) charge(a *admission, tokens int64) {
	if tokens <= 0 {
		return
	}
	b.mu.Lock()
	for i := range a.n {
		k, w := a.bucketAt(i)
		if k.window == w {
			k.tokens += tokens
		}
	}
	b.mu.Unlock()
	for i := range a.n {
		b.metrics[a.budget(i)].tokens.Add(tokens)
	}
}

func (a *admission) bucketAt(i int) (*bucket, int64) {
	if i < len(a.buckets) {
		return a.buckets[i], a.windows[i]
	}
	return a.more[i-len(a.buckets)], a.moreW[i-len(a.buckets)]
}

// bucketLocked returns budget i's bucket for the call, reset to the
// window of now if it holds an older one.
func (b *budgets) bucketLocked(i int, key []byte, kg int, model string, now int64) *bucket {
	bu := &b.list[i]
	m := b.mu.buckets[i]
	var k *bucket
	switch bu.Scope {
	case BudgetPerModel:
		k = m[model]
	case BudgetPerJob:
		k = m[""]
	default:
		k = m[string(key)] // no copy of key to look it up
	}
	w := bu.Window.Milliseconds()
	start := now - ((now%w)+w)%w
	if k == nil {
		k = &bucket{window: start, kg: kg}
		switch bu.Scope {
		case BudgetPerModel:
			m[model] = k
		case BudgetPerJob:
			m[""] = k
		default:
			m[string(key)] = k
		}
	} else if k.window < start {
		*k = bucket{window: start, kg: kg}
	}
	return k
}

// guard returns m behind the budgets of the run's calls to the model
// named name: admitted (or sent to a fallback) before, charged after.
// counted returns a model by name with its counters.
func (b *budgets) guard(c *RunnerContext, name string, m model.ChatModel, counted func(string) (model.ChatModel, error)) model.ChatModel {
	if len(b.byModel[name]) == 0 {
		return m
	}
	return model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
		key, err := c.budgetKey()
		if err != nil {
			return nil, err
		}
		a, err := b.admit(ctx, key, c.kg, name)
		if err != nil {
			return nil, err
		}
		call := m
		if a.model != name {
			if call, err = counted(a.model); err != nil {
				return nil, err
			}
		}
		resp, err := call.Chat(ctx, req)
		if err == nil && resp != nil {
			b.charge(&a, int64(resp.Usage.PromptTokens)+int64(resp.Usage.CompletionTokens))
		}
		return resp, err
	})
}

// budgetKey is the run's key, encoded once per run.
func (c *RunnerContext) budgetKey() ([]byte, error) {
	if c.bkey == nil {
		k, err := c.host.encodeKey(c.key)
		if err != nil {
			return nil, err
		}
		c.bkey = k
	}
	return c.bkey, nil
}
