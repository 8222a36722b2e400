package vector

import (
	"context"
	"fmt"

	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/tool"
)

// Searcher answers searches; every Store is one. Package memory's
// long-term memory is one that searches the calling run's key.
type Searcher interface {
	Search(ctx context.Context, q Query) ([]Hit, error)
}

// SearchArgs are the arguments a model gives the retrieval tool.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"what to look for, in words"`
}

// ToolConfig configures Tool.
type ToolConfig struct {
	// Name of the tool; "" means "search".
	Name string
	// Description shown to the model; "" means one saying that it
	// searches the documents and returns the most relevant ones.
	Description string
	// Embedder embeds the query text; required.
	Embedder embed.Model
	// Searcher is searched; required.
	Searcher Searcher
	// K is the number of documents returned; 0 means 4.
	K int
	// Filter restricts every search to items with this metadata.
	Filter Filter
}

// Tool returns a retrieval tool for agents (ReAct): the model calls it with
// {"query": "..."}; it embeds the query and returns the K most similar
// items of the Searcher as a JSON list of hits (id, content, metadata,
// score), best first. An empty query, a failed embedding or a failed
// search comes back to the model as an IsError result saying so (it may
// rephrase, or answer without documents). The config is checked here.
func Tool(cfg ToolConfig) (tool.Tool, error) {
	switch {
	case cfg.Embedder == nil:
		return nil, fmt.Errorf("vector: ToolConfig.Embedder is required (the model that embeds the query)")
	case cfg.Searcher == nil:
		return nil, fmt.Errorf("vector: ToolConfig.Searcher is required (the store to search)")
	case cfg.K < 0:
		return nil, fmt.Errorf("vector: ToolConfig.K is %d; use a positive number, or 0 for 4", cfg.K)
	}
	if cfg.Name == "" {
		cfg.Name = "search"
	}
	if cfg.K == 0 {
		cfg.K = 4
	}
	if cfg.Description == "" {
		cfg.Description = fmt.Sprintf("Searches the documents and returns the %d most relevant to the query, best first, with their content.", cfg.K)
	}
	return tool.Func(cfg.Name, cfg.Description, func(ctx context.Context, a SearchArgs) ([]Hit, error) {
		if a.Query == "" {
			return nil, fmt.Errorf("the query is empty; say what to look for")
		}
		v, err := embed.One(ctx, cfg.Embedder, a.Query)
		if err != nil {
			return nil, fmt.Errorf("embedding the query failed: %w", err)
		}
		hits, err := cfg.Searcher.Search(ctx, Query{Vector: v, K: cfg.K, Filter: cfg.Filter})
		if err != nil {
			return nil, err
		}
		if hits == nil {
			hits = []Hit{}
		}
		return hits, nil
	})
}
