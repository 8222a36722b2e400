package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/answers"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
)

// Human approval of an agent step's tool calls, in YAML: a tool entry's
// approval makes each of its calls an agent.Await (the wait named after
// the tool) before the call runs; the answers come from a Kafka topic
// keyed like the agent (agent.ApplyWithAnswers), and optionally through
// an HTTP endpoint that writes them to that topic (agent/answers).
//
//	approve  -> the call runs (durably, like any tool call with a store)
//	reject   -> the call does not run; the model gets the rejection as
//	            the tool's result
//	deadline -> onTimeout reject: as a rejection ("no answer within ...");
//	            onTimeout fail: the action fails (agent.ErrWaitTimedOut),
//	            the input goes to the step's dead letters
//
// A bounded source beside the unbounded answers topic: the end of input
// waits for the pending approvals, each at most until its deadline, and
// then stops the answers source (agent.Options.EndAnswers), so the
// answers topic never holds the job's completion.

// ApprovalSpec is a tool entry's approval: its calls wait for an answer.
type ApprovalSpec struct {
	Pos Pos
	// Deadline bounds each wait (processing time, from the wait's start;
	// kept across restores with a store). Required: the waiting input
	// holds the step's watermark until it ends.
	Deadline time.Duration
	// OnTimeout is reject (default) or fail.
	OnTimeout string
}

// ApprovalsSpec is an agent step's approvals: the Kafka topic its answers
// come from, and where its requests go.
type ApprovalsSpec struct {
	Pos Pos
	// Topic holds the answers (JSON agent.Answer, record key = agent key).
	Topic    string
	TopicPos Pos
	// Requests, when set, receives one record per wait, made once per
	// wait also across restores (agent.Wait.Ask): {key, wait, id, tool,
	// arguments, step}, keyed by the agent key.
	Requests    string
	RequestsPos Pos
	// MaxAnswersPerKey is agent.Options.MaxAnswersPerKey (0: its
	// default, 64).
	MaxAnswersPerKey int
}

// approval decodes a tool entry's approval: {deadline, onTimeout}.
func (d *dec) approval(k, n ast.Node, what string) *ApprovalSpec {
	a := &ApprovalSpec{Pos: d.pos(k), OnTimeout: "reject"}
	d.object(n, what,
		field{name: "deadline", required: true, accepts: "a duration > 0", doc: "how long a call waits for an answer (processing time, kept across restores with a `store`)",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &a.Deadline) }},
		field{name: "onTimeout", accepts: "`reject`, `fail`", def: "`reject`", doc: "no answer by the deadline: tell the model it was rejected, or fail the action (needs `continueOnError`)",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &a.OnTimeout, "reject", "fail") }},
	)
	return a
}

// approvals decodes agent.approvals: {topic, requests, maxAnswersPerKey}.
func (d *dec) approvals(k, n ast.Node, what string) *ApprovalsSpec {
	a := &ApprovalsSpec{Pos: d.pos(k)}
	d.object(n, what,
		field{name: "topic", required: true, accepts: "a topic name", doc: "where the answers come from: one JSON answer per record, keyed by the agent key",
			fn: func(at string, _, v ast.Node) {
				a.TopicPos = d.pos(v)
				d.nonEmpty(v, at, "the Kafka topic the answers come from, keyed like the agent", &a.Topic)
			}},
		field{name: "requests", accepts: "a topic name", def: "none", doc: "gets one record per wait `{key, wait, id, tool, arguments, step}`",
			fn: func(at string, _, v ast.Node) {
				a.RequestsPos = d.pos(v)
				d.nonEmpty(v, at, "a Kafka topic for the approval requests", &a.Requests)
			}},
		field{name: "maxAnswersPerKey", accepts: "an integer from 1 to 65536", def: "64", doc: "the answers a key keeps that no wait has taken yet; beyond it the oldest is dropped, logged and counted (`weir_answers_dropped`). Give a key room for its answers of a checkpoint interval: after a restore they are read again before the waits that take them",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 65536, &a.MaxAnswersPerKey) }},
	)
	if a.Topic != "" && a.Topic == a.Requests {
		d.errAt(a.RequestsPos, "%s.requests: %q is the answers topic too; want another topic (a request is not an answer)", what, a.Requests)
	}
	return a
}

// jobApprovals decodes job.approvals: {httpAddr}.
func (d *dec) jobApprovals(n ast.Node, j *JobSpec) {
	d.object(n, "job.approvals",
		field{name: "httpAddr", required: true, accepts: "host:port", def: "none", doc: "serve the HTTP endpoint taking answers to the agent steps' approvals (`POST /answers`, `POST /answers/TOPIC`, `GET /approvals`; a host left out is loopback; listened on before the job starts; `--approvals-addr` overrides)",
			fn: func(at string, _, v ast.Node) {
				j.ApprovalsAddrPos = d.pos(v)
				if d.nonEmpty(v, at, "host:port such as 127.0.0.1:8089", &j.ApprovalsAddr) {
					if _, err := approvalsListenAddr(j.ApprovalsAddr); err != nil {
						d.errf(v, "%s: %v", at, err)
					}
				}
			}},
	)
}

// checkApprovals checks what needs the whole agent step: a tool with an
// approval needs the step's approvals topic and the other way round, and
// onTimeout fail needs continueOnError (the input then goes to the step's
// dead letters instead of failing the job).
func (d *dec) checkApprovals(what string, a *AgentSpec) {
	any := false
	for i, t := range a.Tools {
		ap := t.Approval
		if ap == nil {
			continue
		}
		any = true
		at := fmt.Sprintf("%s.tools[%d].approval", what, i)
		if a.Approvals == nil {
			d.errAt(ap.Pos, "%s: needs %s.approvals.topic (the Kafka topic the answers come from, keyed like the agent)", at, what)
		}
		if ap.OnTimeout == "fail" && !a.ContinueOnError {
			d.errAt(ap.Pos, "%s: onTimeout fail needs %s.continueOnError: true (the input then goes to the step's dead letters); or use onTimeout reject (the model gets the time-out as the tool's result)", at, what)
		}
	}
	if a.Approvals != nil && !any {
		d.errAt(a.Approvals.Pos, "%s.approvals: no tool of the step has an approval; add approval: {deadline: 1h} to a tool entry, or drop approvals", what)
	}
}

// approvalsListenAddr is the address the approvals endpoint listens on:
// host:port, the host loopback when it is empty.
func approvalsListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%q: want host:port, such as 127.0.0.1:8089 (no host: loopback; 0.0.0.0 listens on every interface)", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("%q: port %q: want a number from 0 to 65535", addr, port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// approvalsOf lists the agent steps' approvals of the spec, in step
// order (the main steps, then the outputs' in name order).
func approvalsOf(s *Spec) []*ApprovalsSpec {
	var out []*ApprovalsSpec
	add := func(steps []StepSpec) {
		for i := range steps {
			if a := steps[i].Agent; a != nil && a.Approvals != nil {
				out = append(out, a.Approvals)
			}
		}
	}
	add(s.Steps)
	for _, name := range sortedKeys(s.Outputs) {
		add(s.Outputs[name].Steps)
	}
	return out
}

// approvalRuntime is what an agent step's tools need to wait for an
// approval: the approvals per tool name, and the producer of requests.
type approvalRuntime struct {
	step     string
	byTool   map[string]*ApprovalSpec
	requests *kgo.Client // nil: no requests topic
	topic    string
}

// of returns the approval of the tool named name (nil: none, or no
// approvals at all).
func (r *approvalRuntime) of(name string) *ApprovalSpec {
	if r == nil {
		return nil
	}
	return r.byTool[name]
}

// approvalRequest is a record of the requests topic.
type approvalRequest struct {
	Key       string          `json:"key"`
	Wait      string          `json:"wait"`
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Step      string          `json:"step"`
}

// await waits for the approval of the tool call tc. It returns whether
// the call may run and, when it may not, the tool result the model gets
// instead; an error fails the action (onTimeout fail, or the operator
// closing).
func (r *approvalRuntime) await(c *agent.RunnerContext, tc model.ToolCall, ap *ApprovalSpec) (bool, string, error) {
	w := agent.Wait{Name: tc.Name, Timeout: ap.Deadline}
	if r.requests != nil {
		key := fmt.Sprint(c.Key())
		w.Ask = func(ctx context.Context, id string) error {
			v, err := json.Marshal(approvalRequest{Key: key, Wait: tc.Name, ID: id, Tool: tc.Name, Arguments: tc.Arguments, Step: r.step})
			if err != nil {
				return err
			}
			return r.requests.ProduceSync(ctx, &kgo.Record{Topic: r.topic, Key: []byte(key), Value: v}).FirstErr()
		}
	}
	a, err := agent.Await(c, w)
	switch {
	case errors.Is(err, agent.ErrWaitTimedOut) && ap.OnTimeout == "reject":
		return false, fmt.Sprintf("not approved: no answer within %v (the approval of %s timed out); the call was not made", ap.Deadline, tc.Name), nil
	case err != nil:
		return false, "", err
	}
	ok, why := decision(a.Value)
	if ok {
		return true, "", nil
	}
	return false, "not approved: " + why + "; the call was not made", nil
}

// decision reads an answer's value: true, "approve" or "approved",
// {"approved": true} or {"decision": "approve"} approve; anything else
// rejects (an answer that cannot be read never runs a tool). why says
// what the model is told: the rejection, with "by" and "reason" if the
// answer has them.
func decision(v json.RawMessage) (bool, string) {
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b, "rejected"
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		ok := isApprove(s)
		return ok, "rejected"
	}
	var o struct {
		Approved *bool  `json:"approved"`
		Decision string `json:"decision"`
		By       string `json:"by"`
		Reason   string `json:"reason"`
	}
	if json.Unmarshal(v, &o) != nil || (o.Approved == nil && o.Decision == "") {
		return false, "rejected (the answer was neither approve nor reject: want true, \"approve\", {\"approved\": true} or {\"decision\": \"approve\"})"
	}
	ok := (o.Approved != nil && *o.Approved) || (o.Approved == nil && isApprove(o.Decision))
	why := "rejected"
	if o.By != "" {
		why += " by " + o.By
	}
	if o.Reason != "" {
		why += ": " + o.Reason
	}
	return ok, why
}

func isApprove(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "approve", "approved", "yes":
		return true
	}
	return false
}

// answersStream adds the step's answers source: the approvals topic, read
// from the job's start (a restore reads from the checkpointed offsets),
// stopped once the agent's input has ended and its waits have ended
// (stop, closed by agent.Options.EndAnswers).
func (b *builder) answersStream(name string, a *ApprovalsSpec, stop <-chan struct{}) (weir.Stream[agent.Answer], error) {
	o := kafka.Options{Brokers: b.j.Brokers, Security: b.j.Security, Topics: []string{a.Topic},
		Start: kafka.StartAt(b.started), Stop: stop}
	src := kafka.NewSource(o, kafka.JSON[agent.Answer]())
	if err := src.Validate(); err != nil {
		return weir.Stream[agent.Answer]{}, fmt.Errorf("%s: approvals: %w", a.Pos, err)
	}
	return weir.FromSource(b.env, name, src, watermark.NoWatermarks[agent.Answer]()).UID(name), nil
}

// approvalRuntimeOf makes the approval runtime of an agent step (nil
// without approvals); the closer closes the requests producer.
func (b *builder) approvalRuntimeOf(name string, a *AgentSpec) (*approvalRuntime, func() error, error) {
	if a.Approvals == nil {
		return nil, nil, nil
	}
	r := &approvalRuntime{step: name, byTool: map[string]*ApprovalSpec{}}
	if a.Approvals.Requests != "" {
		sec, err := b.j.Security.Opts()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: approvals.requests: %w", a.Approvals.RequestsPos, err)
		}
		cl, err := kgo.NewClient(append(sec, kgo.SeedBrokers(b.j.Brokers...))...)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: approvals.requests: %w", a.Approvals.RequestsPos, err)
		}
		r.requests, r.topic = cl, a.Approvals.Requests
		return r, func() error { cl.Close(); return nil }, nil
	}
	return r, nil, nil
}

// closeGrace bounds how long the approvals endpoint waits, when the job
// ends, for its requests in progress.
const closeGrace = 5 * time.Second

// approvalsServer is the HTTP endpoint of job.approvals.httpAddr:
//
//	POST /answers          one answer (agent.Answer as JSON) to the only
//	                       approvals topic (404 with several: name it)
//	POST /answers/{topic}  one answer to that approvals topic
//	GET  /approvals        the pending waits of the job's agent steps
//
// Answers go through the topic (package agent/answers), the one durable
// path into the job.
type approvalsServer struct {
	srv      *http.Server
	handlers []*answers.Handler
}

// startApprovals listens on addr and serves the endpoint for the topics'
// answers and the agent operators' pending waits.
func (j *Job) startApprovals(addr string) error {
	listen, err := approvalsListenAddr(addr)
	if err != nil {
		return fmt.Errorf("pipeline: approvals: %w", err)
	}
	topics := map[string]bool{}
	for _, a := range approvalsOf(j.Spec) {
		topics[a.Topic] = true
	}
	if len(topics) == 0 {
		return fmt.Errorf("pipeline: approvals: an HTTP address (%s) but no agent step has approvals (agent.approvals.topic)", addr)
	}
	mux := http.NewServeMux()
	s := &approvalsServer{}
	names := sortedKeys(topics)
	for _, t := range names {
		h, err := answers.NewHandler(answers.Options{Brokers: j.Brokers, Security: j.Security, Topic: t})
		if err != nil {
			s.close()
			return fmt.Errorf("pipeline: approvals: %w", err)
		}
		s.handlers = append(s.handlers, h)
		mux.Handle("/answers/"+t, h)
		if len(names) == 1 {
			mux.Handle("/answers", h)
		}
	}
	if len(names) > 1 {
		mux.HandleFunc("/answers", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "pipeline: several approvals topics; POST to /answers/TOPIC, TOPIC one of "+strings.Join(names, ", "), http.StatusNotFound)
		})
	}
	ops := j.agentOps
	mux.HandleFunc("/approvals", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "pipeline: GET the pending approvals; POST answers to /answers", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		type pending struct {
			Step string `json:"step"`
			agent.PendingWait
		}
		out := []pending{}
		for _, op := range ops {
			for _, st := range agent.Status(ctx, op) {
				for _, w := range st.PendingWaits {
					out = append(out, pending{Step: op, PendingWait: w})
				}
			}
		}
		sort.SliceStable(out, func(i, k int) bool { return out[i].DeadlineMs < out[k].DeadlineMs })
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		s.close()
		return fmt.Errorf("pipeline: approvals: %w", err)
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	j.approvals = s
	j.approvalsAddr = ln.Addr().String()
	return nil
}

// close stops the endpoint once the requests in progress have finished
// (at most closeGrace): the answer that ended the job, written to its topic
// just before, gets its 202, not a closed connection that its client
// would take for a failure. Then the producers close.
func (s *approvalsServer) close() {
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		if s.srv.Shutdown(ctx) != nil {
			s.srv.Close()
		}
		cancel()
	}
	for _, h := range s.handlers {
		h.Close()
	}
}

// ApprovalsAddr is the address the approvals endpoint listens on, once
// started ("" without one).
func (j *Job) ApprovalsAddr() string {
	if j.approvals == nil {
		return ""
	}
	return j.approvalsAddr
}
