// Command testsummary reads `go test -json` on standard input, prints what
// plain `go test` would (each package's result line, and the output of
// failed tests and of packages that failed to build or panicked), then the
// slowest tests. It exits 1 when a test or package failed, so that
//
//	go test -json ./... | go run ./internal/testsummary -slowest 10
//
// can stand in for `go test ./...` in CI with `set -o pipefail`.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	name    string
	elapsed float64
}

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest tests to list (0: none)")
	flag.Parse()
	if *slowest < 0 {
		fmt.Fprintf(os.Stderr, "testsummary: -slowest %d: want an integer >= 0\n", *slowest)
		os.Exit(2)
	}
	failed, err := summarize(os.Stdin, os.Stdout, *slowest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize copies the result of r to w as plain `go test` prints it and
// lists the slowest n tests; failed reports whether anything failed.
func summarize(r io.Reader, w io.Writer, n int) (failed bool, err error) {
	out := map[string][]string{} // package/test -> its output, until it passes
	var tests []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not test2json (a build error printed by go itself).
			fmt.Fprintln(w, string(line))
			continue
		}
		id := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			out[id] = append(out[id], e.Output)
		case "pass", "skip":
			if e.Test == "" {
				// The package's own lines: "ok  pkg 1.2s" (and PASS).
				for _, l := range out[id] {
					if !strings.HasPrefix(l, "PASS") && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
						fmt.Fprint(w, l)
					}
				}
			} else if e.Action == "pass" && !strings.Contains(e.Test, "/") {
				tests = append(tests, result{e.Package + " " + e.Test, e.Elapsed})
			}
			delete(out, id)
		case "fail":
			failed = true
			for _, l := range out[id] {
				fmt.Fprint(w, l)
			}
			delete(out, id)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	if n > 0 && len(tests) > 0 {
		sort.Slice(tests, func(i, j int) bool { return tests[i].elapsed > tests[j].elapsed })
		fmt.Fprintf(w, "\nslowest tests:\n")
		for _, t := range tests[:min(n, len(tests))] {
			fmt.Fprintf(w, "%8.2fs  %s\n", t.elapsed, t.name)
		}
	}
	return failed, nil
}
