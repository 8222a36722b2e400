package agent

import (
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
)

// budgetEntry is a bucket in a checkpoint (JSON, one list item per
// subtask, union redistribution).
type budgetEntry struct {
	Budget   string `json:"budget"`
	Scope    string `json:"scope"`
	Part     []byte `json:"part,omitempty"`
	KeyGroup int    `json:"kg"`
	Window   int64  `json:"window"`
	WindowMs int64  `json:"windowMs"`
	Tokens   int64  `json:"tokens"`
	Requests int64  `json:"requests"`
}

// budgetList is the operator-state list of the ledger.
const budgetList = "agent.budgets"

// snapshot writes the buckets of current windows (B3) and drops the
// others.
func (b *budgets) snapshot(w *runtime.SnapshotWriter) error {
	now := b.clk.Now().UnixMilli()
	var entries []budgetEntry
	b.mu.Lock()
	for i, m := range b.mu.buckets {
		bu := &b.list[i]
		win := bu.Window.Milliseconds()
		for part, k := range m {
			if k.window+win <= now {
				delete(m, part)
				continue
			}
			entries = append(entries, budgetEntry{Budget: bu.Name, Scope: string(scopeOf(bu)), Part: []byte(part), KeyGroup: k.kg,
				Window: k.window, WindowMs: win, Tokens: k.tokens, Requests: k.requests})
		}
	}
	b.mu.Unlock()
	blob, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("agent: encoding the budgets' spend: %w", err)
	}
	w.List(budgetList, checkpoint.Union, [][]byte{blob})
	return nil
}

func scopeOf(b *Budget) BudgetScope {
	if b.Scope == "" {
		return BudgetPerKey
	}
	return b.Scope
}

// restore takes back the spend of a checkpoint (B3): the per-key buckets
// of the subtask's key groups, and of the per-model and per-job ones the
// sum over the old subtasks shared by the new parallelism. Buckets of a
// budget that is gone, changed its scope or window, or whose window is
// over are dropped.
func (b *budgets) restore(r *runtime.Restored, rng interface{ Contains(int) bool }, par int) error {
	items, err := r.List(budgetList)
	if err != nil {
		return fmt.Errorf("agent: reading the budgets' spend: %w", err)
	}
	now := b.clk.Now().UnixMilli()
	byName := map[string]int{}
	for i, bu := range b.list {
		byName[bu.Name] = i
	}
	type bucketID struct {
		budget int
		part   string
	}
	shared := map[bucketID]*bucket{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range items {
		var entries []budgetEntry
		if err := json.Unmarshal(it, &entries); err != nil {
			return fmt.Errorf("agent: decoding the budgets' spend: %w", err)
		}
		for _, e := range entries {
			i, ok := byName[e.Budget]
			if !ok {
				continue
			}
			bu := &b.list[i]
			if string(scopeOf(bu)) != e.Scope || bu.Window.Milliseconds() != e.WindowMs || e.Window+e.WindowMs <= now {
				continue
			}
			id := bucketID{budget: i, part: string(e.Part)}
			if scopeOf(bu) == BudgetPerKey {
				if rng.Contains(e.KeyGroup) {
					b.mu.buckets[i][id.part] = &bucket{window: e.Window, tokens: e.Tokens, requests: e.Requests, kg: e.KeyGroup}
				}
				continue
			}
			s := shared[id]
			if s == nil || s.window < e.Window {
				s = &bucket{window: e.Window}
				shared[id] = s
			}
			if s.window == e.Window {
				s.tokens += e.Tokens
				s.requests += e.Requests
			}
		}
	}
	for id, s := range shared {
		s.tokens, s.requests = ceilDiv(s.tokens, par), ceilDiv(s.requests, par)
		b.mu.buckets[id.budget][id.part] = s
	}
	return nil
}
