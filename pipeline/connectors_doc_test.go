package pipeline_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/weirproject/weir/pipeline"
)

// TestConnectorsDocKeys checks docs/connectors.md against the parser:
// every YAML block of the page is a pipeline file that parses, and every
// key in the YAML column of a section's option tables is a key of that
// section's blocks (so it parses where it is documented). A key renamed
// or dropped in the parser, or documented wrongly, fails it.
func TestConnectorsDocKeys(t *testing.T) {
	const page = "../docs/connectors.md"
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	sections := strings.Split(string(src), "\n## ")
	blockRE := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	keyRE := regexp.MustCompile("`([A-Za-z.]+)`")
	// The blocks' ${VAR}s are expanded by Parse: give each a value.
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(string(src), -1) {
		t.Setenv(m[1], "doc-value")
	}
	checked := 0
	for _, sec := range sections[1:] {
		title, _, _ := strings.Cut(sec, "\n")
		paths := map[string]bool{}
		for _, m := range blockRE.FindAllStringSubmatch(sec, -1) {
			if _, err := pipeline.Parse(page+" ("+title+")", []byte(m[1])); err != nil {
				t.Errorf("%s: a YAML block does not parse: %v\n%s", title, err, m[1])
				continue
			}
			var doc any
			if err := yaml.Unmarshal([]byte(m[1]), &doc); err != nil {
				t.Fatal(err)
			}
			keyPaths(doc, "", paths)
		}
		inTable := false
		for _, line := range strings.Split(sec, "\n") {
			if strings.HasPrefix(line, "| YAML |") {
				inTable = true
				continue
			}
			if !strings.HasPrefix(line, "|") {
				inTable = false
				continue
			}
			if !inTable || strings.HasPrefix(line, "|---") {
				continue
			}
			cell := strings.Split(line, "|")[1]
			if strings.Contains(cell, "top level") || strings.Contains(cell, "job.checkpoint") {
				continue // the job's or the kafka connection's keys, documented in pipelines.md
			}
			for _, m := range keyRE.FindAllStringSubmatch(cell, -1) {
				key := m[1]
				found := false
				for p := range paths {
					if p == key || strings.HasSuffix(p, "."+key) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s: the table documents YAML key %q, which no YAML block of the section uses", title, key)
				}
				checked++
			}
		}
	}
	if checked < 60 {
		t.Fatalf("only %d table keys checked: the page's tables are not where the test looks (rows of tables headed \"| YAML |\")", checked)
	}
	t.Logf("%d documented keys found in blocks that parse", checked)
}

// keyPaths adds the dotted path of every mapping key in v under prefix.
func keyPaths(v any, prefix string, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(c, p, out)
		}
	case []any:
		for _, c := range v {
			keyPaths(c, prefix, out)
		}
	}
}
