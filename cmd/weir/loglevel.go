package main

import (
	"fmt"
	"io"
	"log/slog"
)

// logLevels is what --log-level takes.
const logLevels = "none, debug, info, warn or error"

// parseLogLevel parses a --log-level value: none, or a slog level name.
// none reports ok false (no logs).
func parseLogLevel(s string) (lv slog.Level, ok bool, err error) {
	if s == "none" {
		return 0, false, nil
	}
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return 0, false, fmt.Errorf("--log-level %q: want %s", s, logLevels)
	}
	return lv, true, nil
}

// newLogger is the logger of a --log-level value already checked by
// parseLogLevel: text lines on w at that level and above, or none.
func newLogger(w io.Writer, level string) *slog.Logger {
	lv, ok, _ := parseLogLevel(level)
	if !ok {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv}))
}
