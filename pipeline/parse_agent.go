package pipeline

import (
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// agent reads an agent step.
func (d *dec) agent(k, n ast.Node, what string) *AgentSpec {
	a := &AgentSpec{Model: ModelSpec{Pos: d.pos(k), Offline: true}, Output: "answer"}
	d.object(n, what,
		field{name: "model", accepts: "a mapping", def: "`{offline: {}}`", doc: "the model: weir's offline model, or an OpenAI-compatible endpoint",
			fn: func(at string, k, v ast.Node) { d.model(k, v, at, &a.Model) }},
		field{name: "system", accepts: "a string", def: "none", doc: "the system prompt", fn: func(at string, _, v ast.Node) { d.str(v, at, &a.System) }},
		field{name: "prompt", required: true, accepts: "a Go text/template", doc: "the prompt, rendered over the record (`{{.item}}`)",
			fn: func(at string, _, v ast.Node) {
				a.PromptPos = d.pos(v)
				d.nonEmpty(v, at, "a Go text/template such as 'Review order {{.id}}'", &a.Prompt)
			}},
		field{name: "tools", accepts: "a list", def: "none", doc: "tools offered to the model: `{http}`, `{mcp}` or `{retrieval}` entries",
			fn: func(at string, _, v ast.Node) {
				d.list(v, at, false, func(i int, tn ast.Node) {
					a.Tools = append(a.Tools, d.tool(tn, fmt.Sprintf("%s.tools[%d]", what, i)))
				})
			}},
		field{name: "maxSteps", accepts: "an integer from 1 to 100", def: "8", doc: "the most model calls per record",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100, &a.MaxSteps) }},
		field{name: "when", accepts: "a CEL condition", def: "none", doc: "only the records meeting it go to the model; the others pass through unchanged",
			fn: func(at string, _, v ast.Node) {
				// Read raw, like filter expressions (never env-expanded).
				if s, ok := scalarText(v); ok && strings.TrimSpace(s) != "" {
					a.When, a.WhenPos = s, exprPos(d.pos(v), v)
				} else {
					d.errf(v, "%s: got %s, want a CEL condition such as event.value.amount > 100", at, describe(v))
				}
			}},
		field{name: "output", accepts: "a field name", def: "`answer`", doc: "the field receiving the model's last text",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a field name", &a.Output) }},
		field{name: "maxConcurrentKeys", accepts: "an integer from 1 to 1<<20", def: "256", doc: "keys in progress at once per subtask",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<20, &a.MaxConcurrent) }},
		field{name: "actionTimeout", accepts: "a duration > 0", def: "none", doc: "bound on each record's action",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &a.ActionTimeout) }},
		field{name: "continueOnError", accepts: "true or false", def: "`false`", doc: "a failed action is counted and its input is a dead letter of the step, instead of failing the job",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &a.ContinueOnError) }},
		field{name: "fallbackModel", accepts: "a mapping, as `model`", def: "none", doc: "called past a budget with `onLimit: fallback`",
			fn: func(at string, k, v ast.Node) {
				a.FallbackModel = &ModelSpec{}
				d.model(k, v, at, a.FallbackModel)
			}},
		field{name: "budgets", accepts: "a list", def: "none", doc: "bounds on tokens and requests per window (agents.md, \"Budgets and limits\")",
			fn: func(at string, _, v ast.Node) { d.budgets(v, at, a) }},
		field{name: "eventLog", accepts: "`{file}` or `{kafka: {topic}}`", def: "none", doc: "the agent's event log (`weir agent log`, `weir agent replay`)",
			fn: func(at string, k, v ast.Node) { a.EventLog = d.eventLog(k, v, at) }},
		field{name: "approvals", accepts: "`{topic, requests}`", def: "none", doc: "where answers to tool approvals come from; needs a tool with `approval`",
			fn: func(at string, k, v ast.Node) { a.Approvals = d.approvals(k, v, at) }},
		field{name: "pricing", accepts: "MODEL: {input, output}", def: "none", doc: "a price table per million tokens: the spend metric and `weir agent replay`'s cost",
			fn: func(at string, _, v ast.Node) { a.Pricing = d.pricing(v, at) }},
		field{name: "store", accepts: "`{wal}` or `{kafka: {topic}}`", def: "none", doc: "the action-state store: completed actions and calls are not made again after a restore",
			fn: func(at string, k, v ast.Node) {
				st := &StoreSpec{Pos: d.pos(k)}
				a.Store = st
				kinds := 0
				d.object(v, at,
					field{name: "wal", accepts: "a directory", def: "none", doc: "a write-ahead log on local disk", fn: func(at string, _, v ast.Node) {
						kinds++
						d.nonEmpty(v, at, "a directory", &st.WALDir)
					}},
					field{name: "noSync", accepts: "true or false", def: "`false`", doc: "do not fsync the log (tests only)",
						fn: func(at string, _, v ast.Node) { d.boolean(v, at, &st.NoSync) }},
					field{name: "kafka", accepts: "a mapping", def: "none", doc: "a topic of the pipeline's cluster", fn: func(at string, _, v ast.Node) {
						kinds++
						d.object(v, at,
							field{name: "topic", required: true, accepts: "a topic name", doc: "the job's action states", fn: func(at string, _, v ast.Node) {
								st.TopicPos = d.pos(v)
								d.nonEmpty(v, at, "a topic name for the job's action states", &st.Topic)
							}},
						)
					}},
				)
				if kinds != 1 {
					d.errf(k, "%s: want exactly one of wal (a directory) or kafka ({topic})", at)
				}
			}},
	)
	d.checkBudgets(what, a)
	d.checkApprovals(what, a)
	return a
}

// model reads an agent's model (model, fallbackModel, a retrieval
// tool's embedding).
func (d *dec) model(k, n ast.Node, what string, m *ModelSpec) {
	m.Pos = d.pos(k)
	var offline, endpoint bool
	d.object(n, what,
		field{name: "offline", accepts: "`{seed, latency}`", def: "the default", doc: "weir's offline model: reproducible replies, no server",
			fn: func(at string, _, v ast.Node) {
				offline = true
				d.object(v, at,
					field{name: "seed", accepts: "an integer", def: "0", doc: "the replies' seed",
						fn: func(at string, _, v ast.Node) { d.integer(v, at, math.MinInt64, math.MaxInt64, &m.Seed) }},
					field{name: "latency", accepts: "a duration >= 0", def: "0", doc: "the mean of an exponential distribution of latencies",
						fn: func(at string, _, v ast.Node) { d.duration(v, at, false, &m.Latency) }},
				)
			}},
		field{name: "url", accepts: "an http:// or https:// URL", def: "none", doc: "an OpenAI-compatible endpoint (with `name`)",
			fn: func(at string, _, v ast.Node) {
				endpoint = true
				if d.nonEmpty(v, at, "the base URL of an OpenAI-compatible API such as http://127.0.0.1:11434/v1", &m.URL) &&
					!strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
					d.errf(v, "%s: %q: want an http:// or https:// URL", at, m.URL)
				}
			}},
		field{name: "name", accepts: "a model name such as gpt-4o-mini", def: "none", doc: "the model's name (with `url`)",
			fn: func(at string, _, v ast.Node) {
				endpoint = true
				d.nonEmpty(v, at, "a model name such as gpt-4o-mini", &m.Name)
			}},
		field{name: "apiKeyEnv", accepts: "an environment variable name", def: "none", doc: "the environment variable holding the API key (never in the file)",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "an environment variable name", &m.APIKeyEnv) }},
		field{name: "timeout", accepts: "a duration > 0", def: "2m", doc: "per attempt",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &m.Timeout) }},
		field{name: "rateLimit", accepts: "`{requests, tokens, interval, maxConcurrent}`", def: "none", doc: "the model's calls behind a limiter; at least one of the three bounds",
			fn: func(at string, _, v ast.Node) { m.RateLimit = d.rateLimit(v, at) }},
	)
	switch {
	case offline && endpoint:
		d.errf(k, "%s: offline and url/name both given; want one", what)
	case endpoint:
		m.Offline = false
		if m.URL == "" || m.Name == "" {
			d.errf(k, "%s: an endpoint needs url and name", what)
		}
	default:
		m.Offline = true
	}
}

// tool reads one entry of an agent's tools: exactly one kind.
func (d *dec) tool(n ast.Node, what string) ToolSpec {
	t := ToolSpec{Pos: d.pos(n)}
	kinds := 0
	ok := d.object(n, what,
		field{name: "http", accepts: "a mapping", doc: "an HTTP tool", fn: func(at string, k, v ast.Node) {
			kinds++
			t.Kind, t.Method = "http", "POST"
			d.object(v, at,
				field{name: "name", required: true, accepts: "a tool name", doc: "the tool's name",
					fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a tool name", &t.Name) }},
				field{name: "description", accepts: "a string", def: "none", doc: "what the model is told it does",
					fn: func(at string, _, v ast.Node) { d.str(v, at, &t.Description) }},
				field{name: "url", required: true, accepts: "an http:// or https:// URL", doc: "the tool's URL; a non-2xx reply is an error result the model sees",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "an http:// or https:// URL", &t.URL) &&
							!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
							d.errf(v, "%s: %q: want an http:// or https:// URL", at, t.URL)
						}
					}},
				field{name: "method", accepts: "`GET`, `POST`", def: "`POST`", doc: "POST sends the arguments as the JSON body, GET as query parameters",
					fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &t.Method, "GET", "POST") }},
				field{name: "parameters", accepts: "a JSON Schema object", def: "none", doc: "the tool's arguments", fn: func(at string, _, v ast.Node) {
					if p, ok := d.anyValue(v, 0).(map[string]any); ok {
						t.Parameters = p
					} else {
						d.errf(v, "%s: want a JSON Schema object, such as {type: object, properties: {sku: {type: string}}}", at)
					}
				}},
			)
		}},
		field{name: "mcp", accepts: "a mapping", doc: "every tool of an MCP server", fn: func(at string, k, v ast.Node) {
			kinds++
			t.Kind = "mcp"
			d.object(v, at,
				field{name: "command", accepts: "a program and its arguments", def: "one of two", doc: "the server over stdio",
					fn: func(at string, _, v ast.Node) { d.strings(v, at, &t.Command, nil) }},
				field{name: "url", accepts: "an http:// or https:// URL", def: "one of two", doc: "the server over streamable HTTP",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "the MCP server's HTTP endpoint", &t.URL) &&
							!strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
							d.errf(v, "%s: %q: want an http:// or https:// URL", at, t.URL)
						}
					}},
				field{name: "headers", accepts: "header: value (`${ENV}` expanded)", def: "none", doc: "with `url`: headers on every request, never logged",
					fn: func(at string, _, v ast.Node) {
						t.HeadersPos = d.pos(v)
						m, ok := d.anyValue(v, 0).(map[string]any)
						if !ok {
							d.errf(v, "%s: want a map of header names to values, such as {Authorization: 'Bearer ${MCP_TOKEN}'}", at)
							return
						}
						t.Headers = map[string]string{}
						for name, val := range m {
							sv, ok := val.(string)
							if !ok || name == "" {
								d.errf(v, "%s.mcp.headers.%s: want a string value (environment variables as ${VAR})", what, name)
								continue
							}
							// Checked here, expanded when the job is built: the
							// spec keeps the reference, not the secret.
							if x, err := expandEnv(sv); err != nil {
								d.errf(v, "%s.mcp.headers.%s: %v", what, name, err)
							} else if x == "" {
								d.errf(v, "%s.mcp.headers.%s: the value is empty; set the environment variable it names", what, name)
							}
							t.Headers[name] = sv
						}
					}},
				field{name: "retries", accepts: "a mapping", def: "3 attempts, 200ms doubling to 5s", doc: "bounds the retries of transient failures",
					fn: func(at string, _, v ast.Node) {
						r := &MCPRetrySpec{}
						t.Retry = r
						d.object(v, at,
							field{name: "attempts", accepts: "an integer from 1 to 100", def: "3", doc: "attempts per call",
								fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100, &r.Attempts) }},
							field{name: "initial", accepts: "a duration > 0", def: "200ms", doc: "the first back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Initial) }},
							field{name: "max", accepts: "a duration > 0", def: "5s", doc: "the longest back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Max) }},
							field{name: "timeout", accepts: "a duration > 0", def: "none", doc: "bound on each attempt",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Timeout) }},
						)
					}},
				field{name: "resources", accepts: "true or false", def: "`false`", doc: "add a `read_resource` tool over the server's resources",
					fn: func(at string, _, v ast.Node) { d.boolean(v, at, &t.Resources) }},
			)
			if (len(t.Command) == 0) == (t.URL == "") {
				d.errf(k, "%s: want exactly one of command (a program and its arguments, over stdio) or url (streamable HTTP)", at)
			}
			if len(t.Headers) > 0 && t.URL == "" {
				d.errAt(t.HeadersPos, "%s.mcp.headers: headers apply to an MCP server over HTTP (url); a command gets its settings from its environment", what)
			}
		}},
		field{name: "retrieval", accepts: "a mapping", doc: "a search tool over the documents of a JSON-lines file (agents.md, \"Retrieval\")",
			fn: func(at string, k, v ast.Node) {
				kinds++
				d.retrieval(v, at, &t)
			}},
		field{name: "approval", accepts: "`{deadline, onTimeout}`", def: "none", doc: "every call of the entry's tools waits for a human's answer; needs `approvals`",
			fn: func(at string, k, v ast.Node) { t.Approval = d.approval(k, v, at) }},
	)
	if ok && kinds != 1 {
		d.errf(n, "%s: want exactly one of http, mcp, retrieval", what)
	}
	return t
}
