package memory

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/agent/vector"
)

// LongTerm is the long-term memory of an agent's keys (see the package
// documentation). Its fields are read-only once an agent uses it; one
// LongTerm serves every key.
type LongTerm struct {
	// Name separates memories of one agent; "" means "default".
	Name string
	// Embedder embeds entries and queries; required.
	Embedder embed.Model
	// MaxItems is the number of entries per key above which Compact
	// summarises; 0 means 256.
	MaxItems int
	// SummaryPrompt is the system prompt of Compact's model call; "" means
	// one asking to keep every fact, name and number.
	SummaryPrompt string
}

// Entry is one long-term memory entry.
type Entry struct {
	ID       string            `json:"id"`
	Content  string            `json:"content"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Seq orders the entries of a key by when they were written (higher
	// is newer).
	Seq int64 `json:"seq"`
}

// stored is an entry as kept in short-term memory; the vector is
// float32s, little-endian (base64 in JSON).
type stored struct {
	Content  string            `json:"c"`
	Vector   []byte            `json:"v"`
	Metadata map[string]string `json:"m,omitempty"`
	Seq      int64             `json:"n"`
}

func (l *LongTerm) name() string {
	if l.Name == "" {
		return "default"
	}
	return l.Name
}

func (l *LongTerm) prefix() string  { return "ltm/" + l.name() + "/" }
func (l *LongTerm) counter() string { return "ltm#" + l.name() }

func (l *LongTerm) maxItems() int {
	if l.MaxItems <= 0 {
		return 256
	}
	return l.MaxItems
}

func (l *LongTerm) check() error {
	if l.Embedder == nil {
		return fmt.Errorf("memory: LongTerm %q has no Embedder; set one (embed.OpenAI, or embed.Offline for tests)", l.name())
	}
	if l.MaxItems < 0 {
		return fmt.Errorf("memory: LongTerm %q: MaxItems is %d; use a positive number, or 0 for 256", l.name(), l.MaxItems)
	}
	return nil
}

// Write stores content under id in the memory of c's key (replacing an
// entry with that id), with its embedding and metadata. It takes effect
// when the action finishes successfully.
func (l *LongTerm) Write(c *agent.RunnerContext, id, content string, metadata map[string]string) error {
	if err := l.check(); err != nil {
		return err
	}
	if id == "" || content == "" {
		return fmt.Errorf("memory: Write needs an id and content (got id %q, %d bytes of content)", id, len(content))
	}
	vs, err := agent.Durable(c, "embed:"+l.name(), []string{content}, func(ctx context.Context, _ string) ([][]float32, error) {
		return l.Embedder.Embed(ctx, []string{content})
	})
	if err != nil {
		return fmt.Errorf("memory: embedding entry %q: %w", id, err)
	}
	if len(vs) != 1 || len(vs[0]) == 0 {
		return fmt.Errorf("memory: embedding entry %q gave %d vectors", id, len(vs))
	}
	return l.put(c, id, content, vs[0], metadata, -1)
}

// put stores an entry; seq < 0 means the key's next sequence number.
func (l *LongTerm) put(c *agent.RunnerContext, id, content string, vec []float32, metadata map[string]string, seq int64) error {
	mem := c.ShortTerm()
	if seq < 0 {
		next, _, err := agent.Recall[int64](mem, l.counter())
		if err != nil {
			return err
		}
		if err := mem.Set(l.counter(), next+1); err != nil {
			return err
		}
		seq = next
	}
	b := make([]byte, 4*len(vec))
	for i, x := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return mem.Set(l.prefix()+id, stored{Content: content, Vector: b, Metadata: metadata, Seq: seq})
}

// Delete removes entries of c's key by id (unknown ids are ignored).
func (l *LongTerm) Delete(c *agent.RunnerContext, ids ...string) {
	for _, id := range ids {
		c.ShortTerm().Delete(l.prefix() + id)
	}
}

// entries decodes the entries of c's key, oldest first.
func (l *LongTerm) entries(c *agent.RunnerContext) ([]Entry, [][]float32, error) {
	mem := c.ShortTerm()
	p := l.prefix()
	type e struct {
		Entry
		vec []float32
	}
	var all []e
	for _, name := range mem.Names() {
		if !strings.HasPrefix(name, p) {
			continue
		}
		s, _, err := agent.Recall[stored](mem, name)
		if err != nil {
			return nil, nil, err
		}
		if len(s.Vector)%4 != 0 {
			return nil, nil, fmt.Errorf("memory: entry %q holds a vector of %d bytes, not a multiple of 4", name, len(s.Vector))
		}
		v := make([]float32, len(s.Vector)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(s.Vector[4*i:]))
		}
		all = append(all, e{Entry{ID: name[len(p):], Content: s.Content, Metadata: s.Metadata, Seq: s.Seq}, v})
	}
	slices.SortFunc(all, func(a, b e) int { return cmp.Compare(a.Seq, b.Seq) })
	es, vs := make([]Entry, len(all)), make([][]float32, len(all))
	for i := range all {
		es[i], vs[i] = all[i].Entry, all[i].vec
	}
	return es, vs, nil
}

// Entries returns the entries of c's key, oldest first.
func (l *LongTerm) Entries(c *agent.RunnerContext) ([]Entry, error) {
	es, _, err := l.entries(c)
	return es, err
}

// Search returns the k entries of c's key most similar to query among
// those whose metadata filter matches (L3).
func (l *LongTerm) Search(c *agent.RunnerContext, query string, k int, filter vector.Filter) ([]vector.Hit, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	v, err := embed.One(c.Context(), l.Embedder, query)
	if err != nil {
		return nil, fmt.Errorf("memory: embedding the query: %w", err)
	}
	return l.searchVector(c, vector.Query{Vector: v, K: k, Filter: filter})
}

func (l *LongTerm) searchVector(c *agent.RunnerContext, q vector.Query) ([]vector.Hit, error) {
	es, vs, err := l.entries(c)
	if err != nil {
		return nil, err
	}
	f := vector.NewFlat(0)
	for i, e := range es {
		if err := f.Upsert(c.Context(), vector.Item{ID: e.ID, Vector: vs[i], Content: e.Content, Metadata: e.Metadata}); err != nil {
			return nil, fmt.Errorf("memory: entry %q: %w", e.ID, err)
		}
	}
	return f.Search(c.Context(), q)
}

// Searcher returns a vector.Searcher over the long-term memory of the key
// whose action calls it: it finds the run with agent.RunnerOf, so it works
// in tools called through RunnerContext.CallTool (ReAct's), and fails
// elsewhere.
func (l *LongTerm) Searcher() vector.Searcher { return searcher{l} }

type searcher struct{ l *LongTerm }

func (s searcher) Search(ctx context.Context, q vector.Query) ([]vector.Hit, error) {
	c, ok := agent.RunnerOf(ctx)
	if !ok {
		return nil, fmt.Errorf("memory: long-term memory %q searched outside an agent's tool call (its context has no agent.RunnerOf)", s.l.name())
	}
	return s.l.searchVector(c, q)
}

// Tool returns a retrieval tool named name (vector.Tool) over the long-term
// memory of the calling run's key, returning k entries (0 means 4).
func (l *LongTerm) Tool(name string, k int) (tool.Tool, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return vector.Tool(vector.ToolConfig{Name: name, Embedder: l.Embedder, Searcher: l.Searcher(), K: k,
		Description: "Searches this conversation's long-term memory and returns the most relevant entries, best first."})
}

// SummaryMetadata is the metadata key Compact sets, to "summary", on the
// entries it writes.
const SummaryMetadata = "kind"

// Compact summarises, when c's key holds more than MaxItems entries, its
// oldest entries into one: the model named modelName (in the agent's
// Models) is asked, through c.Chat, for a summary of them; they are
// deleted and the summary written as an entry with metadata kind=summary
// (and the id "summary-" + the newest summarised entry's sequence number).
// It leaves MaxItems/2 entries besides the summary, and returns how many
// entries it summarised (0 when under the limit).
func (l *LongTerm) Compact(c *agent.RunnerContext, modelName string) (int, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	es, _, err := l.entries(c)
	if err != nil {
		return 0, err
	}
	if len(es) <= l.maxItems() {
		return 0, nil
	}
	old := es[:len(es)-l.maxItems()/2]
	var b strings.Builder
	for _, e := range old {
		fmt.Fprintf(&b, "- %s\n", e.Content)
	}
	sys := l.SummaryPrompt
	if sys == "" {
		sys = "Summarise these memory entries in one short paragraph. Keep every fact, name and number that may be needed later; drop repetition."
	}
	resp, err := c.Chat(modelName, model.Request{Messages: []model.Message{model.System(sys), model.User(b.String())}})
	if err != nil {
		return 0, fmt.Errorf("memory: summarising %d entries: %w", len(old), err)
	}
	summary := strings.TrimSpace(resp.Message.Content)
	if summary == "" {
		return 0, fmt.Errorf("memory: the model %q returned an empty summary of %d entries", modelName, len(old))
	}
	for _, e := range old {
		l.Delete(c, e.ID)
	}
	vs, err := agent.Durable(c, "embed:"+l.name(), []string{summary}, func(ctx context.Context, _ string) ([][]float32, error) {
		return l.Embedder.Embed(ctx, []string{summary})
	})
	if err != nil {
		return 0, fmt.Errorf("memory: embedding the summary: %w", err)
	}
	if len(vs) != 1 || len(vs[0]) == 0 {
		return 0, fmt.Errorf("memory: embedding the summary gave %d vectors", len(vs))
	}
	// The summary takes the place of the oldest entry it replaces, so the
	// next compaction folds it in first.
	id := fmt.Sprintf("summary-%d", old[len(old)-1].Seq)
	if err := l.put(c, id, summary, vs[0], map[string]string{SummaryMetadata: "summary"}, old[0].Seq); err != nil {
		return 0, err
	}
	return len(old), nil
}
