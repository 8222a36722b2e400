package answers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/answers"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

func post(t *testing.T, url, method, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPAnswerResumesWait: an agent job reads its answers from a topic
// on the embedded broker; an approval POSTed to the handler resumes the
// waiting action. Bad requests get their error status and write nothing
// (the topic holds the one good answer).
func TestHTTPAnswerResumesWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"approvals": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h, err := answers.NewHandler(answers.Options{Brokers: b.Addrs(), Topic: "approvals", MaxBody: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	asked := make(chan string, 1)
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("review", func(c *agent.RunnerContext, ev agent.Event) error {
		in, _ := agent.Input[string](ev)
		ans, err := agent.Await(c, agent.Wait{Name: "approve", Timeout: time.Hour, Ask: func(_ context.Context, id string) error {
			asked <- id
			return nil
		}})
		if err != nil {
			return err
		}
		c.Output(in + " " + string(ans.Value))
		return nil
	}, agent.TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	refunds := weir.FromRecords(env, "refunds", []weir.Record[string]{{Value: "A", Timestamp: 1}}, watermark.NoWatermarks[string]())
	ans := weir.FromSource(env, "approvals", kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{"approvals"}}, kafka.JSON[agent.Answer]()),
		watermark.NoWatermarks[agent.Answer]())
	out := agent.ApplyWithAnswers[string, string, string](weir.KeyBy(refunds, func(s string) string { return s }), ans,
		func(a agent.Answer) string { return a.Key }, "agent", a, agent.Options{})
	got := make(chan string, 1)
	weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
		return weir.SinkFunc[string](func(r weir.Record[string]) error { got <- r.Value; return nil }), nil
	})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	jobErr := make(chan error, 1)
	go func() { jobErr <- job.Wait() }()
	select {
	case id = <-asked:
	case err := <-jobErr:
		t.Fatalf("the job ended before the action asked: %v", err)
	case <-ctx.Done():
		t.Fatal("the action did not ask")
	}

	bad := []struct {
		method, body string
		status       int
		want         string
	}{
		{"GET", "", 405, "POST"},
		{"POST", `{"key":"A"}`, 400, `"wait"`},
		{"POST", `{"key":"A","wait":"approve","approved":true}`, 400, "unknown field"},
		{"POST", `not json`, 400, "not a JSON answer"},
		{"POST", `{"key":"A","wait":"approve"} {"key":"A","wait":"approve"}`, 400, "more than one"},
		{"POST", `{"key":"A","wait":"approve","value":"` + strings.Repeat("x", 300) + `"}`, 413, "over 256 bytes"},
	}
	for _, c := range bad {
		if st, msg := post(t, srv.URL, c.method, c.body); st != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("%s %.40s: %d %q, want %d and %q", c.method, c.body, st, msg, c.status, c.want)
		}
	}
	if st, msg := post(t, srv.URL, "POST", `{"key":"A","wait":"approve","id":"`+id+`","value":{"approved":true}}`); st != http.StatusAccepted {
		t.Fatalf("good answer: %d %q", st, msg)
	}
	select {
	case v := <-got:
		if v != `A {"approved":true}` {
			t.Fatalf("output %q", v)
		}
	case <-ctx.Done():
		t.Fatal("the answer did not resume the wait")
	}
	job.Cancel()
	if err := <-jobErr; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// Only the good answer was written.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("approvals"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) < 1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("reading the topic")
		}
		recs = append(recs, fs.Records()...)
	}
	pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	recs = append(recs, cl.PollFetches(pctx).Records()...)
	pcancel()
	if len(recs) != 1 || string(recs[0].Key) != "A" {
		t.Fatalf("the topic holds %d records (want the good answer only, keyed A)", len(recs))
	}
}

// TestOptionsValidated: NewHandler refuses options it cannot work with,
// naming what to set.
func TestOptionsValidated(t *testing.T) {
	_, err := answers.NewHandler(answers.Options{MaxBody: -1})
	for _, want := range []string{"Options.Brokers is empty", "Options.Topic is empty", "Options.MaxBody -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}
