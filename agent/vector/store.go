package vector

import (
	"context"
	"fmt"
	"maps"
)

// Item is one entry of a vector store: a vector under an ID, with the
// content it was made from and metadata to filter on.
type Item struct {
	// ID identifies the item; upserting an existing ID replaces it.
	ID string `json:"id"`
	// Vector is the embedding. Stores search by cosine similarity, so its
	// length does not matter; a store keeps it scaled to unit length.
	Vector []float32 `json:"vector"`
	// Content is the text (or any payload) returned with search hits.
	Content string `json:"content,omitempty"`
	// Metadata are string pairs a Filter matches.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Hit is one search result.
type Hit struct {
	ID       string            `json:"id"`
	Content  string            `json:"content,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Score is the cosine similarity of the item's vector and the query's,
	// in [-1, 1] (0 when either is the zero vector).
	Score float32 `json:"score"`
}

// Filter selects items by metadata: an item matches when, for every pair
// of the filter, its metadata has that key with that value. A nil or empty
// filter matches every item.
type Filter map[string]string

// Match reports whether metadata md passes f.
func (f Filter) Match(md map[string]string) bool {
	for k, v := range f {
		if w, ok := md[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Query is a search: the K items most similar to Vector among those
// Filter matches.
type Query struct {
	Vector []float32 `json:"vector"`
	// K is the number of hits wanted; it must be positive.
	K      int    `json:"k"`
	Filter Filter `json:"filter,omitempty"`
}

// Store is a vector store. Every implementation must be safe for
// concurrent use and agree on what a search returns:
//
//   - Upsert inserts or replaces items by ID. Every vector of a store has
//     the same dimension, fixed by its first item (or its configuration);
//     an item of another dimension, without an ID, or an empty vector, is
//     refused with an error and nothing of that call is stored.
//   - Delete removes items by ID; unknown IDs are ignored.
//   - Search returns the min(K, matching items) hits of highest cosine
//     similarity, in descending score, equal scores by ascending ID (so the
//     result does not depend on insertion order). A query vector of
//     another dimension, or K < 1, is an error.
//
// Hits are the caller's (their metadata maps are copies). The context
// bounds calls to remote stores; the embedded Flat ignores it.
type Store interface {
	Upsert(ctx context.Context, items ...Item) error
	Delete(ctx context.Context, ids ...string) error
	Search(ctx context.Context, q Query) ([]Hit, error)
}

// validate checks what every store refuses, naming the item.
func validateItems(dim int, items []Item) (int, error) {
	for i, it := range items {
		if it.ID == "" {
			return dim, fmt.Errorf("vector: item %d has no ID", i)
		}
		if len(it.Vector) == 0 {
			return dim, fmt.Errorf("vector: item %q has an empty vector", it.ID)
		}
		if dim == 0 {
			dim = len(it.Vector)
		}
		if len(it.Vector) != dim {
			return dim, fmt.Errorf("vector: item %q has %d dimensions; this store's vectors have %d", it.ID, len(it.Vector), dim)
		}
	}
	return dim, nil
}

func validateQuery(dim int, q Query) error {
	if q.K < 1 {
		return fmt.Errorf("vector: query asks for %d hits; K must be at least 1", q.K)
	}
	if dim != 0 && len(q.Vector) != dim {
		return fmt.Errorf("vector: query vector has %d dimensions; this store's vectors have %d", len(q.Vector), dim)
	}
	return nil
}

func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
