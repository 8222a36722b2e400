package jsonl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type fuzzRec struct {
	A int               `json:"a"`
	B string            `json:"b"`
	C []float64         `json:"c"`
	D map[string]any    `json:"d"`
	E *struct{ X bool } `json:"e"`
}

// show is v as a comparable string (its JSON: maps sorted, pointers
// followed).
func show(t *testing.T, v fuzzRec) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzSource feeds arbitrary files to the JSON Lines reader. It must never
// panic, and it must emit exactly what the format says (package
// documentation): a leading byte-order mark is skipped, lines end at "\n"
// (a "\r" before it is dropped), a line longer than MaxLineSize (even a
// blank one) is a dead letter, other blank lines are skipped, a line that
// does not decode into T is a dead letter, and
// every other line is a record equal to json.Unmarshal's value.
//
//	go test ./connector/jsonl -run '^$' -fuzz FuzzSource -fuzztime 60s -parallel 1
func FuzzSource(f *testing.F) {
	f.Add([]byte("\uFEFF{\"a\":1}\n\n  \t\r\n{\"b\":\"x\"}\r\n\r\n{\"c\":[1.5]}"))
	f.Add([]byte(`{"a":1,"d":{"k":[null,true]},"e":{"X":true}}` + "\n" + `{"a":"no"}` + "\n" + `[1,2]`))
	f.Add([]byte(`{"b":"` + string(bytes.Repeat([]byte("y"), 120)) + `"}` + "\n{}\n"))
	f.Add([]byte("{\"a\":1} {\"a\":2}\n\r\r\n\xff\n"))
	f.Add([]byte("\uFEFF{\"b\":\"" + string(bytes.Repeat([]byte("z"), 92)) + "\"}\n")) // 100 bytes after the mark: a record
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "in.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		const maxLine = 100
		out := &fakeOut[fuzzRec]{}
		drain(t, newReader(t, SourceWith(Options[fuzzRec]{MaxLineSize: maxLine}, p), 0, 1), out)

		var want []string
		body := bytes.TrimPrefix(data, []byte("\uFEFF"))
		for line := range bytes.Lines(body) {
			line = trimEOL(line)
			if len(line) > maxLine {
				want = append(want, "dead")
				continue
			}
			if isBlank(line) {
				continue
			}
			var v fuzzRec
			if err := json.Unmarshal(line, &v); err != nil {
				want = append(want, "dead")
				continue
			}
			want = append(want, show(t, v))
		}
		var got []string
		vi, di := 0, 0
		for _, c := range out.calls {
			switch c {
			case "collect 0":
				got = append(got, show(t, out.values[vi]))
				vi++
			case "dead 0":
				got = append(got, "dead")
				di++
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("file %q:\n got %v\nwant %v", data, got, want)
		}
	})
}
