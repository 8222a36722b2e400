package pipeline

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/state"
)

const goodTail = `
source:
  file: {paths: [in.jsonl]}
  timestamp: time
sink:
  stdout: {}
`

// TestBadPipelines: each bad file gives exactly the expected first error,
// with its file:line:column and what is accepted.
func TestBadPipelines(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"empty", ``, "p.yaml:1:1: the file is empty"},
		{"syntax", "source: [a\n", "p.yaml:1:9: YAML:"},
		{"unknown top-level key", "sorce: {}\n" + goodTail, `p.yaml:1:1: pipeline: unknown key "sorce"; accepted: job, kafka, name, outputs, sink, source, steps`},
		{"missing sink", "source:\n  file: {paths: [a]}\n  timestamp: t\n", `p.yaml:1:1: pipeline: missing key "sink"`},
		{"wrong type", "job:\n  parallelism: two\n" + goodTail, "p.yaml:2:16: job.parallelism: got a string, want an integer from 1 to 32768"},
		{"out of range", "job:\n  parallelism: 0\n" + goodTail, "p.yaml:2:16: job.parallelism: 0 is out of range; want an integer from 1 to 32768"},
		{"bad duration", "job:\n  checkpoint: {interval: 10, dir: d}\n" + goodTail, `p.yaml:2:26: job.checkpoint.interval: "10" has no unit; want a duration such as 500ms, 10s or 1h`},
		{"bad duration text", "job:\n  checkpoint: {interval: soon, dir: d}\n" + goodTail, `p.yaml:2:26: job.checkpoint.interval: "soon" is not a duration`},
		{"bad state backend", "job:\n  stateBackend: rocksdb\n" + goodTail, `p.yaml:2:17: job.stateBackend: "rocksdb": want one of memory, pebble`},
		{"bad state cache", "job:\n  stateBackend: pebble\n  stateCache: lots\n" + goodTail, `p.yaml:3:15: job.stateCache: "lots": want off, a number of bytes, or a size such as 16MiB (KiB, MiB, GiB)`},
		{"negative state cache", "job:\n  stateBackend: pebble\n  stateCache: -5\n" + goodTail, `p.yaml:3:15: job.stateCache: "-5": want off, a number of bytes, or a size such as 16MiB (KiB, MiB, GiB)`},
		{"float state cache", "job:\n  stateBackend: pebble\n  stateCache: 1.5\n" + goodTail, `p.yaml:3:15: job.stateCache: "1.5": want off, a number of bytes`},
		{"list state cache", "job:\n  stateBackend: pebble\n  stateCache: [1]\n" + goodTail, "p.yaml:3:15: job.stateCache: got a list; want off, a number of bytes"},
		{"state cache on memory", "job:\n  stateCache: 16MiB\n" + goodTail, "p.yaml:2:15: job.stateCache: only with stateBackend: pebble"},
		{"two sources", "source:\n  file: {paths: [a]}\n  generate: {count: 1, fields: {a: i}}\n  timestamp: t\nsink: {stdout: {}}\n", "p.yaml:1:1: source: want exactly one of kafka, file, generate, postgres, http (got 2)"},
		{"file without timestamp", "source:\n  file: {paths: [a]}\nsink: {stdout: {}}\n", `p.yaml:1:1: source: missing key "timestamp"`},
		{"bad filter", "steps:\n  - filter: amount >> 3\n" + goodTail, `p.yaml:2:21: steps[0].filter: bad expression: unexpected token Operator(">")`},
		{"bad filter quoted", "steps:\n  - filter: 'kind == \"a\" &&'\n" + goodTail, "p.yaml:2:"},
		{"filter not bool", "steps:\n  - filter: 1 + 2\n" + goodTail, "p.yaml:2:13: steps[0].filter: bad expression: expected bool"},
		{"bad map expression", "steps:\n  - map: {set: {x: 'a +'}}\n" + goodTail, "p.yaml:2:23: steps[0].map.set.x: bad expression: unexpected token EOF"},
		{"unknown step", "steps:\n  - fliter: a\n" + goodTail, `p.yaml:2:5: steps[0]: unknown key "fliter"; accepted: agent, deadLetters, filter, keyBy, map, name, sort, tee, window`},
		{"window without keyBy", "steps:\n  - window: {tumbling: 1m, aggregate: {n: count}}\n" + goodTail, "p.yaml:2:5: steps[0].window: needs a keyBy step right before it"},
		{"keyBy last", "steps:\n  - keyBy: user\n" + goodTail, "p.yaml:2:5: steps[0].keyBy: must be followed by sort, window or agent (it is the last step)"},
		{"bad aggregate", "steps:\n  - keyBy: u\n  - window: {tumbling: 1m, aggregate: {n: median(x)}}\n" + goodTail, `p.yaml:3:43: steps[1].window.aggregate.n: "median(x)": want count, or one of sum, min, max, avg, first, last of a field`},
		{"two window types", "steps:\n  - keyBy: u\n  - window: {tumbling: 1m, session: {gap: 1m}, aggregate: {n: count}}\n" + goodTail, "p.yaml:3:5: steps[1].window: want exactly one of tumbling"},
		{"unknown output", "steps:\n  - keyBy: u\n  - window: {tumbling: 1m, late: lost, aggregate: {n: count}}\n" + goodTail, `p.yaml:3:34: steps[1].window.late: unknown output "lost"; declare it under outputs (declared: none)`},
		{"unused output", goodTail + "outputs:\n  spare: {stdout: {}}\n", "p.yaml:8:3: outputs.spare: not used"},
		{"deadLetters on a keyBy", "steps:\n  - keyBy: u\n    deadLetters: d\n  - sort: {}\n" + goodTail + "outputs:\n  d: {stdout: {}}\n", "p.yaml:3:18: steps[0].deadLetters: a keyBy step never fails on a record; deadLetters is for filter, map and agent steps"},
		{"deadLetters unknown", "steps:\n  - filter: a > 1\n    deadLetters: d\n" + goodTail, `p.yaml:3:18: steps[0].filter.deadLetters: unknown output "d"; declare it under outputs (declared: none)`},
		{"deadLetters feeds itself", "steps:\n  - tee: d\n" + goodTail + "outputs:\n  d:\n    steps:\n      - filter: a > 1\n        deadLetters: d\n    sink: {stdout: {}}\n", `p.yaml:13:22: outputs.d.steps[0].filter.deadLetters: output "d" would feed itself; name another output`},
		{"deadLetters cycle", "steps:\n  - filter: a > 1\n    deadLetters: a\n" + goodTail + "outputs:\n  a:\n    steps:\n      - filter: x > 1\n        deadLetters: b\n    sink: {stdout: {}}\n  b:\n    steps:\n      - filter: y > 1\n        deadLetters: a\n    sink: {stdout: {}}\n", "p.yaml:11:3: outputs.a: fed only through a cycle of outputs"},
		{"kafka without cluster", "source:\n  kafka: {topics: [a]}\nsink: {stdout: {}}\n", "p.yaml:2:3: source.kafka needs the Kafka cluster"},
		{"unknown topic", "kafka:\n  embedded: {topics: {orders: 2}}\nsource:\n  kafka: {topics: [ordres]}\nsink: {stdout: {}}\n", `p.yaml:4:20: source.kafka.topics: unknown topic "ordres": the in-memory embedded broker has only the topics under kafka.embedded.topics (orders)`},
		{"unknown sink topic", "kafka:\n  embedded: {topics: {a: 1}}\n" + strings.Replace(goodTail, "stdout: {}", "kafka: {topic: b, delivery: exactly-once}", 1), `p.yaml:8:18: sink.kafka.topic: unknown topic "b"`},
		{"bad delivery", strings.Replace(goodTail, "stdout: {}", "kafka: {topic: b, delivery: twice}", 1), `p.yaml:6:31: sink.kafka.delivery: "twice": want one of at-least-once, exactly-once`},
		{"bad start", "kafka: {brokers: ['h:1']}\nsource:\n  kafka: {topics: [a], start: yesterday}\nsink: {stdout: {}}\n", `p.yaml:3:31: source.kafka.start: "yesterday": want earliest, latest, committed or an RFC 3339 time`},
		{"bad broker", "kafka: {brokers: [nohost]}\n" + goodTail, `p.yaml:1:18: kafka.brokers: "nohost": want host:port`},
		{"bad template", "steps:\n  - keyBy: u\n  - agent: {prompt: 'hi {{.x'}\n" + goodTail, "p.yaml:3:21: steps[1].agent.prompt: bad template:"},
		{"agent without prompt", "steps:\n  - keyBy: u\n  - agent: {output: x}\n" + goodTail, `p.yaml:3:13: steps[1].agent: missing key "prompt"`},
		{"unset env var", "job:\n  checkpoint: {dir: '${WEIR_TEST_UNSET_VAR}'}\n" + goodTail, "p.yaml:2:21: job.checkpoint.dir: environment variable WEIR_TEST_UNSET_VAR is not set"},
		{"alias", "a: &x 1\n" + goodTail, `p.yaml:1:1: pipeline: unknown key "a"`},
		{"alias use", "name: &n x\njob:\n  stateDir: *n\n" + goodTail, "p.yaml:3:13: YAML aliases (*name) are not accepted"},
		{"duplicate key", "name: a\nname: b\n" + goodTail, "p.yaml:2:1:"},
		{"two documents", goodTail + "---\nname: x\n", "p.yaml:"},
		{"list as source", "source: [a]\nsink: {stdout: {}}\n", "p.yaml:1:9: source: got a list, want a mapping"},
		{"parallelism above max", "job: {parallelism: 8, maxParallelism: 4}\n" + goodTail, "p.yaml:1:1: job: parallelism 8 is above maxParallelism 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			es, ok := err.(Errors)
			if !ok || len(es) == 0 {
				t.Fatalf("error %T %v; want Errors", err, err)
			}
			if got := es[0].Error(); !strings.HasPrefix(got, c.want) {
				t.Errorf("got  %s\nwant %s...", err, c.want)
			}
		})
	}
}

// FuzzParse: no input makes Parse panic, and every error it returns names
// the file with a line and a column of at least 1 (P1).
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodTail))
	f.Add([]byte("steps:\n  - keyBy: u\n  - window: {tumbling: 1m, late: l, aggregate: {n: count, s: sum(x)}}\n" + goodTail + "outputs:\n  l: {stdout: {}}\n"))
	f.Add([]byte("kafka:\n  embedded: {topics: {a: 1}}\nsource:\n  kafka: {topics: [a]}\nsink: {kafka: {topic: a}}\n"))
	f.Add([]byte("a: &x [1, *x]\n"))
	f.Add([]byte("source: {generate: {count: 3, fields: {t: 'i * 1000'}}, timestamp: t}\nsink: {stdout: {}}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := Parse("f.yaml", src)
		if err == nil {
			return
		}
		es, ok := err.(Errors)
		if !ok {
			t.Fatalf("error %T: %v", err, err)
		}
		for _, e := range es {
			if e.Pos.File != "f.yaml" || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
				t.Fatalf("error without a position: %#v", e)
			}
		}
	})
}

// TestStateCache: job.stateCache reaches the spec as bytes, off as
// state.NoCache, absent as 0 (the default).
func TestStateCache(t *testing.T) {
	for _, c := range []struct {
		val  string
		want int64
	}{
		{"", 0},
		{"  stateCache: 16MiB\n", 16 << 20},
		{"  stateCache: 64KiB\n", 64 << 10},
		{"  stateCache: 1048576\n", 1 << 20},
		{"  stateCache: off\n", state.NoCache},
	} {
		spec, err := Parse("p.yaml", []byte("job:\n  stateBackend: pebble\n"+c.val+goodTail))
		if err != nil {
			t.Fatalf("%q: %v", c.val, err)
		}
		if spec.Job.StateCacheBytes != c.want {
			t.Errorf("%q: StateCacheBytes = %d, want %d", c.val, spec.Job.StateCacheBytes, c.want)
		}
	}
}
