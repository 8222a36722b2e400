package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/agent/replay"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/pipeline"
)

// exitStatusChanged is the exit status of `weir agent replay
// --fail-on-change` when a decision changed or the new agent failed.
const exitStatusChanged = 4

// changedError is what --fail-on-change returns when decisions changed.
type changedError struct{ changed, failed int }

func (e *changedError) Error() string {
	return fmt.Sprintf("weir agent replay: %d decisions changed and %d inputs failed with the new agent (--fail-on-change; exit status %d)",
		e.changed, e.failed, exitStatusChanged)
}

// bound is --from or --to: a position in the log's input order or a time.
type bound struct {
	set  bool
	pos  int64
	time time.Time
	isT  bool
}

func parseBound(s string) (bound, error) {
	if s == "" {
		return bound{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return bound{}, fmt.Errorf("%d is negative", n)
		}
		return bound{set: true, pos: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return bound{}, fmt.Errorf("%q is neither an input position (an integer >= 0) nor an RFC 3339 time (2026-12-04T10:00:00Z)", s)
	}
	return bound{set: true, time: t, isT: true}, nil
}

// selectRuns keeps the runs from from (inclusive) to to (exclusive), then
// sample of them spread evenly (0: all).
func selectRuns(runs []*replay.Run, from, to bound, sample int) []*replay.Run {
	var kept []*replay.Run
	for i, r := range runs {
		if from.set && ((from.isT && r.TimeMs < from.time.UnixMilli()) || (!from.isT && int64(i) < from.pos)) {
			continue
		}
		if to.set && ((to.isT && r.TimeMs >= to.time.UnixMilli()) || (!to.isT && int64(i) >= to.pos)) {
			continue
		}
		kept = append(kept, r)
	}
	if sample <= 0 || sample >= len(kept) {
		return kept
	}
	out := make([]*replay.Run, sample)
	for i := range out {
		out[i] = kept[i*len(kept)/sample]
	}
	return out
}

// operatorRuns keeps the runs of the agent operator named op; "" means
// the only one the log holds.
func operatorRuns(runs []*replay.Run, op string) ([]*replay.Run, error) {
	var names []string
	seen := map[string]bool{}
	var kept []*replay.Run
	for _, r := range runs {
		if !seen[r.Operator] {
			seen[r.Operator] = true
			names = append(names, fmt.Sprintf("%q", r.Operator))
		}
		if r.Operator == op {
			kept = append(kept, r)
		}
	}
	switch {
	case op == "" && len(names) > 1:
		return nil, fmt.Errorf("the log holds the entries of %d agent operators (%s); --operator NAME picks one", len(names), strings.Join(names, ", "))
	case op == "":
		return runs, nil
	case len(kept) == 0:
		return nil, fmt.Errorf("--operator %q: the log has no entries of it; its agent operators are %s", op, strings.Join(names, ", "))
	}
	return kept, nil
}

// agentReplayCmd is `weir agent replay`: a changed agent over recorded
// inputs (package agent/replay).
func agentReplayCmd() *cobra.Command {
	var logFile, topic, brokers, kafkaConfig, pipelineFile, step, operator, fromS, toS, unmatched, stub, inputTopic string
	var sample int
	var asJSON, failOnChange bool
	var sec kafkasec.Security
	var from, to bound
	var spec *pipeline.Spec
	c := &cobra.Command{
		Use:   "replay",
		Short: "Evaluate a changed agent (prompt, model, tools) over the inputs an agent's event log recorded, without side effects",
		Long: `Reads an agent job's event log (--log FILE or --topic TOPIC, as "weir agent log" does), builds
the agent of the agent step of --pipeline (the changed prompt, model or tools), runs every recorded
input through it in-process, and prints per input the old and the new decision and a summary:
changed, unchanged, failed, tool calls answered from the record and new ones, model calls and
tokens before and after, and their cost when the agent step has a price table (pricing:
MODEL: {input, output}, currency per million tokens). No tool runs: a tool call whose
name and canonical arguments equal a recorded call of the same input gets the recorded result;
any other is refused (the model sees an error result) or, with --unmatched stub, answered with
--stub-content. Only the new agent's model is called. --from and --to select inputs by position
in the log (0 is the first input; --to excluded) or by time (RFC 3339, of the input's first
entry); --sample N keeps N of them spread evenly (a fixed sample for CI). --input-topic TOPIC
(with --brokers) takes the inputs from the agent's input topic instead, --from/--to then offsets
or record times; with --log or --topic too, inputs the log recorded keep their recorded results. Exit status 0 when it
ran; with --fail-on-change, 4 when a decision changed or an input failed. docs/agent-replay.md.`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			if inputTopic == "" || topic != "" {
				sec = k.eventLogSource("log", logFile, topic, brokers, kafkaConfig)
			} else {
				sec = k.inputTopicSource(inputTopic, logFile, brokers, kafkaConfig)
			}
			var err error
			if from, err = parseBound(fromS); err != nil {
				k.fail("--from: %v", err)
			}
			if to, err = parseBound(toS); err != nil {
				k.fail("--to: %v", err)
			}
			if from.set && to.set && from.isT != to.isT {
				k.fail("--from %s and --to %s: give both as positions or both as times", fromS, toS)
			} else if from.set && to.set && ((from.isT && !to.time.After(from.time)) || (!from.isT && to.pos <= from.pos)) {
				k.fail("--from %s --to %s: --to must be after --from", fromS, toS)
			}
			k.intRange("sample", int64(sample), 0, -1)
			switch replay.Unmatched(unmatched) {
			case replay.Refuse, replay.Stub:
			default:
				k.fail("--unmatched %q: want refuse or stub", unmatched)
			}
			if stub != "" && unmatched != string(replay.Stub) {
				k.fail("--stub-content: only with --unmatched stub")
			}
			if pipelineFile == "" {
				k.fail("give --pipeline FILE (the pipeline with the changed agent step)")
			} else if k.err == nil {
				if spec, err = pipeline.ParseFile(pipelineFile); err != nil {
					k.fail("--pipeline: %v", strings.ReplaceAll(err.Error(), "\n", "; "))
				}
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			a, closeAgent, err := pipeline.AgentOf(ctx, spec, step)
			if err != nil {
				if step == "" {
					return usagef(cmd, "--pipeline: %v; --step NAME picks one", err)
				}
				return usagef(cmd, "--pipeline: %v", err)
			}
			defer closeAgent()
			var runs []*replay.Run
			switch {
			case logFile != "":
				runs, err = replay.ReadFile(logFile)
			case topic != "":
				runs, err = replay.ReadTopic(ctx, strings.Split(brokers, ","), sec, topic)
			}
			if err != nil {
				return err
			}
			if inputTopic != "" {
				if runs, err = inputTopicRuns(ctx, cmd, spec, step, operator, inputTopic, strings.Split(brokers, ","), sec, from, to, runs, logFile != "" || topic != ""); err != nil {
					return err
				}
				from, to = bound{}, bound{}
			} else if runs, err = operatorRuns(runs, operator); err != nil {
				return err
			}
			runs = selectRuns(runs, from, to, sample)
			pricing, err := pipeline.AgentPricing(spec, step)
			if err != nil {
				return usagef(cmd, "--pipeline: %v", err)
			}
			rep, err := replay.Evaluate(ctx, runs, a, replay.Options{Unmatched: replay.Unmatched(unmatched), StubContent: stub, Pricing: pricing})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := printReplay(out, rep); err != nil {
				return err
			}
			if failOnChange && rep.Summary.Changed+rep.Summary.Failed > 0 {
				return &changedError{changed: rep.Summary.Changed, failed: rep.Summary.Failed}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&logFile, "log", "", "the event log's JSON-lines file (an agent step's eventLog: {file})")
	f.StringVar(&topic, "topic", "", "the event log's Kafka topic (an agent step's eventLog: {kafka: {topic}})")
	f.StringVar(&brokers, "brokers", "", "Kafka brokers of --topic, host:port[,host:port...]")
	f.StringVar(&kafkaConfig, "kafka-config", "", "YAML file with tls and sasl for --brokers (the keys of a pipeline's kafka section)")
	f.StringVar(&inputTopic, "input-topic", "", "replay the agent's inputs from this Kafka topic's history (--brokers; --from/--to as offsets in every partition or record times), answering tool calls from the event log (--log or --topic) where the input and the call are the same")
	f.StringVar(&pipelineFile, "pipeline", "", "pipeline file whose agent step is the changed agent")
	f.StringVar(&step, "step", "", "the agent step's name, when the pipeline has more than one")
	f.StringVar(&operator, "operator", "", "the agent operator whose inputs to replay, when the log holds several (the operator field of its entries)")
	f.StringVar(&fromS, "from", "", "first input: a position in the log (0 is the first input) or an RFC 3339 time")
	f.StringVar(&toS, "to", "", "end of the inputs (excluded): a position or an RFC 3339 time")
	f.IntVar(&sample, "sample", 0, "evaluate N inputs spread evenly over the selection (0: all)")
	f.StringVar(&unmatched, "unmatched", string(replay.Refuse), "what a tool call not recorded gets: refuse (an error result) or stub")
	f.StringVar(&stub, "stub-content", "", `the content of a stubbed result (with --unmatched stub; default "{}")`)
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (inputs and summary)")
	f.BoolVar(&failOnChange, "fail-on-change", false, fmt.Sprintf("exit with status %d when a decision changed or an input failed", exitStatusChanged))
	return c
}

// printReplay prints the per-input table and the summary.
func printReplay(w io.Writer, rep *replay.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSEQ\tRESULT\tTOOLS MATCHED/NEW\tTOKENS BEFORE\tTOKENS AFTER\tOLD\tNEW")
	for _, in := range rep.Inputs {
		res := "unchanged"
		switch {
		case in.Skipped != "":
			res = "skipped"
		case in.Failed:
			res = "failed"
		case in.Changed:
			res = "changed"
		case in.NoRecord:
			res = "no record"
		}
		newDec := decision(in.NewOutputs, nil)
		if in.Failed {
			newDec = "error: " + clipText(in.NewError, 60)
		}
		if in.Skipped != "" {
			newDec = in.Skipped
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d\t%d\t%d\t%s\t%s\n", in.Key, in.Seq, res, in.MatchedCalls, in.NewCalls,
			in.TokensBefore.Total(), in.TokensAfter.Total(), decision(in.OldOutputs, in.OldErrors), newDec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := rep.Summary
	if s.NoRecord > 0 {
		if _, err := fmt.Fprintf(w, "\n%d inputs without a recorded decision (not in the event log): new decisions only", s.NoRecord); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%d inputs: %d changed, %d unchanged, %d failed, %d skipped\n"+
		"tool calls: %d answered from the record, %d new (not run)\n"+
		"model calls: %d before, %d after; tokens: %d before (%d prompt, %d completion), %d after (%d prompt, %d completion)",
		s.Inputs, s.Changed, s.Unchanged, s.Failed, s.Skipped, s.MatchedCalls, s.NewCalls, s.ModelCallsBefore, s.ModelCallsAfter,
		s.TokensBefore.Total(), s.TokensBefore.Prompt, s.TokensBefore.Completion, s.TokensAfter.Total(), s.TokensAfter.Prompt, s.TokensAfter.Completion)
	if err != nil {
		return err
	}
	if s.TokensBefore.Cost == nil {
		_, err = fmt.Fprintln(w, "; no prices (pricing: in the agent step): tokens, not cost")
		return err
	}
	_, err = fmt.Fprintf(w, "\ncost: %.6f before, %.6f after (%+.6f)%s\n", *s.TokensBefore.Cost, *s.TokensAfter.Cost,
		*s.TokensAfter.Cost-*s.TokensBefore.Cost, unpricedNote(s.TokensBefore.Unpriced, s.TokensAfter.Unpriced))
	return err
}

// inputTopicRuns reads the agent's inputs from topic between from and to
// (offsets in every partition, or record times) and gives them what the
// event log (logged, when hasLog) recorded for the same inputs.
func inputTopicRuns(ctx context.Context, cmd *cobra.Command, spec *pipeline.Spec, step, operator, topic string, brokers []string,
	sec kafkasec.Security, from, to bound, logged []*replay.Run, hasLog bool) ([]*replay.Run, error) {
	decode, op, err := pipeline.AgentInputs(ctx, spec, step)
	if err != nil {
		return nil, usagef(cmd, "--input-topic: %v", err)
	}
	if operator != "" {
		op = operator
	}
	rng := replay.InputRange{FromOffset: -1, ToOffset: -1}
	if from.set {
		if from.isT {
			rng.From = from.time
		} else {
			rng.FromOffset = from.pos
		}
	}
	if to.set {
		if to.isT {
			rng.To = to.time
		} else {
			rng.ToOffset = to.pos
		}
	}
	runs, err := replay.ReadInputs(ctx, brokers, sec, topic, op, rng, decode)
	if err != nil {
		return nil, err
	}
	if hasLog {
		if logged, err = operatorRuns(logged, operator); err != nil {
			return nil, err
		}
		n := replay.Recorded(runs, logged)
		fmt.Fprintf(cmd.ErrOrStderr(), "weir agent replay: %d of %d inputs of topic %s found in the event log\n", n, len(runs), topic)
	}
	return runs, nil
}

// unpricedNote names the models the price table lacks ("" when none).
func unpricedNote(before, after []string) string {
	var names []string
	for _, n := range append(slices.Clone(before), after...) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; not priced (no price for " + strings.Join(names, ", ") + ")"
}

// decision is a short text of a decision: its outputs as JSON, or its
// errors.
func decision(outs []any, errs []string) string {
	if len(errs) > 0 {
		return "error: " + clipText(errs[0], 60)
	}
	b, err := json.Marshal(outs)
	if err != nil {
		return fmt.Sprint(outs)
	}
	return clipText(string(b), 80)
}

func clipText(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "..."
	}
	return s
}
