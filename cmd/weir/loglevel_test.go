package main

import (
	"strings"
	"testing"
)

// TestLogLevel: --log-level none logs nothing, a level logs from it up,
// anything else is refused naming what is accepted.
func TestLogLevel(t *testing.T) {
	for _, c := range []struct {
		level string
		want  []string // the messages logged of debug, info, warn, error
	}{
		{"none", nil},
		{"debug", []string{"d", "i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"ERROR", []string{"e"}},
	} {
		var b strings.Builder
		l := newLogger(&b, c.level)
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			if _, m, ok := strings.Cut(line, "msg="); ok {
				got = append(got, m)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("--log-level %s logged %q; want %q", c.level, got, c.want)
		}
	}
	if _, _, err := parseLogLevel("verbose"); err == nil || err.Error() != `--log-level "verbose": want none, debug, info, warn or error` {
		t.Fatalf("parseLogLevel(verbose) = %v", err)
	}
}
