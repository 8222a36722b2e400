package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/weirproject/weir/checkpoint"
)

// TestCoordinatorScripts runs the scripts in testdata/coordinator against
// the checkpoint coordinator's state machine (cpMachine): each command is
// an input, and its output the actions the machine asks for, then its
// state. After every command the invariants CP1..CP6 are checked. Rewrite the
// expected outputs with -rewrite and review them as a diff.
//
// Commands (at=DURATION, on any, sets the time since the script's start):
//
//	init tasks=(a,b,...) sources=N [timeout=D] [min-pause=D] [first=ID]
//	    the first N tasks are the sources
//	tick                         the interval ticker fired
//	request name=R [savepoint]   TriggerCheckpoint, or TriggerSavepoint
//	ack task=T id=ID [err=TEXT]
//	decline id=ID
//	timeout id=ID
//	finish task=T                the task's input ended
//	source-done task=T           the source waits for the final checkpoint
//	persisted id=ID [err=TEXT]   the snapshot was written (or not)
//	stop
func TestCoordinatorScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/coordinator", func(t *testing.T, path string) {
		var m *cpMachine
		var names []string
		t0 := time.Unix(0, 0).UTC()
		now := t0
		reqs := map[*cpRequest]string{}
		task := func(d *datadriven.TestData) int {
			var n string
			d.ScanArgs(t, "task", &n)
			i := slices.Index(names, n)
			if i < 0 {
				d.Fatalf(t, "no task %q", n)
			}
			return i
		}
		id := func(d *datadriven.TestData) int64 {
			var id int
			d.ScanArgs(t, "id", &id)
			return int64(id)
		}
		dur := func(d *datadriven.TestData, key string, def time.Duration) time.Duration {
			var s string
			if !d.MaybeScanArgs(t, key, &s) {
				return def
			}
			v, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return v
		}
		errArg := func(d *datadriven.TestData) error {
			var s string
			if d.MaybeScanArgs(t, "err", &s) {
				return errors.New(s)
			}
			return nil
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			now = t0.Add(dur(d, "at", now.Sub(t0)))
			var acts []cpAction
			switch d.Cmd {
			case "init":
				var sources, first int
				d.ScanArgs(t, "tasks", &names)
				d.ScanArgs(t, "sources", &sources)
				first = 1
				d.MaybeScanArgs(t, "first", &first)
				cfg := CheckpointConfig{Timeout: dur(d, "timeout", 10*time.Minute), MinPause: dur(d, "min-pause", 0)}
				m = newCPMachine(names, sources, cfg, int64(first))
			case "tick":
				acts = m.tick(now)
			case "request":
				var name string
				d.ScanArgs(t, "name", &name)
				r := &cpRequest{kind: checkpoint.KindCheckpoint}
				if d.HasArg("savepoint") {
					r.kind = checkpoint.KindSavepoint
				}
				reqs[r] = name
				acts = m.request(r, now)
			case "ack":
				acts = m.ack(task(d), id(d), errArg(d), now)
			case "decline":
				acts = m.decline(id(d), now)
			case "timeout":
				acts = m.timedOut(id(d), now)
			case "finish":
				acts = m.taskFinished(task(d), now)
			case "source-done":
				acts = m.sourceDone(task(d), now)
			case "persisted":
				acts = m.persisted(id(d), errArg(d), now)
			case "stop":
				acts = m.stop(now)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if err := m.check(); err != nil {
				d.Fatalf(t, "invariant broken: %v", err)
			}
			var b strings.Builder
			for _, a := range acts {
				b.WriteString(formatAction(a, names, reqs))
				b.WriteByte('\n')
			}
			b.WriteString(formatMachine(m, names, reqs))
			return b.String()
		})
	})
}

func formatAction(a cpAction, names []string, reqs map[*cpRequest]string) string {
	to := ""
	if a.req != nil {
		to = " -> " + reqs[a.req]
	}
	switch a.kind {
	case actStart:
		what := "checkpoint"
		switch {
		case a.final:
			what = "final checkpoint"
		case a.req != nil && a.req.kind == checkpoint.KindSavepoint:
			what = "savepoint"
		}
		return fmt.Sprintf("start %d: %s%s", a.id, what, to)
	case actAcked:
		return fmt.Sprintf("acked %d by %s (%d left)", a.id, names[a.task], a.left)
	case actPersist:
		return fmt.Sprintf("persist %d", a.id)
	case actComplete:
		return fmt.Sprintf("complete %d%s", a.id, to)
	case actAbort:
		return fmt.Sprintf("abort %d: %v%s", a.id, a.err, to)
	case actPersistFailed:
		return fmt.Sprintf("persist failed %d: %v%s", a.id, a.err, to)
	case actReject:
		return fmt.Sprintf("reject %s: %v", reqs[a.req], a.err)
	case actRelease:
		if a.gaveUp {
			return fmt.Sprintf("release sources: final checkpoint given up after %d tries", a.tries)
		}
		return fmt.Sprintf("release sources: final checkpoint %d complete", a.id)
	}
	return fmt.Sprintf("unknown action %d", a.kind)
}

func formatMachine(m *cpMachine, names []string, reqs map[*cpRequest]string) string {
	var parts []string
	switch c := m.cur; {
	case c == nil:
		parts = append(parts, "idle")
	case c.persisting:
		parts = append(parts, fmt.Sprintf("persisting %d", c.id))
	default:
		var w []string
		for i, n := range names {
			if c.waiting[i] {
				w = append(w, n)
			}
		}
		parts = append(parts, fmt.Sprintf("collecting %d, waiting for %s", c.id, strings.Join(w, ",")))
	}
	parts = append(parts, fmt.Sprintf("next %d", m.nextID))
	if m.lastCompleted > 0 {
		parts = append(parts, fmt.Sprintf("completed %d", m.lastCompleted))
	}
	if len(m.queued) > 0 {
		var q []string
		for _, r := range m.queued {
			q = append(q, reqs[r])
		}
		parts = append(parts, "queued "+strings.Join(q, ","))
	}
	if m.anyFinished {
		parts = append(parts, "a task finished")
	}
	if len(m.sourcesDone) > 0 {
		parts = append(parts, fmt.Sprintf("sources done %d/%d", len(m.sourcesDone), m.sources))
	}
	switch {
	case m.finalID < 0:
		parts = append(parts, "released")
	case m.finalID > 0:
		parts = append(parts, fmt.Sprintf("final %d (try %d)", m.finalID, m.finalTries))
	}
	if m.stopped {
		parts = append(parts, "stopped")
	}
	return "state: " + strings.Join(parts, "; ")
}
