package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/agent/vector"
)

// retrieval decodes an agent step's retrieval tool:
//
//	retrieval: {name, documents: FILE.jsonl, k, embedding: {offline: {seed}} | {url, name, apiKeyEnv, timeout}}
func (d *dec) retrieval(n ast.Node, what string, t *ToolSpec) {
	t.Kind, t.Name, t.K = "retrieval", "search", 4
	d.object(n, what,
		field{name: "name", accepts: "a tool name", def: "`search`", doc: "the tool's name",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a tool name", &t.Name) }},
		field{name: "description", accepts: "a string", def: "none", doc: "what the model is told it does",
			fn: func(at string, _, v ast.Node) { d.str(v, at, &t.Description) }},
		field{name: "documents", required: true, accepts: "a JSON-lines file of {id, text, metadata} documents", doc: "`{\"id\", \"text\", \"metadata\"}` per line, embedded when the job starts",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "a JSON-lines file of {id, text, metadata} documents", &t.Documents)
			}},
		field{name: "k", accepts: "an integer from 1 to 100", def: "4", doc: "hits per search",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100, &t.K) }},
		field{name: "embedding", accepts: "a mapping, as `model`", def: "`{offline: {}}`", doc: "the embedding model", fn: func(at string, k, v ast.Node) {
			t.Embedding = &ModelSpec{}
			d.model(k, v, at, t.Embedding)
		}},
	)
	if t.Embedding == nil {
		t.Embedding = &ModelSpec{Pos: t.Pos, Offline: true}
	}
}

// retrievalDoc is one line of a retrieval tool's documents file.
type retrievalDoc struct {
	ID       string            `json:"id"`
	Text     string            `json:"text"`
	Metadata map[string]string `json:"metadata"`
}

// retrievalTool reads and embeds the documents of t into a vector.Flat and
// returns the tool searching it.
func retrievalTool(ctx context.Context, t ToolSpec) (tool.Tool, error) {
	var e embed.Model
	if m := t.Embedding; m.Offline {
		e = &embed.Offline{Seed: m.Seed}
	} else {
		cfg := embed.OpenAIConfig{BaseURL: m.URL, Model: m.Name, Timeout: m.Timeout}
		if m.APIKeyEnv != "" {
			if cfg.APIKey = os.Getenv(m.APIKeyEnv); cfg.APIKey == "" {
				return nil, fmt.Errorf("retrieval.embedding.apiKeyEnv: $%s is empty or unset", m.APIKeyEnv)
			}
		}
		c, err := embed.OpenAI(cfg)
		if err != nil {
			return nil, err
		}
		e = c
	}
	f, err := os.Open(t.Documents)
	if err != nil {
		return nil, fmt.Errorf("retrieval.documents: %w", err)
	}
	defer f.Close()
	var docs []retrievalDoc
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), math.MaxInt32)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var d retrievalDoc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("retrieval.documents: %s:%d: %v (want {\"id\": ..., \"text\": ..., \"metadata\": {...}})", t.Documents, line, err)
		}
		if d.ID == "" || d.Text == "" {
			return nil, fmt.Errorf("retrieval.documents: %s:%d: a document needs an id and a text", t.Documents, line)
		}
		docs = append(docs, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("retrieval.documents: %s: %w", t.Documents, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("retrieval.documents: %s holds no documents", t.Documents)
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	vs, err := e.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("retrieval: embedding %d documents of %s: %w", len(docs), t.Documents, err)
	}
	store := vector.NewFlat(0)
	for i, d := range docs {
		if err := store.Upsert(ctx, vector.Item{ID: d.ID, Vector: vs[i], Content: d.Text, Metadata: d.Metadata}); err != nil {
			return nil, fmt.Errorf("retrieval.documents: %s: %w", t.Documents, err)
		}
	}
	return vector.Tool(vector.ToolConfig{Name: t.Name, Description: t.Description, Embedder: e, Searcher: store, K: t.K})
}
