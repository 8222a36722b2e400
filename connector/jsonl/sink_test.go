package jsonl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/watermark"
)

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestSinkRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var in []event
	for i := range 1000 {
		in = append(in, event{ID: i, TS: int64(1 + i), Name: fmt.Sprintf("<%d> & \"%d\"", i, i)})
	}
	for _, par := range []int{1, 2} {
		out := filepath.Join(dir, fmt.Sprintf("out%d.jsonl", par))
		env := weir.NewEnvironment(weir.Config{Parallelism: par})
		weir.ToSink(weir.FromSlice(env, "in", in, byTS()), "write", jsonl.Sink[event](out))
		execute(t, env)

		var parts []string
		for sub := range par {
			parts = append(parts, jsonl.PartPath(out, sub, par))
		}
		if par == 1 && parts[0] != out || par == 2 && parts[1] != out+"-1" {
			t.Fatalf("part files %v", parts)
		}
		lines := 0
		for _, p := range parts {
			for _, l := range readLines(t, p) {
				if !strings.HasPrefix(l, `{"id":`) || strings.Contains(l, `\u003c`) {
					t.Fatalf("line %q", l)
				}
				lines++
			}
		}
		if lines != len(in) {
			t.Fatalf("par %d: %d lines, want %d", par, lines, len(in))
		}

		env = weir.NewEnvironment(weir.Config{Parallelism: par})
		s := weir.FromSource(env, "read", jsonl.Source[event](parts...), byTS())
		got := weir.Collect(s)
		dead := weir.Collect(weir.DeadLetters(s))
		execute(t, env)
		recs := got.Records()
		slices.SortFunc(recs, func(a, b weir.Record[event]) int { return a.Value.ID - b.Value.ID })
		if len(recs) != len(in) || len(dead.Values()) != 0 {
			t.Fatalf("par %d: %d records, %d dead letters", par, len(recs), len(dead.Values()))
		}
		for i, r := range recs {
			if r.Value != in[i] || r.Timestamp != in[i].TS {
				t.Fatalf("par %d: record %d is %+v, want %+v", par, i, r, in[i])
			}
		}
	}
}

type unencodable struct{ TS int64 }

func (unencodable) MarshalJSON() ([]byte, error) { return nil, errors.New("no way") }

func TestSinkErrorsFailTheJob(t *testing.T) {
	dir := t.TempDir()
	strat := watermark.NoWatermarks[unencodable]().WithTimestamp(func(u unencodable, _ int64) (int64, bool) { return u.TS, true })
	for name, path := range map[string]string{
		"encode": filepath.Join(dir, "out.jsonl"),
		"create": filepath.Join(dir, "no-such-dir", "out.jsonl"),
	} {
		env := weir.NewEnvironment(weir.Config{})
		weir.ToSink(weir.FromSlice(env, "in", []unencodable{{1}}, strat), "write", jsonl.Sink[unencodable](path))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := env.Execute(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s", name, err, path)
		}
	}
}

func TestDeadLetterSink(t *testing.T) {
	dir := t.TempDir()
	in := write(t, dir, "in.jsonl", "{\"id\":1,\"ts\":5}\nnot json\n{\"id\":2}\n\"\xff\xfe\"\n")
	deadPath := filepath.Join(dir, "dead.jsonl")
	env := weir.NewEnvironment(weir.Config{})
	s := weir.FromSource(env, "events", jsonl.Source[event](in), byTS())
	weir.ToSink(weir.DeadLetters(s), "dead-letters", jsonl.DeadLetterSink(deadPath))
	good := weir.Collect(s)
	execute(t, env)
	if len(good.Values()) != 1 {
		t.Fatalf("records %v", good.Values())
	}

	type line struct {
		Source     string          `json:"source"`
		Split      int             `json:"split"`
		Position   int64           `json:"position"`
		Reason     string          `json:"reason"`
		Raw        *string         `json:"raw"`
		RawBase64  []byte          `json:"rawBase64"`
		Value      json.RawMessage `json:"value"`
		ValueError string          `json:"valueError"`
		Time       int64           `json:"time"`
	}
	var got []line
	for _, l := range readLines(t, deadPath) {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if x.Source != "events" || x.Time < time.Now().Add(-time.Minute).UnixMilli() {
			t.Errorf("dead letter %q", l)
		}
		got = append(got, x)
	}
	if len(got) != 3 {
		t.Fatalf("%d dead letters", len(got))
	}
	slices.SortFunc(got, func(a, b line) int { return strings.Compare(a.Reason, b.Reason) })
	if d := got[0]; d.Position != 2 || d.Raw == nil || *d.Raw != "not json" || d.RawBase64 != nil || d.Value != nil ||
		!strings.HasPrefix(d.Reason, "jsonl: "+in+":2: invalid character") {
		t.Errorf("undecodable text: %+v", d)
	}
	if d := got[1]; d.Position != 4 || d.Raw != nil || string(d.RawBase64) != "\"\xff\xfe\"" {
		t.Errorf("undecodable bytes: %+v", d)
	}
	if d := got[2]; d.Reason != "record has no usable timestamp" || string(d.Value) != `{"id":2}` || d.Raw != nil {
		t.Errorf("no timestamp: %+v", d)
	}
}
