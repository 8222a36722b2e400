// Package lockedwriter serializes the writes of several goroutines to one
// io.Writer, so that each Write reaches it whole and alone (the stdout sink
// of package pipeline, the narrative of internal/demo).
package lockedwriter

import (
	"io"
	"sync"
)

// Writer passes each Write to the writer it wraps under a mutex. It is safe
// for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// New returns a Writer over w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes b to the wrapped writer, holding the lock for the whole call.
func (l *Writer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
