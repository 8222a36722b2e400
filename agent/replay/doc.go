// Package replay evaluates a changed agent (another prompt, model or set
// of tools) over the inputs an agent job recorded in its event log
// (package agent/eventlog), without side effects, and reports per input
// the old and the new decision and a summary of the differences: what
// `weir agent replay` prints (docs/agent-replay.md).
//
// Recorded runs come from the event log (Collector, ReadFile,
// ReadTopic): per input (operator, key and sequence number) its value (the input event of the
// first action_start entry), the model calls with their requests,
// responses and token usage, the tool calls with their arguments and
// results, the outputs and the action errors. Evaluate runs each input
// through the new agent in-process (agent.Evaluator: no job, no store,
// no state kept between calls of Evaluate).
//
// Inputs may also come from the agent's input topic (ReadInputs: records
// between two offsets or times, decoded and keyed by the caller); Recorded
// then gives each the decision and tool results an event log recorded for
// the same key and value, and an input it has none for is reported with
// NoRecord (a new decision, nothing to compare).
//
// # Guarantees
//
//	R1. No tool runs. Every tool of the new agent is replaced, before the
//	    agent is compiled, by one with the same spec (what the model sees)
//	    that answers from the record: a call whose tool name and canonical
//	    arguments (agent.CanonicalJSON) equal a recorded call of the same
//	    input gets that call's recorded result (matched); any other call is
//	    refused (an IsError result the action sees, the default) or, with
//	    Options.Unmatched = Stub, answered with Options.StubContent. Both
//	    are listed as new calls. A call of a tool the new agent does not
//	    have gets the agent's usual "no tool named" result and is listed as
//	    new. Nothing external is called except the new agent's models
//	    (building the agent may connect to MCP servers to list their
//	    tools: pipeline.AgentOf does; none of their tools is called).
//	R2. Inputs in log order, one at a time. Inputs are evaluated in the
//	    order of their first entry in the log; short-term memory carries
//	    over between the inputs of one key, as in the job, starting empty.
//	R3. Decisions compared as JSON. An input's decision is its outputs (in
//	    order) and whether an action failed; old and new are compared as
//	    canonical JSON, so key order and spacing do not count as changes
//	    (numbers are compared as written). An input the new agent fails on
//	    counts as failed, not as changed.
//	R4. Tokens, and money with a price table. The report gives model calls
//	    and prompt and completion tokens before (the recorded responses'
//	    usage) and after (the new calls' usage); with Options.Pricing
//	    (model.Pricing) also their cost, each reply priced by the model
//	    that answered (else by the agent's name for it), the models it
//	    could not price named in Tokens.Unpriced, never guessed.
//
// # Limits
//
// A log written before inputs were recorded in action_start entries, or
// one whose first action_start of an input is missing (the log started
// mid-input), cannot replay that input: it is reported as skipped with
// the reason. A log records calls as they were made; after a restore an
// action's repeated run replaces its earlier attempt. Evaluation keeps no
// state between runs, so a crash during it loses nothing: run it again.
package replay
