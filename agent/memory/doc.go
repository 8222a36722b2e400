// Package memory is long-term memory for agents: per key, entries of text
// with their embeddings and metadata, searched by similarity, written and
// compacted (summarised by a model) by the agent's actions.
//
//	lt := &memory.LongTerm{Embedder: &embed.Offline{}, MaxItems: 64}
//	// in an action:
//	err := lt.Write(c, "order-17", "Customer prefers delivery on Fridays", nil)
//	hits, err := lt.Search(c, "when to deliver?", 3, nil)
//	n, err := lt.Compact(c, "llm") // summarise the oldest when over MaxItems
//	// for the model: a retrieval tool over the calling key's memory
//	search, err := lt.Tool("recall", 3)
//
// # Guarantees
//
//	L1. Per key, checkpoint-consistent. Entries live in the key's
//	    short-term memory (agent.RunnerContext.ShortTerm), under names
//	    starting "ltm/" + LongTerm.Name + "/": a write takes effect when the
//	    action finishes successfully (a failed action leaves none), is in
//	    the key's keyed state and so in every checkpoint, and, with an
//	    action-state store, is recorded with the action's state. A restore
//	    sees exactly the entries of the checkpoint
//	    (TestLongTermRestoreSeesTheCheckpoint); no other key sees them.
//	L2. Order. A key's inputs run one at a time in arrival order (agent
//	    G1), so a search sees every write of the key's earlier
//	    inputs and of its own action so far, and none of later inputs; put
//	    the inputs in event-time order (ordering.Sort) and a search sees
//	    the writes of everything before it in event time.
//	L3. Search is exact (vector.Flat over the key's entries): the K
//	    entries of highest cosine similarity among those the filter
//	    matches, ties by ascending ID.
//	L4. Durable embeddings. Write and Compact embed through agent.Durable
//	    (calls named "embed:" + Name), and Compact calls the model through
//	    RunnerContext.Chat: after a restore the re-run of an unfinished
//	    action gets the recorded vectors and summary instead of calling
//	    again. Search embeds the query with a plain call (it changes
//	    nothing, and the tool call that wraps it is recorded).
//	L5. Bounded. Compact summarises the oldest entries into one when a key
//	    holds more than MaxItems, bringing it down to at most MaxItems/2+1.
//	    Nothing else bounds the entries: call Compact where the agent
//	    writes.
//
// # Limits
//
// A search decodes every entry of the key (O(entries × dimension)); the
// entries are checkpointed with the key's other state, each checkpoint
// encoding them whole. Long-term memory in the hundreds of entries per key
// is what this is built for; a corpus shared by all keys belongs in a
// vector.Store (or vector.Index).
package memory
