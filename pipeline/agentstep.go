package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"text/template"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/runtime"
)

// agentModel is the name of the agent step's model in agent.Agent.Models.
const agentModel = "model"

// buildAgent turns an agent step into an agent.Agent with one action:
// render the prompt from the record, call the model, run the tools it asks
// for and call it again (at most MaxSteps model calls), then emit the
// record with the model's last text in the output field. Every model and
// tool call goes through RunnerContext.Chat and CallTool, so with a store
// a call that returned before a crash is not made again after the restore.
// MCP servers are connected here (their tools are listed at start); the
// returned closers disconnect them. With ap, the calls of tools whose
// entry has an approval wait for it first (approval.go); without, they
// run at once (AgentOf: a replay answers tool calls from the event log).
func buildAgent(ctx context.Context, a *AgentSpec, ap *approvalRuntime) (*agent.Agent, *template.Template, []func() error, error) {
	var closers []func() error
	fail := func(err error) (*agent.Agent, *template.Template, []func() error, error) {
		for _, c := range closers {
			c()
		}
		return nil, nil, nil, err
	}
	m, err := chatModel(&a.Model, len(a.Tools) > 0)
	if err != nil {
		return fail(err)
	}
	models := map[string]model.ChatModel{agentModel: m}
	if a.FallbackModel != nil {
		fm, err := chatModel(a.FallbackModel, len(a.Tools) > 0)
		if err != nil {
			return fail(err)
		}
		models[agentFallbackModel] = fm
	}
	var tools []tool.Tool
	for _, t := range a.Tools {
		before := len(tools)
		switch t.Kind {
		case "http":
			ht, err := httpTool(t)
			if err != nil {
				return fail(fmt.Errorf("%s: %w", t.Pos, err))
			}
			tools = append(tools, ht)
		case "mcp":
			opts, err := mcpOptions(t)
			if err != nil {
				return fail(fmt.Errorf("%s: %w", t.Pos, err))
			}
			var c *tool.MCPClient
			if len(t.Command) > 0 {
				c, err = tool.MCPStdioWith(ctx, exec.Command(t.Command[0], t.Command[1:]...), opts)
			} else {
				c, err = tool.MCPHTTPWith(ctx, t.URL, opts)
			}
			if err != nil {
				return fail(fmt.Errorf("%s: MCP server: %w", t.Pos, err))
			}
			closers = append(closers, c.Close)
			tools = append(tools, c.Tools()...)
			if t.Resources {
				rt, err := c.ResourceTool(ctx, "")
				if err != nil {
					return fail(fmt.Errorf("%s: MCP server: %w", t.Pos, err))
				}
				tools = append(tools, rt)
			}
		case "retrieval":
			rt, err := retrievalTool(ctx, t)
			if err != nil {
				return fail(fmt.Errorf("%s: %w", t.Pos, err))
			}
			tools = append(tools, rt)
		}
		if ap != nil && t.Approval != nil {
			// The entry's tools (an MCP server has several) wait for its
			// approval.
			for _, tt := range tools[before:] {
				ap.byTool[tt.Spec().Name] = t.Approval
			}
		}
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		return fail(fmt.Errorf("%s: tools: %w", a.Model.Pos, err))
	}
	specs := set.Specs()
	tmpl, err := template.New("prompt").Option("missingkey=zero").Parse(a.Prompt)
	if err != nil {
		return fail(fmt.Errorf("%s: prompt: %w", a.PromptPos, err)) // checked by Parse
	}
	maxSteps := a.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 8
	}
	output := a.Output
	system := a.System
	run := func(c *agent.RunnerContext, ev agent.Event) error {
		in, err := agent.Input[Record](ev)
		if err != nil {
			return err
		}
		var prompt strings.Builder
		if err := tmpl.Execute(&prompt, in); err != nil {
			// Not reached: promptCheckOp sent the records it fails for to
			// the dead letters.
			return fmt.Errorf("pipeline: agent prompt: %w", err)
		}
		var msgs []model.Message
		if system != "" {
			msgs = append(msgs, model.System(system))
		}
		msgs = append(msgs, model.User(prompt.String()))
		var answer string
		for step := 0; step < maxSteps; step++ {
			resp, err := c.Chat(agentModel, model.Request{Messages: msgs, Tools: specs})
			if err != nil {
				return err
			}
			answer = resp.Message.Content
			if len(resp.Message.ToolCalls) == 0 {
				break
			}
			msgs = append(msgs, resp.Message)
			for _, tc := range resp.Message.ToolCalls {
				if apr := ap.of(tc.Name); apr != nil {
					ok, refused, err := ap.await(c, tc, apr)
					if err != nil {
						return err
					}
					if !ok {
						msgs = append(msgs, model.ToolResult(tc.ID, refused))
						continue
					}
				}
				res, err := c.CallTool(tc.Name, tc.Arguments)
				if err != nil {
					return err
				}
				msgs = append(msgs, model.ToolResult(tc.ID, res.Content))
			}
		}
		out := cloneRecord(in, 1)
		out[output] = answer
		c.Output(out)
		return nil
	}
	actions := []agent.Action{agent.NewAction("respond", run, agent.TypeInput)}
	if a.When != "" {
		// Records that do not meet the condition pass through unchanged.
		actions[0] = actions[0].WithCondition(a.When)
		actions = append(actions, agent.NewAction("pass", func(c *agent.RunnerContext, ev agent.Event) error {
			in, err := agent.Input[Record](ev)
			if err != nil {
				return err
			}
			c.Output(in)
			return nil
		}, agent.TypeInput).WithCondition("!("+a.When+")"))
	}
	return &agent.Agent{
		Actions: actions,
		Models:  models,
		Tools:   tools,
	}, tmpl, closers, nil
}

// chatModel makes the model of a model spec (offline, or an
// OpenAI-compatible endpoint), behind its rate limit if it has one.
func chatModel(s *ModelSpec, toolCalls bool) (model.ChatModel, error) {
	var m model.ChatModel
	if s.Offline {
		var lat model.Latency
		if s.Latency > 0 {
			lat = model.Latency{Dist: "exponential", Mean: s.Latency}
		}
		m = &model.Offline{Seed: s.Seed, Latency: lat, ToolCalls: toolCalls}
	} else {
		cfg := model.OpenAIConfig{BaseURL: s.URL, Model: s.Name, Timeout: s.Timeout}
		if s.APIKeyEnv != "" {
			cfg.APIKey = os.Getenv(s.APIKeyEnv)
			if cfg.APIKey == "" {
				return nil, fmt.Errorf("%s: model.apiKeyEnv: $%s is empty or unset", s.Pos, s.APIKeyEnv)
			}
		}
		m = model.OpenAI(cfg)
	}
	m, err := rateLimited(m, s.RateLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: rateLimit: %w", s.Pos, err)
	}
	return m, nil
}

// promptCheckOp renders an agent step's prompt for each record before the
// agent's keyBy: a record the template fails on (a field of the wrong
// kind for it, a function that fails) is a dead letter of the step (P7)
// instead of an action that fails the job.
type promptCheckOp struct {
	runtime.Base[Record]
	tmpl *template.Template
	at   string
	tag  *runtime.OutputTag[Record]
	dead stepDeadLetters
}

func (o *promptCheckOp) Open(ctx *runtime.Context, out runtime.Output[Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, o.tag, o.at)
	return nil
}

func (o *promptCheckOp) ProcessRecord(r runtime.Record[Record]) error {
	if err := o.tmpl.Execute(io.Discard, r.Value); err != nil {
		o.dead.fail(r, fmt.Sprintf("agent at %s: prompt: %v", o.at, err))
		return nil
	}
	o.Out.Collect(r)
	return nil
}

// httpTool calls a URL with the model's arguments: POST sends them as the
// JSON body, GET as query parameters. A reply with status 2xx is the
// result's content; any other status is an IsError result the model sees.
func httpTool(t ToolSpec) (tool.Tool, error) {
	params := t.Parameters
	if params == nil {
		params = map[string]any{"type": "object"}
	}
	schema, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("http tool %s: parameters: %w", t.Name, err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	method, target := t.Method, t.URL
	return tool.Raw{
		ToolSpec: model.ToolSpec{Name: t.Name, Description: t.Description, Parameters: schema},
		Fn: func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
			var req *http.Request
			var err error
			if method == "GET" {
				var m map[string]any
				if len(args) > 0 {
					if err := json.Unmarshal(args, &m); err != nil {
						return tool.Errorf("arguments are not a JSON object: %v", err), nil
					}
				}
				u, perr := url.Parse(target)
				if perr != nil {
					return tool.Result{}, perr
				}
				q := u.Query()
				for k, v := range m {
					if s, ok := v.(string); ok {
						q.Set(k, s)
					} else {
						b, _ := json.Marshal(v)
						q.Set(k, string(b))
					}
				}
				u.RawQuery = q.Encode()
				req, err = http.NewRequestWithContext(ctx, method, u.String(), nil)
			} else {
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				req, err = http.NewRequestWithContext(ctx, method, target, bytes.NewReader(args))
				if req != nil {
					req.Header.Set("Content-Type", "application/json")
				}
			}
			if err != nil {
				return tool.Result{}, err
			}
			if key, ok := tool.IdempotencyKey(ctx); ok {
				req.Header.Set("Idempotency-Key", key)
			}
			resp, err := client.Do(req)
			if err != nil {
				return tool.Result{}, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil {
				return tool.Result{}, err
			}
			if resp.StatusCode/100 != 2 {
				return tool.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body))), nil
			}
			return tool.Result{Content: string(body)}, nil
		},
	}, nil
}

// mcpOptions turns an MCP tool's headers and retries into tool.MCPOptions.
// Header values expand environment variables (${VAR}, ${VAR:-default});
// an error names the variable, never a value.
func mcpOptions(t ToolSpec) (tool.MCPOptions, error) {
	var opts tool.MCPOptions
	if len(t.Headers) > 0 {
		opts.Headers = make(map[string]string, len(t.Headers))
		for name, v := range t.Headers {
			val, err := expandEnv(v)
			if err != nil {
				return opts, fmt.Errorf("mcp.headers.%s: %w", name, err)
			}
			if val == "" {
				return opts, fmt.Errorf("mcp.headers.%s: the value is empty; set the environment variable it names", name)
			}
			opts.Headers[name] = val
		}
	}
	if r := t.Retry; r != nil {
		opts.Retry = tool.MCPRetry{Attempts: r.Attempts, Initial: r.Initial, Max: r.Max, Timeout: r.Timeout}
	}
	return opts, nil
}

// AgentOf builds the agent of the spec's agent step named name ("" means
// the only agent step) as `weir run` builds it (model, fallback model,
// tools, prompt, condition), without a job: what `weir agent replay`
// evaluates over a recorded event log. The step's store, budgets, event
// log, tracing and approvals are not built (a tool call that needs an
// approval is made, or answered from the log, without waiting). MCP servers are connected (their tools
// are listed); close disconnects them. The action's input is a Record.
func AgentOf(ctx context.Context, s *Spec, name string) (a *agent.Agent, close func() error, err error) {
	st, err := agentStep(s, name)
	if err != nil {
		return nil, nil, err
	}
	a, _, closers, err := buildAgent(ctx, st.Agent, nil)
	if err != nil {
		return nil, nil, err
	}
	return a, func() error {
		var first error
		for _, c := range closers {
			if err := c(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}

// AgentPricing is the price table (pricing) of the spec's agent step named
// name ("" means the only agent step); nil when it has none.
func AgentPricing(s *Spec, name string) (model.Pricing, error) {
	st, err := agentStep(s, name)
	if err != nil {
		return nil, err
	}
	return st.Agent.Pricing, nil
}

// agentStep finds the agent step named name ("" means the only one).
func agentStep(s *Spec, name string) (*StepSpec, error) {
	var found []*StepSpec
	var names []string
	for i := range s.Steps {
		st := &s.Steps[i]
		if st.Kind != "agent" {
			continue
		}
		names = append(names, fmt.Sprintf("%q", st.Name))
		if name == "" || st.Name == name {
			found = append(found, st)
		}
	}
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("%s: the pipeline has no agent step", s.File)
	case len(found) == 0:
		return nil, fmt.Errorf("%s: no agent step named %q; the agent steps are %s", s.File, name, strings.Join(names, ", "))
	case len(found) > 1:
		return nil, fmt.Errorf("%s: %d agent steps; name one (the agent steps are %s, named by their name: key)", s.File, len(found), strings.Join(names, ", "))
	}
	return found[0], nil
}
