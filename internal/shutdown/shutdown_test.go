package shutdown

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// S1, S2: the first signal asks for the stop (the process lives on), the
// second exits with 130.
func TestFirstSignalStopsSecondAborts(t *testing.T) {
	var log lockedBuffer
	exits := make(chan int, 1)
	h := Notify(Options{Log: &log, Exit: func(code int) { exits <- code }})
	defer h.Close()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-h.Requested()
	if h.Signal() != syscall.SIGTERM {
		t.Fatalf("signal %v", h.Signal())
	}
	select {
	case code := <-exits:
		t.Fatalf("exit %d after the first signal", code)
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := <-exits; code != ExitAborted {
		t.Fatalf("exit %d, want %d", code, ExitAborted)
	}
	got := log.String()
	if !strings.Contains(got, "SIGTERM: stopping with a savepoint") || !strings.Contains(got, "again: aborting without a savepoint") {
		t.Fatalf("log %q", got)
	}
}

func TestDefaultDir(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 42, 10, 0, time.UTC)
	if got := DefaultDir("/sp", now); got != "/sp/savepoint-20261201-174210" {
		t.Fatal(got)
	}
	if got := DefaultDir("", now); !strings.HasSuffix(got, "weir-savepoints/savepoint-20261201-174210") {
		t.Fatal(got)
	}
}
