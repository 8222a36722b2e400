package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
)

// refundTool is the HTTP tool the approvals guard: it counts its calls per
// customer (the offline model fills the customer argument from the
// prompt).
type refundTool struct {
	mu    sync.Mutex
	calls map[string]int
	srv   *httptest.Server
}

func newRefundTool(t *testing.T) *refundTool {
	r := &refundTool{calls: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls[string(body)]++
		r.mu.Unlock()
		io.WriteString(w, "refunded")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *refundTool) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

// approvalRig is an external embedded broker (it outlives the runs of a
// test) with the approvals and requests topics, and a pipeline file whose
// agent step's refund tool needs an approval.
type approvalRig struct {
	t       *testing.T
	brokers []string
	cl      *kgo.Client
	tool    *refundTool
	dir     string
	// fromKafka reads the refunds from the (unbounded) topic refunds
	// instead of a file.
	fromKafka bool
	// approvals replaces the agent step's approvals (YAML flow map;
	// empty: the answers and requests topics).
	approvals string
}

func newApprovalRig(t *testing.T) *approvalRig {
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"approvals": 2, "approval-requests": 1, "refunds": 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &approvalRig{t: t, brokers: b.Addrs(), cl: cl, tool: newRefundTool(t), dir: t.TempDir()}
}

// spec is the pipeline: one refund per customer in customers, the agent's
// refund tool behind approval (extra YAML under it), its approvals topic,
// the job's HTTP endpoint on a free loopback port, and extraAgent and
// extraJob added to the agent step and the job.
func (r *approvalRig) spec(customers []string, approval, extraAgent, extraJob string) *pipeline.Spec {
	r.t.Helper()
	var in strings.Builder
	for i, c := range customers {
		fmt.Fprintf(&in, "{\"id\":\"o%d\",\"customer\":%q,\"t\":%d}\n", i, c, 1000*(i+1))
	}
	inPath := filepath.Join(r.dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		r.t.Fatal(err)
	}
	approvals := r.approvals
	if approvals == "" {
		approvals = "{topic: approvals, requests: approval-requests}"
	}
	source := fmt.Sprintf("file: {paths: [%s]}", inPath)
	if r.fromKafka {
		source = "kafka: {topics: [refunds]}"
	}
	src := fmt.Sprintf(`
kafka: {brokers: ['%s']}
job:
  approvals: {httpAddr: '127.0.0.1:0'}
%s
source:
  %s
  timestamp: t
steps:
  - keyBy: customer
  - agent:
      prompt: 'Refund order {{.id}} of {{.customer}}'
      tools:
        - http:
            name: refund
            url: %s
            parameters: {type: object, properties: {order: {type: string}}}
          approval: %s
      approvals: %s
%s
sink:
  file: {path: %s}
`, r.brokers[0], extraJob, source, r.tool.srv.URL, approval, approvals, extraAgent, filepath.Join(r.dir, "out.jsonl"))
	spec, err := pipeline.Parse("approve.yaml", []byte(src))
	if err != nil {
		r.t.Fatal(err)
	}
	return spec
}

// run runs spec in the background; OnStart hands over the job.
type running struct {
	job  chan *pipeline.Job
	rjob chan *runtime.Job
	done chan error
	sum  pipeline.Summary
}

func runPipeline(ctx context.Context, spec *pipeline.Spec) *running {
	r := &running{job: make(chan *pipeline.Job, 1), rjob: make(chan *runtime.Job, 1), done: make(chan error, 1)}
	go func() {
		s, err := pipeline.Run(ctx, spec, pipeline.Options{Stdout: io.Discard, OnStart: func(j *pipeline.Job, rj *runtime.Job) {
			r.job <- j
			r.rjob <- rj
		}}, io.Discard)
		r.sum = s
		r.done <- err
	}()
	return r
}

// pendingWaits polls the agent step's status (what the dashboard shows as
// pending approvals) until it lists n waits.
func pendingWaits(t *testing.T, ctx context.Context, n int) []agent.PendingWait {
	t.Helper()
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		var got []agent.PendingWait
		for _, s := range agent.Status(qctx, "agent") {
			got = append(got, s.PendingWaits...)
		}
		cancel()
		if len(got) == n {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d pending approvals: %v (have %+v)", n, ctx.Err(), got)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// inFlight is the agent step's inputs not finished (-1: no status yet).
func inFlight(ctx context.Context) int {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ss := agent.Status(qctx, "agent")
	if len(ss) == 0 {
		return -1
	}
	n := 0
	for _, s := range ss {
		n += s.InFlightInputs
	}
	return n
}

func (r *approvalRig) answer(ctx context.Context, a agent.Answer) {
	r.t.Helper()
	v, _ := json.Marshal(a)
	if err := r.cl.ProduceSync(ctx, &kgo.Record{Topic: "approvals", Key: []byte(a.Key), Value: v}).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// requests reads the requests topic: wait IDs per key.
func (r *approvalRig) requests(ctx context.Context) map[string][]string {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.ConsumeTopics("approval-requests"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]string{}
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			var q struct{ Key, ID, Tool string }
			if err := json.Unmarshal(rec.Value, &q); err != nil || q.Tool != "refund" {
				r.t.Errorf("request %s: %v (tool %q)", rec.Value, err, q.Tool)
			}
			out[q.Key] = append(out[q.Key], q.ID)
		})
		if n == 0 {
			return out
		}
	}
}

func outputsByCustomer(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[m["customer"].(string)], _ = m["answer"].(string)
	}
	return out
}

// TestApprovalThroughTopicAndHTTP: two refunds wait for approval (listed
// as pending, one request each on the requests topic and on GET
// /approvals); c1 is approved through the answers topic, c2 rejected
// through the HTTP endpoint. The tool runs for c1 only, the model gets
// c2's rejection as the tool's result, and the bounded job ends although
// the answers topic does not.
func TestApprovalThroughTopicAndHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := newApprovalRig(t)
	run := runPipeline(ctx, rig.spec([]string{"c1", "c2"}, "{deadline: 1h}", "", ""))
	j := <-run.job
	pending := pendingWaits(t, ctx, 2)
	ids := map[string]string{}
	for _, w := range pending {
		if w.Wait != "refund" || w.Action != "respond" {
			t.Errorf("pending wait %+v: want wait refund of action respond", w)
		}
		ids[w.Key] = w.ID
	}
	resp, err := http.Get("http://" + j.ApprovalsAddr() + "/approvals")
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		Step string
		agent.PendingWait
	}
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || len(listed) != 2 || listed[0].Step != "agent" {
		t.Fatalf("GET /approvals: %+v, %v; want the 2 pending waits of step agent", listed, err)
	}
	if n := rig.tool.total(); n != 0 {
		t.Fatalf("the tool ran %d times before any approval", n)
	}

	rig.answer(ctx, agent.Answer{Key: "c1", Wait: "refund", ID: ids["c1"], Value: json.RawMessage(`{"approved":true,"by":"ann"}`)})
	body := fmt.Sprintf(`{"key":"c2","wait":"refund","id":%q,"value":{"approved":false,"by":"bob","reason":"too big"}}`, ids["c2"])
	resp, err = http.Post("http://"+j.ApprovalsAddr()+"/answers", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /answers: %s, want 202", resp.Status)
	}
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	if n := rig.tool.total(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (c1 approved, c2 rejected)", n)
	}
	out := outputsByCustomer(t, filepath.Join(rig.dir, "out.jsonl"))
	if !strings.Contains(out["c1"], `using "refunded"`) {
		t.Errorf("c1's answer %q: want the tool's result", out["c1"])
	}
	if !strings.Contains(out["c2"], "not approved: rejected by bob: too big") {
		t.Errorf("c2's answer %q: want the rejection as the tool's result", out["c2"])
	}
	reqs := rig.requests(ctx)
	for _, c := range []string{"c1", "c2"} {
		if len(reqs[c]) != 1 || reqs[c][0] != ids[c] {
			t.Errorf("requests of %s: %q, want one, for wait %s", c, reqs[c], ids[c])
		}
	}
}

// TestApprovalTimeout: nobody answers. With onTimeout reject the model
// gets the time-out as the tool's result and the job ends; with onTimeout
// fail the input goes to the step's dead letters. The tool never runs.
func TestApprovalTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := newApprovalRig(t)
	run := runPipeline(ctx, rig.spec([]string{"c1"}, "{deadline: 200ms, onTimeout: reject}", "", ""))
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	out := outputsByCustomer(t, filepath.Join(rig.dir, "out.jsonl"))
	if !strings.Contains(out["c1"], "not approved: no answer within 200ms") {
		t.Errorf("c1's answer %q: want the time-out as the tool's result", out["c1"])
	}

	run = runPipeline(ctx, rig.spec([]string{"c1", "c2"}, "{deadline: 200ms, onTimeout: fail}", "      continueOnError: true", ""))
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	if run.sum.DeadLetters != 2 {
		t.Errorf("%d dead letters, want 2 (both inputs timed out with onTimeout fail)", run.sum.DeadLetters)
	}
	if n := rig.tool.total(); n != 0 {
		t.Fatalf("the tool ran %d times, want 0", n)
	}
}

// TestApprovalSurvivesRestore: the job (reading the refunds from Kafka)
// stops after a checkpoint while c1's approval is pending; the approval is
// written to the topic while it is down. The same pipeline resumes from
// the checkpoint: the wait keeps its ID (the answer, naming it, resumes
// the action), the human is not asked again (one request), and the tool
// runs once.
func TestApprovalSurvivesRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rig := newApprovalRig(t)
	rig.fromKafka = true
	v := `{"id":"o0","customer":"c1","t":1000}`
	if err := rig.cl.ProduceSync(ctx, &kgo.Record{Topic: "refunds", Key: []byte("c1"), Value: []byte(v)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	extraJob := fmt.Sprintf("  checkpoint: {dir: %s}", filepath.Join(rig.dir, "cp"))
	extraAgent := fmt.Sprintf("      store: {wal: %s}", filepath.Join(rig.dir, "wal"))
	spec := func() *pipeline.Spec { return rig.spec([]string{"c1"}, "{deadline: 1h}", extraAgent, extraJob) }

	runCtx, stop := context.WithCancel(ctx)
	run := runPipeline(runCtx, spec())
	rj := <-run.rjob
	first := pendingWaits(t, ctx, 1)[0]
	if _, _, err := rj.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	if !run.sum.Stopped {
		t.Fatal("the first run was not stopped")
	}
	rig.answer(ctx, agent.Answer{Key: "c1", Wait: "refund", ID: first.ID, Value: json.RawMessage(`"approve"`)})

	runCtx, stop = context.WithCancel(ctx)
	run = runPipeline(runCtx, spec())
	for rig.tool.total() == 0 {
		select {
		case err := <-run.done:
			t.Fatalf("the resumed job ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("the resumed job did not take the answer to wait %s: a new wait, or the answer lost (%v)", first.ID, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The output leaves once the input has finished.
	for inFlight(ctx) != 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no output after the approval")
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop()
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	if n := rig.tool.total(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	if reqs := rig.requests(ctx); len(reqs["c1"]) != 1 {
		t.Fatalf("requests %q: want one (the resumed job does not ask again)", reqs["c1"])
	}
	out := outputsByCustomer(t, filepath.Join(rig.dir, "out.jsonl"))
	if !strings.Contains(out["c1"], `using "refunded"`) {
		t.Errorf("c1's answer %q: want the tool's result", out["c1"])
	}

}

// TestApprovalsMaxAnswersPerKey: approvals.maxAnswersPerKey is the room a
// key has for answers no wait has taken: with 2, three answers to a wait
// c1 does not have, then the answer to its refund, push out two (the
// oldest untaken ones), counted; the refund still takes its answer.
func TestApprovalsMaxAnswersPerKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := newApprovalRig(t)
	rig.approvals = "{topic: approvals, maxAnswersPerKey: 2}"
	run := runPipeline(ctx, rig.spec([]string{"c1", "c2"}, "{deadline: 1h}", "", ""))
	rj := <-run.rjob
	ids := map[string]string{}
	for _, w := range pendingWaits(t, ctx, 2) {
		ids[w.Key] = w.ID
	}
	for range 3 {
		rig.answer(ctx, agent.Answer{Key: "c1", Wait: "other", Value: json.RawMessage(`true`)})
	}
	rig.answer(ctx, agent.Answer{Key: "c1", Wait: "refund", ID: ids["c1"], Value: json.RawMessage(`true`)})
	rig.answer(ctx, agent.Answer{Key: "c2", Wait: "refund", ID: ids["c2"], Value: json.RawMessage(`false`)})
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
	if n := rig.tool.total(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (c1 approved, c2 rejected)", n)
	}
	if n := rj.Metrics().Sum("agent", "answersDropped"); n != 2 {
		t.Fatalf("answersDropped %d, want 2 (3 untaken answers and a taken one, room for 2)", n)
	}
}

// TestApprovalsEndpointFinishesRequestsWhenTheJobEnds: a request in
// progress when the job ends is served to the end: an answer whose body
// is still coming when the endpoint stops gets its 202, not a closed
// connection that its client would take for a failure.
func TestApprovalsEndpointFinishesRequestsWhenTheJobEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := newApprovalRig(t)
	run := runPipeline(ctx, rig.spec([]string{"c1"}, "{deadline: 1h}", "", ""))
	addr := (<-run.job).ApprovalsAddr()
	w := pendingWaits(t, ctx, 1)[0]

	// A POST of c1's answer, the first half of its body sent.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := fmt.Sprintf(`{"key":"c1","wait":"refund","id":%q,"value":true}`, w.ID)
	half := len(body) / 2
	if _, err := fmt.Fprintf(c, "POST /answers HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:half]); err != nil {
		t.Fatal(err)
	}
	// A request on a connection dialled after it: once it is answered,
	// the server has accepted the POST's connection too.
	get := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := get.Get("http://" + addr + "/approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// c1 answered through the topic: the job ends, and its endpoint stops
	// listening.
	rig.answer(ctx, agent.Answer{Key: "c1", Wait: "refund", ID: w.ID, Value: json.RawMessage(`true`)})
	for {
		d, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		d.Close()
		select {
		case <-ctx.Done():
			t.Fatal("the approvals endpoint still listens after the job's only wait was answered")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The rest of the body: the request is served to the end.
	if _, err := io.WriteString(c, body[half:]); err != nil {
		t.Fatalf("the rest of the POST's body: %v (the endpoint closed a request in progress)", err)
	}
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the POST's response: %v (the endpoint closed a request in progress)", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /answers while the job ended: %s, want 202", r.Status)
	}
	if err := <-run.done; err != nil {
		t.Fatal(err)
	}
}

// TestApprovalConfigErrors: every approval key is checked at the edge,
// with file:line:column and what is accepted.
func TestApprovalConfigErrors(t *testing.T) {
	head := "kafka: {brokers: ['127.0.0.1:9']}\nsource:\n  file: {paths: [in.jsonl]}\n  timestamp: t\nsink:\n  stdout: {}\nsteps:\n  - keyBy: u\n"
	tool := func(approval string) string {
		return "  - agent:\n      prompt: p\n      tools:\n        - http: {name: refund, url: 'http://h/r'}\n          approval: " + approval + "\n"
	}
	cases := []struct{ name, src, want string }{
		{"no topic", head + tool("{deadline: 1h}"),
			"p.yaml:13:11: steps[1].agent.tools[0].approval: needs steps[1].agent.approvals.topic"},
		{"no deadline", head + tool("{onTimeout: reject}") + "      approvals: {topic: a}\n",
			`p.yaml:13:22: steps[1].agent.tools[0].approval: missing key "deadline" (accepted: deadline, onTimeout)`},
		{"bad deadline", head + tool("{deadline: soon}") + "      approvals: {topic: a}\n",
			`p.yaml:13:32: steps[1].agent.tools[0].approval.deadline: "soon" is not a duration`},
		{"bad onTimeout", head + tool("{deadline: 1h, onTimeout: retry}") + "      approvals: {topic: a}\n",
			`p.yaml:13:47: steps[1].agent.tools[0].approval.onTimeout: "retry": want one of reject, fail`},
		{"unknown key", head + tool("{deadline: 1h, timeout: 2h}") + "      approvals: {topic: a}\n",
			`p.yaml:13:36: steps[1].agent.tools[0].approval: unknown key "timeout"; accepted: deadline, onTimeout`},
		{"fail without continueOnError", head + tool("{deadline: 1h, onTimeout: fail}") + "      approvals: {topic: a}\n",
			"p.yaml:13:11: steps[1].agent.tools[0].approval: onTimeout fail needs steps[1].agent.continueOnError: true"},
		{"approvals without approval", head + "  - agent:\n      prompt: p\n      approvals: {topic: a}\n",
			"p.yaml:11:7: steps[1].agent.approvals: no tool of the step has an approval"},
		{"requests is the answers topic", head + tool("{deadline: 1h}") + "      approvals: {topic: a, requests: a}\n",
			`steps[1].agent.approvals.requests: "a" is the answers topic too`},
		{"maxAnswersPerKey 0", head + tool("{deadline: 1h}") + "      approvals: {topic: a, maxAnswersPerKey: 0}\n",
			"p.yaml:14:47: steps[1].agent.approvals.maxAnswersPerKey: 0 is out of range; want an integer from 1 to 65536"},
		{"maxAnswersPerKey not a number", head + tool("{deadline: 1h}") + "      approvals: {topic: a, maxAnswersPerKey: many}\n",
			"steps[1].agent.approvals.maxAnswersPerKey: got a string, want an integer from 1 to 65536"},
		{"no kafka", strings.TrimPrefix(head, "kafka: {brokers: ['127.0.0.1:9']}\n") + tool("{deadline: 1h}") + "      approvals: {topic: a}\n",
			"steps[1].agent.approvals needs the Kafka cluster"},
		{"bad httpAddr", "job:\n  approvals: {httpAddr: nohost}\n" + head + tool("{deadline: 1h}") + "      approvals: {topic: a}\n",
			`p.yaml:2:25: job.approvals.httpAddr: "nohost": want host:port`},
		{"httpAddr port out of range", "job:\n  approvals: {httpAddr: ':99999'}\n" + head + tool("{deadline: 1h}") + "      approvals: {topic: a}\n",
			`p.yaml:2:25: job.approvals.httpAddr: ":99999": port "99999": want a number from 0 to 65535`},
		{"httpAddr without approvals", "job:\n  approvals: {httpAddr: ':8089'}\n" + head + "  - agent: {prompt: p}\n",
			"p.yaml:2:25: job.approvals.httpAddr: no agent step has approvals"},
	}
	for _, c := range cases {
		_, err := pipeline.Parse("p.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", c.name, err, c.want)
		}
	}
}
