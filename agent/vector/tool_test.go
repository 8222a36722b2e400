package vector_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/vector"
)

func TestToolReturnsTopK(t *testing.T) {
	ctx := context.Background()
	e := &embed.Offline{}
	store := vector.NewFlat(0)
	for id, text := range map[string]string{
		"kafka":  "Kafka brokers keep partitions as logs on disk",
		"pebble": "Pebble is an LSM key-value store with compactions",
		"window": "Tumbling windows fire when the watermark passes their end",
	} {
		if err := store.Upsert(ctx, vector.Item{ID: id, Vector: e.Vector(text), Content: text, Metadata: map[string]string{"topic": id}}); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := vector.Tool(vector.ToolConfig{Embedder: e, Searcher: store, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s := tl.Spec(); s.Name != "search" || !strings.Contains(string(s.Parameters), `"query"`) {
		t.Fatalf("spec %+v", s)
	}
	res, err := tl.Call(ctx, json.RawMessage(`{"query":"when does a window fire?"}`))
	if err != nil || res.IsError {
		t.Fatalf("call: %+v, %v", res, err)
	}
	var hits []vector.Hit
	if err := json.Unmarshal(res.Structured, &hits); err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].ID != "window" || !strings.Contains(res.Content, "watermark passes") {
		t.Fatalf("hits %+v", hits)
	}

	if res, _ := tl.Call(ctx, json.RawMessage(`{"query":""}`)); !res.IsError {
		t.Fatalf("empty query: %+v", res)
	}
	failing := embed.Func(func(context.Context, []string) ([][]float32, error) { return nil, errors.New("server down") })
	tl, _ = vector.Tool(vector.ToolConfig{Embedder: failing, Searcher: store})
	if res, _ := tl.Call(ctx, json.RawMessage(`{"query":"x"}`)); !res.IsError || !strings.Contains(res.Content, "server down") {
		t.Fatalf("failing embedder: %+v", res)
	}
	if _, err := vector.Tool(vector.ToolConfig{Searcher: store}); err == nil {
		t.Fatal("no embedder accepted")
	}
	filtered, _ := vector.Tool(vector.ToolConfig{Embedder: e, Searcher: store, Filter: vector.Filter{"topic": "kafka"}})
	res, _ = filtered.Call(ctx, json.RawMessage(`{"query":"when does a window fire?"}`))
	if err := json.Unmarshal(res.Structured, &hits); err != nil || len(hits) != 1 || hits[0].ID != "kafka" {
		t.Fatalf("filtered: %+v %v", hits, err)
	}
}
