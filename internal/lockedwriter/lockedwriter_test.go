package lockedwriter

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestWritesWhole checks that concurrent writes reach the wrapped writer
// one at a time: bytes.Buffer is not safe for concurrent use, so without
// the lock the race detector fails the test and lines interleave.
func TestWritesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf)
	const goroutines, writes = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := strings.Repeat(string(rune('a'+g)), 64) + "\n"
			for range writes {
				if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != goroutines*writes {
		t.Fatalf("got %d lines, want %d", len(lines), goroutines*writes)
	}
	for i, l := range lines {
		if len(l) != 64 || strings.Count(l, l[:1]) != 64 {
			t.Fatalf("line %d is not one whole write: %q", i, l)
		}
	}
}
