package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/memory"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// Op is a test input: write an entry, search, or compact, for User.
type Op struct {
	User string `json:"user"`
	Kind string `json:"kind"` // write, search, compact
	ID   string `json:"id,omitempty"`
	Text string `json:"text,omitempty"`
	At   int64  `json:"at"`
}

// stamped numbers ops by position (their event time).
func stamped(ops []Op) []Op {
	out := slices.Clone(ops)
	for i := range out {
		out[i].At = int64(i)
	}
	return out
}

var byAt = watermark.ForMonotonous[Op]().WithTimestamp(func(o Op, _ int64) (int64, bool) { return o.At, true })

// Out is what the test agent outputs per input.
type Out struct {
	Op      Op       `json:"op"`
	Hits    []string `json:"hits,omitempty"` // "id:content"
	N       int      `json:"n,omitempty"`
	Entries []string `json:"entries,omitempty"`
}

func memAgent(lt *memory.LongTerm) *agent.Agent {
	return &agent.Agent{
		Models: map[string]model.ChatModel{"llm": &model.Offline{Seed: 3}},
		Actions: []agent.Action{agent.NewAction("mem", func(c *agent.RunnerContext, ev agent.Event) error {
			op, err := agent.Input[Op](ev)
			if err != nil {
				return err
			}
			out := Out{Op: op}
			switch op.Kind {
			case "write":
				err = lt.Write(c, op.ID, op.Text, map[string]string{"user": op.User})
			case "search":
				hits, serr := lt.Search(c, op.Text, 3, nil)
				for _, h := range hits {
					out.Hits = append(out.Hits, h.ID+":"+h.Content)
				}
				err = serr
			case "compact":
				out.N, err = lt.Compact(c, "llm")
				es, eerr := lt.Entries(c)
				for _, e := range es {
					out.Entries = append(out.Entries, e.ID)
				}
				err = cmpErr(err, eerr)
			}
			if err != nil {
				return err
			}
			c.Output(out)
			return nil
		}, agent.TypeInput)},
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func run(t *testing.T, lt *memory.LongTerm, ops []Op) []Out {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "ops", stamped(ops), byAt).Parallelism(1)
	out := weir.Collect(agent.Apply[string, Op, Out](weir.KeyBy(src, func(o Op) string { return o.User }), "mem", memAgent(lt), agent.Options{}))
	if err := env.Execute(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	return out.Values()
}

func searches(outs []Out) map[string][]string {
	m := map[string][]string{}
	for _, o := range outs {
		if o.Op.Kind == "search" {
			m[o.Op.User+"/"+o.Op.Text] = o.Hits
		}
	}
	return m
}

// L2 and L3: a search sees the writes of the key's earlier inputs, in
// order of similarity, and no other key's.
func TestLongTermWriteAndSearch(t *testing.T) {
	lt := &memory.LongTerm{Embedder: &embed.Offline{}}
	outs := run(t, lt, []Op{
		{User: "ann", Kind: "write", ID: "1", Text: "Ann prefers delivery on Fridays"},
		{User: "ann", Kind: "search", Text: "which day for delivery"},
		{User: "ann", Kind: "write", ID: "2", Text: "Ann's parcel was damaged in transit"},
		{User: "bob", Kind: "search", Text: "which day for delivery"},
		{User: "ann", Kind: "search", Text: "damaged parcel"},
		{User: "ann", Kind: "write", ID: "1", Text: "Ann now prefers delivery on Mondays"},
		{User: "ann", Kind: "search", Text: "prefers delivery Mondays"},
	})
	got := map[string][]string{}
	for _, o := range outs {
		if o.Op.Kind == "search" {
			got[o.Op.User+"/"+o.Op.Text] = append(got[o.Op.User+"/"+o.Op.Text], strings.Join(o.Hits, " | "))
		}
	}
	want := map[string][]string{
		"ann/which day for delivery":   {"1:Ann prefers delivery on Fridays"},
		"bob/which day for delivery":   {""},
		"ann/damaged parcel":           {"2:Ann's parcel was damaged in transit | 1:Ann prefers delivery on Fridays"},
		"ann/prefers delivery Mondays": {"1:Ann now prefers delivery on Mondays | 2:Ann's parcel was damaged in transit"},
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("search %s: %q, want %q", k, got[k], w)
		}
	}
}

// L5: Compact summarises the oldest entries into one, through the model.
func TestLongTermCompact(t *testing.T) {
	lt := &memory.LongTerm{Embedder: &embed.Offline{}, MaxItems: 4}
	var ops []Op
	for i := range 6 {
		ops = append(ops, Op{User: "ann", Kind: "write", ID: fmt.Sprint("e", i), Text: fmt.Sprintf("fact number %d about Ann", i)})
	}
	ops = append(ops, Op{User: "ann", Kind: "compact"}, Op{User: "ann", Kind: "compact"}, Op{User: "ann", Kind: "search", Text: "fact about Ann"})
	outs := run(t, lt, ops)
	var compacts []Out
	for _, o := range outs {
		if o.Op.Kind == "compact" {
			compacts = append(compacts, o)
		}
	}
	if len(compacts) != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	// 6 entries, MaxItems 4: the oldest 4 are summarised, 2 stay.
	if c := compacts[0]; c.N != 4 || !slices.Equal(c.Entries, []string{"summary-3", "e4", "e5"}) {
		t.Fatalf("first compaction: %d summarised, entries %v", c.N, c.Entries)
	}
	if c := compacts[1]; c.N != 0 || len(c.Entries) != 3 {
		t.Fatalf("second compaction (under the limit): %+v", c)
	}
	last := outs[len(outs)-1]
	if len(last.Hits) != 3 {
		t.Fatalf("search after compaction: %v", last.Hits)
	}
}

// L1: a restore sees exactly the entries of the checkpoint: those written
// before it, not those written after it (before the job stopped).
func TestLongTermRestoreSeesTheCheckpoint(t *testing.T) {
	lt := &memory.LongTerm{Embedder: &embed.Offline{}}
	before := []Op{
		{User: "ann", Kind: "write", ID: "a1", Text: "Ann ordered a red bicycle"},
		{User: "bob", Kind: "write", ID: "b1", Text: "Bob asked about bicycle helmets"},
		{User: "ann", Kind: "write", ID: "a2", Text: "Ann lives in Lyon"},
	}
	after := []Op{
		{User: "ann", Kind: "write", ID: "a3", Text: "Ann returned the red bicycle"},
		{User: "bob", Kind: "write", ID: "b1", Text: "Bob bought a bicycle helmet"},
	}
	queries := []Op{
		{User: "ann", Kind: "search", Text: "red bicycle"},
		{User: "bob", Kind: "search", Text: "bicycle helmet"},
		{User: "ann", Kind: "search", Text: "where does Ann live"},
	}
	// What a job that only ever saw the writes before the checkpoint
	// answers.
	want := searches(run(t, lt, append(slices.Clone(before), queries...)))
	if len(want["ann/red bicycle"]) != 2 || len(want["bob/bicycle helmet"]) != 1 {
		t.Fatalf("reference run: %v", want)
	}

	steps := func(ops []Op, extra ...weirtest.Step[Op]) []weirtest.Step[Op] {
		var s []weirtest.Step[Op]
		for i, o := range ops {
			s = append(s, weirtest.Rec(0, o, int64(i)))
		}
		return append(s, extra...)
	}
	build := func(cp runtime.CheckpointConfig, s []weirtest.Step[Op]) (*weir.Environment, *weirtest.Observation[Out]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 2, Checkpoint: cp})
		src := weir.FromSource(env, "ops", weirtest.Script([][]weirtest.Step[Op]{s}), watermark.NoWatermarks[Op]()).Parallelism(1)
		out := agent.Apply[string, Op, Out](weir.KeyBy(src, func(o Op) string { return o.User }), "mem", memAgent(lt), agent.Options{})
		return env, weirtest.Observe(out)
	}
	gate := weirtest.NewGate()
	env1, obs1 := build(runtime.CheckpointConfig{Dir: t.TempDir()}, steps(before, append([]weirtest.Step[Op]{weirtest.PauseOn[Op](gate)}, steps(after)...)...))
	job, stop := weirtest.Start(t, env1)
	if err := obs1.WaitRecords(ctxFor(t), len(before)); err != nil {
		t.Fatal(err)
	}
	_, path, err := job.TriggerCheckpoint(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	gate.Release()
	if err := obs1.WaitRecords(ctxFor(t), len(before)+len(after)); err != nil {
		t.Fatal(err)
	}
	stop()

	env2, obs2 := build(runtime.CheckpointConfig{RestoreFrom: path}, steps(queries))
	if err := env2.Execute(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	got := searches(obs2.Values())
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("after the restore, search %s: %q, want %q (the checkpoint's entries)", k, got[k], w)
		}
	}
}

// The retrieval tool over long-term memory, called by a ReAct model: the
// tool finds the calling key's memory through agent.RunnerOf.
func TestLongTermToolInReAct(t *testing.T) {
	lt := &memory.LongTerm{Embedder: &embed.Offline{}}
	recall, err := lt.Tool("recall", 2)
	if err != nil {
		t.Fatal(err)
	}
	a := agent.ReAct(&model.Offline{Seed: 1, ToolCalls: true}, []tool.Tool{recall}, agent.ReActOptions{
		Prompt: func(in any) (string, error) { return in.(Op).Text, nil },
	})
	// Writes go to memory; everything else to ReAct.
	for i := range a.Actions {
		if slices.Contains(a.Actions[i].On, agent.TypeInput) {
			next := a.Actions[i].Run
			a.Actions[i].Run = func(c *agent.RunnerContext, ev agent.Event) error {
				if op := ev.Value.(Op); op.Kind == "write" {
					return lt.Write(c, op.ID, op.Text, nil)
				}
				return next(c, ev)
			}
		}
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "ops", stamped([]Op{
		{User: "ann", Kind: "write", ID: "a1", Text: "Ann's order 17 ships on Friday"},
		{User: "bob", Kind: "write", ID: "b1", Text: "Bob's order 18 ships on Monday"},
		{User: "ann", Kind: "ask", Text: "When does my order ship?"},
	}), byAt).Parallelism(1)
	out := weir.Collect(agent.Apply[string, Op, agent.ReActAnswer](weir.KeyBy(src, func(o Op) string { return o.User }), "react", a, agent.Options{}))
	if err := env.Execute(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	answers := out.Values()
	if len(answers) != 1 || answers[0].ToolCalls != 1 || !answers[0].Complete {
		t.Fatalf("answers %+v", answers)
	}
	// The offline model quotes the tool's result: Ann's entry, not Bob's.
	if ans := answers[0].Answer; !strings.Contains(ans, "order 17") || strings.Contains(ans, "order 18") {
		t.Fatalf("answer %q does not quote Ann's memory only", ans)
	}

	// Outside an agent the searcher says why it cannot work.
	res, err := recall.Call(context.Background(), json.RawMessage(`{"query":"order"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "outside an agent") {
		t.Fatalf("call outside an agent: %+v, %v", res, err)
	}
}
