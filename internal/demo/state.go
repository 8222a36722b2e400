package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/dashboard"
)

// HistoryMarker is the file, in Options.KafkaData, that a run writes once
// the whole history has been produced and acknowledged by the broker. A
// later run on the same data reuses the history only if the marker is
// there: data without it is the remains of an interrupted production.
const HistoryMarker = "weir-demo-history-complete"

// markHistoryComplete writes the marker (synced) after the history was
// produced into dir.
func markHistoryComplete(dir string, records int64) error {
	path := filepath.Join(dir, HistoryMarker)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: mark the history complete: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d history records produced at %s\n", records, time.Now().UTC().Format(time.RFC3339))
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("demo: mark the history complete: %w", err)
	}
	return nil
}

// historyComplete reports whether dir holds the marker.
func historyComplete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, HistoryMarker))
	return err == nil
}

// errIncompleteHistory is returned for Kafka data without the marker.
var errIncompleteHistory = errors.New("demo: incomplete history")

// Command returns the weir demo command line that runs with o again (the
// flags' defaults are those of Options, and seed 1),
// with every option that differs from the defaults (shell-quoted), followed
// by extra flags. Options for a savepoint to take, a restore and a resume
// are left out: give them in extra.
func Command(o Options, extra ...string) string {
	o = o.withDefaults()
	d := Options{}.withDefaults()
	args := []string{"weir", "demo"}
	add := func(flag, v string) { args = append(args, "--"+flag, quote(v)) }
	if o.KafkaData != "" {
		add("kafka-data", o.KafkaData)
	}
	if o.CheckpointDir != "" {
		add("checkpoint-dir", o.CheckpointDir)
	}
	ints := []struct {
		flag   string
		v, def int64
	}{
		{"orders", o.Orders, d.Orders}, {"days", int64(o.Days), int64(d.Days)},
		{"customers", int64(o.Customers), int64(d.Customers)}, {"items", int64(o.Items), int64(d.Items)},
		{"parallelism", int64(o.Parallelism), int64(d.Parallelism)}, {"rate", int64(o.Rate), int64(d.Rate)},
		{"malformed", int64(max(o.Malformed, 0)), int64(d.Malformed)}, {"held-back", int64(max(o.HeldBack, 0)), int64(d.HeldBack)},
	}
	for _, f := range ints {
		if f.v != f.def {
			add(f.flag, strconv.FormatInt(f.v, 10))
		}
	}
	if o.Seed != 1 {
		add("seed", strconv.FormatUint(o.Seed, 10))
	}
	if o.Live != d.Live {
		add("live", max(o.Live, 0).String())
	}
	if o.StateBackend != "" && o.StateBackend != "memory" {
		add("state-backend", o.StateBackend)
	}
	if o.MetricsAddr != "" {
		add("metrics-addr", o.MetricsAddr)
	}
	for _, e := range extra {
		if strings.HasPrefix(e, "--") {
			args = append(args, e)
		} else {
			args = append(args, quote(e))
		}
	}
	return strings.Join(args, " ")
}

// quote shell-quotes s when it holds anything but safe characters.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validate checks the options (as given: 0 means the default) before the
// demo does any work.
func (o Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("demo: "+format, args...)) }
	for _, f := range []struct {
		name string
		v    int64
	}{{"Orders", o.Orders}, {"Days", int64(o.Days)}, {"Customers", int64(o.Customers)}, {"Items", int64(o.Items)},
		{"Parallelism", int64(o.Parallelism)}, {"Rate", int64(o.Rate)}, {"Show", int64(o.Show)}} {
		if f.v < 0 {
			bad("Options.%s %d: want 0 (the default) or a positive number", f.name, f.v)
		}
	}
	if o.Parallelism > MaxParallelism {
		bad("Options.Parallelism %d: want at most %d", o.Parallelism, MaxParallelism)
	}
	if o.Window < 0 || o.OutOfOrder < 0 {
		bad("Options.Window %v and OutOfOrder %v: want 0 (the default) or a positive duration", o.Window, o.OutOfOrder)
	}
	if o.Resume && o.CheckpointDir == "" {
		bad("Options.Resume needs Options.CheckpointDir")
	}
	if o.SavepointAfter > 0 && o.SavepointDir == "" {
		bad("Options.SavepointAfter %v needs Options.SavepointDir, where the savepoint is written", o.SavepointAfter)
	}
	if o.UIAddr != "" {
		if _, err := dashboard.ParseAddr(o.UIAddr); err != nil {
			bad("Options.UIAddr: %v", err)
		}
	}
	return errors.Join(errs...)
}
