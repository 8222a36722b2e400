package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/weirproject/weir/internal/durability"
)

// asWeir is the environment variable that makes the test binary run as the
// weir command (with its arguments), so that tests run weir in a child
// process exactly as a user would: its own stdout, stderr, signals and exit
// status.
const asWeir = "WEIR_TEST_AS_WEIR"

// TestMain runs the test binary as weir when asWeir is set (and as a child
// of `weir experiment durability` when that experiment starts one).
func TestMain(m *testing.M) {
	durability.MaybeRunChild()
	if os.Getenv(asWeir) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	removeContainerImage()
	os.Exit(code)
}

// weirCmd returns weir with args as a child process.
func weirCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asWeir+"=1")
	return cmd
}

// runWeir runs weir with args to its end and returns its stdout, stderr and
// exit status.
func runWeir(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := weirCmd(t, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("weir %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// lineWatcher copies a child's output into a buffer and reports when a line
// containing a given text has been written.
type lineWatcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wants map[string]chan struct{}
	done  chan struct{}
}

func watchLines(r io.Reader, wants ...string) *lineWatcher {
	w := &lineWatcher{wants: map[string]chan struct{}{}, done: make(chan struct{})}
	for _, s := range wants {
		w.wants[s] = make(chan struct{})
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.buf.WriteString(line + "\n")
			for s, ch := range w.wants {
				if strings.Contains(line, s) {
					close(ch)
					delete(w.wants, s)
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// seen returns a channel closed once a line containing s was written (s
// must be one of the wants given to watchLines).
func (w *lineWatcher) seen(s string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.wants[s]; ok {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// text waits for the output to end and returns it.
func (w *lineWatcher) text() string {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// decodeJSONOnly decodes s as a stream of JSON values and fails if anything
// else is in it; it returns the values.
func decodeJSONOnly(t *testing.T, what, s string) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var vals []map[string]any
	for {
		var v map[string]any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: stdout is not only JSON (%v):\n%s", what, err, s)
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		t.Fatalf("%s: no JSON on stdout", what)
	}
	return vals
}
