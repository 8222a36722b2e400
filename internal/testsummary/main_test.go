package main

import (
	"strings"
	"testing"
)

const sample = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: boom\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (0.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"quiet\n"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":2.25}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t2.8s\n"}
{"Action":"fail","Package":"p","Elapsed":2.8}
{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}
{"Action":"pass","Package":"q","Elapsed":0.1}
# q/x
x.go:1: syntax error
`

func TestSummarize(t *testing.T) {
	var b strings.Builder
	failed, err := summarize(strings.NewReader(sample), &b, 5)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v: want a failure reported", failed, err)
	}
	got := b.String()
	for _, want := range []string{"a_test.go:9: boom", "--- FAIL: TestA", "FAIL\tp\t2.8s", "ok  \tq\t0.1s", "x.go:1: syntax error", "2.25s  p TestB"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

func TestSummarizePass(t *testing.T) {
	var b strings.Builder
	failed, err := summarize(strings.NewReader(`{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}
{"Action":"pass","Package":"q","Elapsed":0.1}
`), &b, 0)
	if err != nil || failed || strings.Contains(b.String(), "slowest") {
		t.Fatalf("failed %v, err %v, output %q", failed, err, b.String())
	}
}
