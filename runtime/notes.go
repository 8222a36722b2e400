package runtime

// NoteKindDeadLetter is the Kind of the notes a source subtask takes of
// its dead letters (the letter formatted by DeadLetter.String).
const NoteKindDeadLetter = "deadLetter"

// maxNotes is how many notes a job keeps: the newest, over every kind.
const maxNotes = 64

// deadLetterNoteMillis is the least processing time between two notes of
// one source subtask's dead letters after its first deadLetterNotesFree:
// a stream of bad input costs a lock and a formatted string at most about
// once a second.
const (
	deadLetterNoteMillis = 1000
	deadLetterNotesFree  = 8
)

// Note is a rare event of an operator subtask kept for people (a dashboard
// shows the latest): what happened and when.
type Note struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	// Kind names the sort of event (NoteKindDeadLetter, ...).
	Kind string `json:"kind"`
	// AtMs is when it happened, in milliseconds of the job's clock.
	AtMs int64 `json:"atMs"`
	// Text says what happened.
	Text string `json:"text"`
	// Seq numbers the job's notes from 1 in the order they were taken, so
	// a reader polling Notes can tell the new ones.
	Seq int64 `json:"seq"`
}

// noteRing keeps the newest maxNotes notes; Metrics.mu guards it.
type noteRing struct {
	buf  []Note // at most maxNotes, oldest at next once full
	next int
	seq  int64
}

// Note records a rare event; see Context.Note. It is safe for concurrent
// use.
func (m *Metrics) Note(op string, subtask int, kind string, atMs int64, text string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &m.notes
	r.seq++
	n := Note{Operator: op, Subtask: subtask, Kind: kind, AtMs: atMs, Text: text, Seq: r.seq}
	if len(r.buf) < maxNotes {
		r.buf = append(r.buf, n)
		return
	}
	r.buf[r.next] = n
	r.next = (r.next + 1) % maxNotes
}

// Notes returns the newest notes the job kept (at most 64), oldest first.
func (m *Metrics) Notes() []Note {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &m.notes
	out := make([]Note, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
