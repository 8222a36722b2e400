package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestConditionCompileErrors(t *testing.T) {
	run := func(*RunnerContext, Event) error { return nil }
	cases := []struct {
		when, want string
		line, col  int
	}{
		{`event.typo == "x"`, "undefined field 'typo'", 1, 6},
		{`event.type == `, "Syntax error", 1, 15},
		{`event.id + 1`, "not a bool", 1, 1},
		{`event.type > 3`, "no matching overload", 1, 12},
		{"event.id > 1 &&\n  nothing", "undeclared reference to 'nothing'", 2, 3},
		{`  `, "empty expression", 1, 1},
	}
	for _, c := range cases {
		a := &Agent{Actions: []Action{NewAction("big", run, TypeInput).WithCondition(c.when)}}
		_, err := compile(a)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `action "big"`) {
			t.Errorf("%q: err = %v, want one naming the action and %q", c.when, err, c.want)
			continue
		}
		var ce *ConditionError
		if !errors.As(err, &ce) || ce.Line != c.line || ce.Column != c.col {
			t.Errorf("%q: position %+v, want %d:%d", c.when, ce, c.line, c.col)
		}
	}
	if err := CheckCondition(`event.type == "Order" && has(event.value.amount) && event.value.amount > 100 && event.attrs["x"] == 1 && event.action == "" && event.parent < 0`); err != nil {
		t.Fatal(err)
	}
}

// condExpr is a generated condition: its CEL text and a Go predicate with
// the same meaning.
type condExpr struct {
	cel  string
	pred func(ev condEvent) bool
}

type condEvent struct {
	Type   string
	Amount int
	Tag    string
	Flag   bool
}

func genCond(t *rapid.T, depth int) condExpr {
	kind := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth > 2 {
		kind = rapid.IntRange(0, 3).Draw(t, "leaf")
	}
	switch kind {
	case 0:
		typ := rapid.SampledFrom([]string{"Order", "Refund", "Ping"}).Draw(t, "type")
		return condExpr{fmt.Sprintf("event.type == %q", typ), func(e condEvent) bool { return e.Type == typ }}
	case 1:
		n := rapid.IntRange(-5, 205).Draw(t, "n")
		ops := []string{">", ">=", "<", "<=", "==", "!="}
		op := rapid.SampledFrom(ops).Draw(t, "op")
		cmp := map[string]func(a, b int) bool{">": func(a, b int) bool { return a > b }, ">=": func(a, b int) bool { return a >= b },
			"<": func(a, b int) bool { return a < b }, "<=": func(a, b int) bool { return a <= b },
			"==": func(a, b int) bool { return a == b }, "!=": func(a, b int) bool { return a != b }}[op]
		return condExpr{fmt.Sprintf("event.value.amount %s %d", op, n), func(e condEvent) bool { return cmp(e.Amount, n) }}
	case 2:
		p := rapid.SampledFrom([]string{"a", "b", "ab", ""}).Draw(t, "prefix")
		return condExpr{fmt.Sprintf("event.attrs.tag.startsWith(%q)", p), func(e condEvent) bool { return strings.HasPrefix(e.Tag, p) }}
	case 3:
		return condExpr{"event.value.flag", func(e condEvent) bool { return e.Flag }}
	case 4:
		x := genCond(t, depth+1)
		return condExpr{"!(" + x.cel + ")", func(e condEvent) bool { return !x.pred(e) }}
	case 5:
		x, y := genCond(t, depth+1), genCond(t, depth+1)
		return condExpr{"(" + x.cel + ") && (" + y.cel + ")", func(e condEvent) bool { return x.pred(e) && y.pred(e) }}
	default:
		x, y := genCond(t, depth+1), genCond(t, depth+1)
		return condExpr{"(" + x.cel + ") || (" + y.cel + ")", func(e condEvent) bool { return x.pred(e) || y.pred(e) }}
	}
}

type orderValue struct {
	Amount int  `json:"amount"`
	Flag   bool `json:"flag"`
}

// TestConditionMatchesGoPredicate: a generated CEL condition selects
// exactly the events its Go twin selects, whatever form the payload has:
// a Go map, a struct, or the JSON an event has after a restore.
func TestConditionMatchesGoPredicate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ce := genCond(t, 0)
		cond, err := compileCondition(ce.cel)
		if err != nil {
			t.Fatalf("%s: %v", ce.cel, err)
		}
		var act eventActivation
		evs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) condEvent {
			return condEvent{
				Type:   rapid.SampledFrom([]string{"Order", "Refund", "Ping"}).Draw(t, "type"),
				Amount: rapid.IntRange(-10, 210).Draw(t, "amount"),
				Tag:    rapid.SampledFrom([]string{"", "a", "ab", "abc", "b", "ba"}).Draw(t, "tag"),
				Flag:   rapid.Bool().Draw(t, "flag"),
			}
		}), 1, 20).Draw(t, "events")
		for i, e := range evs {
			want := ce.pred(e)
			forms := []Event{
				{Type: e.Type, Value: map[string]any{"amount": e.Amount, "flag": e.Flag}, Attrs: map[string]any{"tag": e.Tag}},
				{Type: e.Type, Value: orderValue{Amount: e.Amount, Flag: e.Flag}, Attrs: map[string]any{"tag": e.Tag}},
			}
			b, _ := json.Marshal(forms[1])
			var restored Event
			if err := json.Unmarshal(b, &restored); err != nil {
				t.Fatal(err)
			}
			forms = append(forms, restored)
			for j := range forms {
				got, err := cond.match(&act, &forms[j])
				if err != nil {
					t.Fatalf("%s on event %d (form %d, %+v): %v", ce.cel, i, j, forms[j], err)
				}
				if got != want {
					t.Fatalf("%s on %+v (form %d): CEL says %v, Go says %v", ce.cel, e, j, got, want)
				}
			}
		}
	})
}

// TestConditionTriggersActions runs an agent whose actions have
// conditions: each runs for exactly the events that meet its condition
// (on input events and on events actions send), the others are unhandled,
// and a condition failing at run time fails the job naming the action.
func TestConditionTriggersActions(t *testing.T) {
	a := &Agent{Actions: []Action{
		NewAction("route", func(c *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			return c.Send(NewEvent("Order", map[string]any{"amount": in.N, "text": in.Text}, nil))
		}, TypeInput),
		NewAction("big", func(c *RunnerContext, ev Event) error {
			v, _ := ValueAs[map[string]any](ev)
			c.Output(fmt.Sprint("big:", v["text"]))
			return nil
		}, "Order").WithCondition(`event.type == "Order" && event.value.amount > 100`),
		NewAction("small", func(c *RunnerContext, ev Event) error {
			v, _ := ValueAs[map[string]any](ev)
			c.Output(fmt.Sprint("small:", v["text"]))
			return nil
		}, "Order").WithCondition(`event.value.amount <= 100 && event.action == "route" && event.parent == 0`),
		NewAction("echo-x", func(c *RunnerContext, ev Event) error {
			in, _ := Input[msg](ev)
			c.Output("x:" + in.Text)
			return nil
		}, TypeInput).WithCondition(`event.value.key == "x"`),
	}}
	rc, m, err := runAgent[string](t, a, Options{},
		rec(msg{Key: "a", Text: "a1", N: 150}, 1),
		rec(msg{Key: "a", Text: "a2", N: 100}, 2),
		rec(msg{Key: "x", Text: "x1", N: 101}, 3),
	)
	if err != nil {
		t.Fatal(err)
	}
	got := values(rc.events)
	slices.Sort(got)
	want := []string{"big:a1", "big:x1", "small:a2", "x:x1"}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	_ = m

	// A field the payload lacks fails the job, naming the action.
	bad := &Agent{Actions: []Action{NewAction("needs", func(*RunnerContext, Event) error { return nil }, TypeInput).WithCondition(`event.value.missing > 1`)}}
	_, _, err = runAgent[string](t, bad, Options{}, rec(msg{Key: "a"}, 1))
	if err == nil || !strings.Contains(err.Error(), `condition of action "needs"`) || !strings.Contains(err.Error(), "has(") {
		t.Fatalf("err = %v, want the failing condition named", err)
	}
	// With ContinueOnError the event does not trigger the action.
	rc, _, err = runAgent[string](t, &Agent{Actions: []Action{
		NewAction("needs", func(c *RunnerContext, _ Event) error { c.Output("ran"); return nil }, TypeInput).WithCondition(`event.value.missing > 1`),
		NewAction("always", func(c *RunnerContext, _ Event) error { c.Output("always"); return nil }, TypeInput),
	}}, Options{ContinueOnError: true}, rec(msg{Key: "a"}, 1))
	if err != nil || !slices.Equal(values(rc.events), []string{"always"}) {
		t.Fatalf("ContinueOnError: %v %v", err, values(rc.events))
	}
}

// BenchmarkTrigger compares selecting the actions of an event by its type
// alone (a map lookup) with selecting them by type and a CEL condition.
func BenchmarkTrigger(b *testing.B) {
	run := func(*RunnerContext, Event) error { return nil }
	ev := &Event{Type: "Order", Value: map[string]any{"amount": 150.0, "text": "x"}, ID: 1}
	b.Run("type", func(b *testing.B) {
		def, err := compile(&Agent{Actions: []Action{NewAction("a", run, "Order")}})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			n += len(def.byType[ev.Type])
		}
		if n == 0 {
			b.Fatal("no match")
		}
	})
	b.Run("type+cel", func(b *testing.B) {
		def, err := compile(&Agent{Actions: []Action{NewAction("a", run, "Order").WithCondition(`event.type == "Order" && event.value.amount > 100`)}})
		if err != nil {
			b.Fatal(err)
		}
		var act eventActivation
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			for _, a := range def.byType[ev.Type] {
				ok, err := def.conds[a].match(&act, ev)
				if err != nil {
					b.Fatal(err)
				}
				if ok {
					n++
				}
			}
		}
		if n == 0 {
			b.Fatal("no match")
		}
	})
}
