package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTraceFlagsRefused: a bad --trace-* flag is a one-line usage error
// (exit status 2) before the job starts.
func TestTraceFlagsRefused(t *testing.T) {
	file := "../../examples/pipelines/agent-offline.yaml"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace-endpoint", "http://c:4318", "--trace-sample-ratio", "2"}, "--trace-sample-ratio 2: want a number above 0 and at most 1"},
		{[]string{"--trace-protocol", "grpc"}, "need --trace-endpoint"},
		{[]string{"--trace-endpoint", "localhost:4318"}, `endpoint "localhost:4318": want an http:// or https:// URL`},
		{[]string{"--trace-endpoint", "http://c:4318", "--trace-protocol", "udp"}, `protocol "udp": want http or grpc`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"run", file}, c.args...), &out, &errb)
		msg := strings.TrimSpace(errb.String())
		if code != 2 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line containing %q", c.args, code, msg, c.want)
		}
	}
}
