package vector_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/vector"
)

// A Flat store searched directly and through the retrieval tool a model
// would call.
func Example() {
	ctx := context.Background()
	e := &embed.Offline{}
	store := vector.NewFlat(0)
	for id, text := range map[string]string{
		"refunds":  "Refunds are accepted within 14 days of delivery",
		"carriers": "Parcels travel with DPD inside the EU",
	} {
		v, _ := embed.One(ctx, e, text)
		if err := store.Upsert(ctx, vector.Item{ID: id, Vector: v, Content: text}); err != nil {
			panic(err)
		}
	}
	q, _ := embed.One(ctx, e, "how many days for a refund?")
	hits, _ := store.Search(ctx, vector.Query{Vector: q, K: 1})
	fmt.Println(hits[0].ID)

	search, _ := vector.Tool(vector.ToolConfig{Embedder: e, Searcher: store, K: 1})
	res, _ := search.Call(ctx, json.RawMessage(`{"query":"which carrier delivers parcels?"}`))
	var got []vector.Hit
	json.Unmarshal(res.Structured, &got)
	fmt.Println(got[0].Content)
	// Output:
	// refunds
	// Parcels travel with DPD inside the EU
}
