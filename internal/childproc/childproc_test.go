package childproc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain runs the child named by WEIR_CHILDPROC_TEST: "exit" prints two
// lines (stdout, stderr) and fails; "hang" prints a line and blocks.
func TestMain(m *testing.M) {
	switch os.Getenv("WEIR_CHILDPROC_TEST") {
	case "exit":
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(3)
	case "hang":
		fmt.Println("ready")
		select {}
	}
	os.Exit(m.Run())
}

// TestLinesAndFailure: both streams reach onLine in order (C2), and a
// failed child is an error holding its output (C3).
func TestLinesAndFailure(t *testing.T) {
	var lines []string
	p, err := Start(context.Background(), "WEIR_CHILDPROC_TEST", "exit", func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatal(err)
	}
	killed, err := p.Wait()
	if killed || err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "to stderr") {
		t.Fatalf("Wait: killed %v, err %v; want a failure naming exit status 3 and the output", killed, err)
	}
	if strings.Join(lines, "|") != "to stdout|to stderr" {
		t.Fatalf("lines %q", lines)
	}
}

// TestKill: a child killed by Kill is reported killed, without error (C3).
func TestKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ready := make(chan struct{})
	p, err := Start(ctx, "WEIR_CHILDPROC_TEST", "hang", func(l string) {
		if l == "ready" {
			close(ready)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-p.Exited():
		_, err := p.Wait()
		t.Fatalf("the child ended before it was ready: %v", err)
	}
	p.Kill()
	if killed, err := p.Wait(); !killed || err != nil {
		t.Fatalf("Wait: killed %v, err %v; want killed", killed, err)
	}
}
