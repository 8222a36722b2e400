// Command retrieval runs a retrieval agent: documents arrive on one
// stream, questions on another, and a ReAct agent answers each question
// with a search tool over the documents, in event-time order: a question
// sees the documents whose event time is at or before its own, and none
// after, however the two streams interleave on arrival.
//
//	go run ./examples/retrieval
//
// The two streams are merged, keyed by topic and put in event-time order
// (ordering.Sort); the agent writes each document into its topic's
// long-term memory (package memory: embeddings in the key's checkpointed
// state) and answers each question by ReAct, whose model calls the
// "search" tool (the top documents of the question's topic, by cosine
// similarity of embeddings). A document published twice under one ID
// replaces its earlier version from its event time on.
//
// Without OPENAI_API_KEY the models are weir's offline ones (a hashed
// bag-of-words embedding and a chat model that calls the tool and quotes
// its result), and the command checks that every answer quotes the
// version of the document in force at the question's time. With it, the
// job calls the chat-completions API (model WEIR_MODEL, default
// gpt-4o-mini) and the embeddings API (WEIR_EMBEDDING_MODEL, default
// text-embedding-3-small) at OPENAI_BASE_URL.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/memory"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/watermark"
)

// Doc is a document published at an event time.
type Doc struct {
	Topic string `json:"topic"`
	ID    string `json:"id"`
	Text  string `json:"text"`
	Time  int64  `json:"time"` // Unix ms
}

// Question is a question asked at an event time.
type Question struct {
	Topic string `json:"topic"`
	Text  string `json:"text"`
	Time  int64  `json:"time"`
	// Expect is a phrase the offline answer must quote (the document
	// version in force at Time); empty means none.
	Expect string `json:"expect,omitempty"`
}

// Msg is what the agent takes: a document or a question.
type Msg struct {
	Doc      *Doc      `json:"doc,omitempty"`
	Question *Question `json:"question,omitempty"`
}

func (m Msg) topic() string {
	if m.Doc != nil {
		return m.Doc.Topic
	}
	return m.Question.Topic
}

func minute(m float64) int64 { return int64(m * 60_000) }

var docs = []Doc{
	{"billing", "refunds", "Refunds are accepted within 14 days of delivery, to the original card.", minute(0)},
	{"billing", "invoices", "Invoices are emailed on the first day of each month as PDF files.", minute(0.5)},
	{"billing", "currency", "Prices are charged in euros; cards in other currencies are converted by the bank.", minute(1)},
	{"shipping", "carriers", "Parcels travel with DPD inside the EU and with UPS elsewhere.", minute(0)},
	{"shipping", "delays", "Delivery takes two to four working days; tracking links come by email.", minute(1)},
	{"shipping", "returns", "Returns are collected at the door after you book a pickup slot.", minute(2)},
	// New versions, later in event time.
	{"billing", "refunds", "Refunds are now accepted within 30 days of delivery, to any card or as store credit.", minute(5)},
	{"shipping", "delays", "Because of the strike, delivery takes six to ten working days; tracking is paused.", minute(6)},
}

var questions = []Question{
	{"billing", "Within how many days are refunds accepted?", minute(3), "accepted within 14"},
	{"shipping", "How long does delivery take?", minute(3.5), "two to four"},
	{"billing", "Refunds: how many days are accepted now?", minute(7), "now accepted within 30"},
	{"shipping", "How long will delivery take now?", minute(8), "Because of the strike"},
	{"billing", "When are invoices sent?", minute(9), "Invoices are emailed"},
	{"shipping", "Which carrier brings parcels?", minute(9.5), "DPD"},
	{"billing", "Which refund rules applied at the start?", minute(0.2), "14 days"},
}

func main() {
	var chat model.ChatModel = &model.Offline{Seed: 11, ToolCalls: true}
	var emb embed.Model = &embed.Offline{}
	offline := os.Getenv("OPENAI_API_KEY") == ""
	if !offline {
		chat = model.OpenAI(model.OpenAIConfig{Model: envOr("WEIR_MODEL", "gpt-4o-mini")})
		e, err := embed.OpenAI(embed.OpenAIConfig{Model: envOr("WEIR_EMBEDDING_MODEL", "text-embedding-3-small")})
		if err != nil {
			log.Fatal(err)
		}
		emb = e
	}

	// The knowledge base of each topic is that key's long-term memory.
	kb := &memory.LongTerm{Name: "kb", Embedder: emb}
	search, err := kb.Tool("search", 1)
	if err != nil {
		log.Fatal(err)
	}
	a := agent.ReAct(chat, []tool.Tool{search}, agent.ReActOptions{
		System: "Answer from the documents only. Call the search tool first.",
		Prompt: func(in any) (string, error) { return in.(Msg).Question.Text, nil },
	})
	// Documents go into the knowledge base; questions start ReAct.
	for i := range a.Actions {
		if slices.Contains(a.Actions[i].On, agent.TypeInput) {
			react := a.Actions[i].Run
			a.Actions[i].Run = func(c *agent.RunnerContext, ev agent.Event) error {
				if d := ev.Value.(Msg).Doc; d != nil {
					return kb.Write(c, d.ID, d.Text, map[string]string{"topic": d.Topic})
				}
				return react(c, ev)
			}
		}
	}

	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	docStream := weir.Map(weir.FromSlice(env, "documents", docs,
		watermark.ForMonotonous[Doc]().WithTimestamp(func(d Doc, _ int64) (int64, bool) { return d.Time, true })),
		"doc", func(d Doc) Msg { return Msg{Doc: &d} })
	// Questions are not in event-time order on arrival; the sort fixes it.
	qStream := weir.Map(weir.FromSlice(env, "questions", questions,
		watermark.ForBoundedOutOfOrderness[Question](10*time.Minute).WithTimestamp(func(q Question, _ int64) (int64, bool) { return q.Time, true })),
		"question", func(q Question) Msg { return Msg{Question: &q} })
	byTopic := weir.KeyBy(weir.Union(docStream, qStream), Msg.topic)
	sorted := ordering.Sort(byTopic, "event-time order", ordering.SortOptions[Msg]{})
	answers := weir.Collect(agent.Apply[string, Msg, agent.ReActAnswer](weir.KeyBy(sorted, Msg.topic), "retrieval-agent", a, agent.Options{}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		log.Fatal(err)
	}

	// Answers carry their question's timestamp.
	byTime := map[int64]Question{}
	for _, q := range questions {
		byTime[q.Time] = q
	}
	recs := answers.Records()
	slices.SortFunc(recs, func(x, y weir.Record[agent.ReActAnswer]) int { return cmp.Compare(x.Timestamp, y.Timestamp) })
	bad := 0
	for _, r := range recs {
		q := byTime[r.Timestamp]
		fmt.Printf("%5.1f min  %-8s %s\n           -> %.150s\n", float64(r.Timestamp)/60_000, q.Topic, q.Text, r.Value.Answer)
		if offline && !strings.Contains(r.Value.Answer, q.Expect) {
			fmt.Printf("           !! expected the document version saying %q\n", q.Expect)
			bad++
		}
	}
	fmt.Printf("%d questions answered from %d documents\n", len(recs), len(docs))
	if len(recs) != len(questions) || bad > 0 {
		log.Fatalf("retrieval: %d answers for %d questions, %d not from the document version in force", len(recs), len(questions), bad)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
