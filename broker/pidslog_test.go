package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// The framing reads back what it writes, and stops at a torn or corrupt
// tail, which the rewrite keeps as it was.
func TestPIDsEntriesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var entries []pidsEntry
		var raw []byte
		for i := range rapid.IntRange(0, 8).Draw(t, "n") {
			e := pidsEntry{version: uint16(rapid.IntRange(0, 3).Draw(t, "version")), data: fmt.Appendf(nil, `{"type":"init","pid":%d}`, i)}
			entries = append(entries, e)
			raw = appendPIDsEntry(raw, e)
		}
		tail := rapid.SliceOfN(rapid.Byte(), 0, 9).Draw(t, "tail")
		got, rest := readPIDsEntries(append(raw, tail...))
		if len(got) != len(entries) {
			t.Fatalf("read %d entries, wrote %d", len(got), len(entries))
		}
		for i := range got {
			if got[i].version != entries[i].version || !bytes.Equal(got[i].data, entries[i].data) {
				t.Fatalf("entry %d: %+v, want %+v", i, got[i], entries[i])
			}
		}
		if !bytes.Equal(rest, tail) {
			t.Fatalf("rest %q, want %q", rest, tail)
		}
	})
}

// repairPIDsLog gives the commit flag back to an "init" that follows a
// committing "endtx" of the same producer at the next epoch, and to no
// other entry.
func TestRepairPIDsLog(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"type":"init","pid":1,"epoch":0,"txid":"a","timeout":60000}`,
		`{"type":"endtx","pid":1,"epoch":0,"commit":true}`,
		`{"type":"init","pid":1,"epoch":1,"txid":"a","timeout":60000}`, // the KIP-890 bump after a commit: fixed
		`{"type":"init","pid":2,"epoch":0,"txid":"b","timeout":60000}`,
		`{"type":"endtx","pid":2,"epoch":0,"commit":false}`,
		`{"type":"init","pid":2,"epoch":1,"txid":"b","timeout":60000}`, // after an abort: left
		`{"type":"endtx","pid":1,"epoch":1,"commit":true}`,
		`{"type":"init","pid":3,"epoch":0,"txid":"c","timeout":60000}`, // another producer between
		`{"type":"init","pid":1,"epoch":5,"txid":"a","timeout":60000}`, // not the next epoch: left
	}
	var raw []byte
	for _, l := range lines {
		raw = appendPIDsEntry(raw, pidsEntry{version: 1, data: []byte(l)})
	}
	if err := os.WriteFile(filepath.Join(dir, pidsLogName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := repairPIDsLog(dir)
	if err != nil || n != 1 {
		t.Fatalf("repaired %d entries (%v), want 1", n, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, pidsLogName))
	if err != nil {
		t.Fatal(err)
	}
	got, rest := readPIDsEntries(b)
	if len(got) != len(lines) || len(rest) != 0 {
		t.Fatalf("%d entries and %d bytes after the rewrite, want %d and 0", len(got), len(rest), len(lines))
	}
	for i, e := range got {
		if i != 2 {
			if string(e.data) != lines[i] {
				t.Errorf("entry %d changed: %s, was %s", i, e.data, lines[i])
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(e.data, &m); err != nil {
			t.Fatal(err)
		}
		if m["commit"] != true || m["epoch"] != 1.0 || m["txid"] != "a" {
			t.Errorf("entry 2: %s, want the init of epoch 1 with commit true", e.data)
		}
	}
	if n, err := repairPIDsLog(dir); err != nil || n != 0 {
		t.Fatalf("a second repair changed %d entries (%v), want 0", n, err)
	}
}

// Start on a directory left by a kill (the running mark still there)
// reports what it repaired, in one line for the commands.
func TestStartReportsRecovery(t *testing.T) {
	dir := t.TempDir()
	var raw []byte
	for _, l := range []string{
		`{"type":"init","pid":1,"epoch":0,"txid":"a","timeout":60000}`,
		`{"type":"endtx","pid":1,"epoch":0,"commit":true}`,
		`{"type":"init","pid":1,"epoch":1,"txid":"a","timeout":60000}`,
	} {
		raw = appendPIDsEntry(raw, pidsEntry{version: 1, data: []byte(l)})
	}
	if err := os.WriteFile(filepath.Join(dir, pidsLogName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runningFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Start(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Recovery()
	b.Close()
	if want := (Recovery{Unclean: true, RestoredCommits: 1}); r != want {
		t.Fatalf("Recovery %+v, want %+v", r, want)
	}
	if got, want := r.String(), "recovered from an unclean shutdown: no transaction was left open; committed transactions restored: 1"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	// Closed cleanly: the next start repairs nothing.
	b, err = Start(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if r := b.Recovery(); r != (Recovery{}) || r.String() != "" {
		t.Fatalf("after a clean close: %+v %q", r, r.String())
	}
}
