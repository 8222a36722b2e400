package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// A run's summary names the files a file output writes: with parallelism
// 2 each subtask writes PATH-0 and PATH-1 (jsonl.PartPath), and the
// summary's PATH-{0..1} names exactly those; with parallelism 1, PATH
// itself. Every file named exists and the lines in them are the records
// counted.
func TestSummaryNamesTheFilesAFileOutputWrites(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism=%d", par), func(t *testing.T) {
			dir := t.TempDir()
			var lines []string
			for i := range 40 {
				if i%10 == 3 {
					lines = append(lines, `{"id":`+fmt.Sprint(i)+`}`) // no timestamp: a dead letter
					continue
				}
				lines = append(lines, fmt.Sprintf(`{"id":%d,"time":%d}`, i, 1000+i))
			}
			in := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, bad := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "bad.jsonl")
			file := filepath.Join(dir, "p.yaml")
			src := fmt.Sprintf(`job: {parallelism: %d}
source:
  file: {paths: [%s]}
  timestamp: time
  deadLetters: bad
sink:
  file: {path: %s}
outputs:
  bad:
    file: {path: %s}
`, par, in, out, bad)
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := pipeline.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			if _, err := pipeline.Run(context.Background(), spec, pipeline.Options{Logger: discardLogger()}, &log); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]int{out: 36, bad: 4} {
				named, files := path, []string{path}
				if par > 1 {
					named, files = path+"-{0..1}", []string{path + "-0", path + "-1"}
				}
				if !strings.Contains(log.String(), " records to "+named+" (exactly once; cut back to the checkpoint on resume)") {
					t.Errorf("the summary does not name %s:\n%s", named, log.String())
				}
				n := 0
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatalf("a file the summary names: %v", err)
					}
					n += bytes.Count(b, []byte("\n"))
				}
				if n != want {
					t.Errorf("%s: %d lines, want %d", named, n, want)
				}
			}
			if par > 1 {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("%s exists with parallelism %d (err %v): the summary would name the wrong file", out, par, err)
				}
			}
		})
	}
}
