package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/killpoint"
)

// rerunCase is a pipeline run by `weir run FILE` again and again with the
// same command line, killed (SIGKILL) at named points, until a run ends by
// itself; then its exactly-once output must hold every input exactly once.
type rerunCase struct {
	name string
	// write writes the pipeline and its inputs into dir; it returns the
	// pipeline file and the number of inputs.
	write func(t *testing.T, dir string) (string, int)
	// output returns the ids of the records the committed output holds.
	output func(t *testing.T, dir string) []string
}

// TestRunResumesAfterKill: `weir run FILE`, killed with SIGKILL at several
// points (a record written to the open transaction; a checkpoint's data
// written and its manifest not; from outside once a checkpoint completed)
// and started again with the same command line, resumes from its newest
// checkpoint each time: the exactly-once output (Kafka read_committed, the
// file sink's published files, the JSON-lines files of sink.file.path)
// holds every input exactly once, as does an agent step's (40 tickets, 40
// replies). WEIR_RESUME_RANDOM=N adds N runs
// with random kill points (the seed is printed).
func TestRunResumesAfterKill(t *testing.T) {
	plans := [][]string{
		{"sink.after-write@1", "outside", "checkpoint.before-manifest@1", "sink.after-write@7"},
		{"sink.after-write@2000", "checkpoint.before-manifest@1", "sink.after-write@100"},
	}
	fixedPlans := len(plans)
	if n, _ := strconv.Atoi(os.Getenv("WEIR_RESUME_RANDOM")); n > 0 {
		seed := time.Now().UnixNano()
		t.Logf("random kill points: WEIR_RESUME_RANDOM=%d, seed %d", n, seed)
		r := rand.New(rand.NewPCG(uint64(seed), 0))
		for range n {
			var p []string
			for range 1 + r.IntN(5) {
				switch r.IntN(3) {
				case 0:
					p = append(p, fmt.Sprintf("sink.after-write@%d", 1+r.IntN(2000)))
				case 1:
					p = append(p, fmt.Sprintf("checkpoint.before-manifest@%d", 1+r.IntN(4)))
				default:
					p = append(p, "outside")
				}
			}
			plans = append(plans, p)
		}
	}
	for _, c := range []rerunCase{kafkaRerun(), fileRerun(), linesRerun(), agentRerun()} {
		t.Run(c.name, func(t *testing.T) {
			for i, plan := range plans {
				if c.name == "agent" && i > 0 && os.Getenv("WEIR_RESUME_RANDOM") == "" {
					break // one plan: the model's latency makes each run slower
				}
				t.Run(strings.Join(plan, ","), func(t *testing.T) {
					dir := t.TempDir()
					file, n := c.write(t, dir)
					killed := 0
					for j, kp := range plan {
						if rerun(t, file, dir, kp) {
							killed++
						} else if j == 0 && (i == 0 || (i < fixedPlans && c.name != "agent")) { // the plans every run has
							t.Fatalf("the first run was not killed at %s", kp)
						}
					}
					// The last run resumes when a run before it completed a
					// checkpoint (random plans may kill every run before).
					chks, _ := checkpoint.List(filepath.Join(dir, "checkpoints"))
					out, errOut, code := runWeir(t, "run", file)
					if code != 0 {
						t.Fatalf("the last run: exit %d\n%s%s", code, out, errOut)
					}
					if want := "weir run: started fresh"; len(chks) > 0 {
						if want = "weir run: resumed from checkpoint " + fmt.Sprint(chks[len(chks)-1]) + " "; !strings.Contains(errOut, want) {
							t.Errorf("the last run after %d kills and checkpoints %v: want %q in\n%s", killed, chks, want, errOut)
						}
					} else if !strings.Contains(errOut, want) {
						t.Errorf("the last run after %d kills and no checkpoint: want %q in\n%s", killed, want, errOut)
					}
					ids := c.output(t, dir)
					seen := map[string]int{}
					for _, id := range ids {
						seen[id]++
					}
					var dups []string
					for id, k := range seen {
						if k > 1 {
							dups = append(dups, fmt.Sprintf("%s x%d", id, k))
						}
					}
					if len(ids) != n || len(seen) != n || len(dups) > 0 {
						t.Fatalf("%d records committed, %d distinct, want %d each once (killed %d times); duplicates: %v", len(ids), len(seen), n, killed, dups)
					}
				})
			}
		})
	}
}

// rerun runs `weir run file` once, killed at kp: a kill point name@n
// (WEIR_KILLPOINT), or "outside" for a SIGKILL from the test once the
// checkpoint directory holds a complete checkpoint newer than those it held
// before. It reports whether the run was killed (a run may end first).
func rerun(t *testing.T, file, dir, kp string) bool {
	t.Helper()
	cmd := weirCmd(t, "run", file)
	var errb strings.Builder
	cmd.Stderr, cmd.Stdout = &errb, nil
	if kp != "outside" {
		cmd.Env = append(cmd.Env, killpoint.Env+"="+kp)
	}
	chk := filepath.Join(dir, "checkpoints")
	before, _ := checkpoint.List(chk)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if kp == "outside" {
		tick := time.NewTicker(5 * time.Millisecond)
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				if ids, _ := checkpoint.List(chk); len(ids) > len(before) || (len(ids) > 0 && len(before) > 0 && ids[len(ids)-1] > before[len(before)-1]) {
					cmd.Process.Signal(syscall.SIGKILL)
					err = <-done
					break wait
				}
			}
		}
		tick.Stop()
	} else {
		err = <-done
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
		t.Fatalf("run killed at %s: %v\n%s", kp, err, errb.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// writeLines writes the JSON lines {id, time, k} of records from to
// from+n-1 to path.
func writeLines(t *testing.T, path string, from, n int) {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `{"id":"r-%05d","time":%d,"k":"k%d"}`+"\n", i, 1767225600000+int64(i), i%17)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kafkaRerun() rerunCase {
	return rerunCase{name: "kafka",
		write: func(t *testing.T, dir string) (string, int) {
			const n = 3000
			writeLines(t, filepath.Join(dir, "in.jsonl"), 0, n)
			// The cluster outlives the job, as a Kafka cluster outlives a
			// job an orchestrator restarts (an embedded broker would die
			// with the job: its restart aborts the open transactions).
			br, err := broker.Start(broker.Options{DataDir: filepath.Join(dir, "kafka"), Topics: map[string]int32{"in": 3, "out": 3}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { br.Close() })
			writeFile(t, filepath.Join(dir, "broker"), br.Addrs()[0])
			produceLines(t, br.Addrs(), "in", filepath.Join(dir, "in.jsonl"))
			file := filepath.Join(dir, "p.yaml")
			writeFile(t, file, `name: rerun-kafka
job:
  parallelism: 2
  checkpoint: {interval: 20ms, dir: checkpoints}
kafka:
  brokers: [`+br.Addrs()[0]+`]
source:
  kafka: {topics: [in], bounded: true}
  timestamp: time
steps:
  - map: {set: {seen: "true"}}
sink:
  kafka: {topic: out, delivery: exactly-once, key: k}
`)
			return file, n
		},
		output: func(t *testing.T, dir string) []string {
			addr, err := os.ReadFile(filepath.Join(dir, "broker"))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(string(addr)), kgo.ConsumeTopics("out"),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// Everything is committed or aborted by now: read until a poll
			// of a second brings nothing more.
			var ids []string
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				fs := cl.PollFetches(ctx)
				cancel()
				got := 0
				fs.EachRecord(func(r *kgo.Record) {
					got++
					var m map[string]any
					if err := json.Unmarshal(r.Value, &m); err != nil {
						t.Fatalf("%s: %v", r.Value, err)
					}
					ids = append(ids, fmt.Sprint(m["id"]))
				})
				if got == 0 {
					return ids
				}
			}
		},
	}
}

// fileIDs returns the field of every line of the published files
// (part-*) of an exactly-once file sink's directory.
func fileIDs(t *testing.T, dir, field string) []string {
	t.Helper()
	return linesIDs(t, filepath.Join(dir, "part-*"), field)
}

// linesIDs returns field of every JSON line of the files matching glob.
func linesIDs(t *testing.T, glob, field string) []string {
	t.Helper()
	parts, _ := filepath.Glob(glob)
	var ids []string
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %s: %v", p, sc.Text(), err)
			}
			ids = append(ids, fmt.Sprint(m[field]))
		}
		f.Close()
	}
	return ids
}

// produceLines writes the lines of file as records of topic, keyed by
// their field k.
func produceLines(t *testing.T, addrs []string, topic, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(m["k"])), Value: []byte(line)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// threeFilesPipeline writes n input lines into three files of dir and a
// pipeline reading them at parallelism 2 with 20 ms checkpoints, through
// a filter, the steps given (YAML list items, or "") and sink, and
// returns the pipeline file.
func threeFilesPipeline(t *testing.T, dir, name string, n int, steps, sink string) string {
	t.Helper()
	for i, f := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		writeLines(t, filepath.Join(dir, f), i*n/3, n/3)
	}
	file := filepath.Join(dir, "p.yaml")
	writeFile(t, file, `name: `+name+`
job:
  parallelism: 2
  checkpoint: {interval: 20ms, dir: checkpoints}
source:
  file: {paths: [a.jsonl, b.jsonl, c.jsonl]}
  timestamp: time
steps:
  - filter: id != ""
`+steps+`sink:
  `+sink+`
`)
	return file
}

func fileRerun() rerunCase {
	return rerunCase{name: "file",
		write: func(t *testing.T, dir string) (string, int) {
			const n = 3000
			return threeFilesPipeline(t, dir, "rerun-file", n, "", "file: {dir: out}"), n
		},
		output: func(t *testing.T, dir string) []string { return fileIDs(t, filepath.Join(dir, "out"), "id") },
	}
}

// linesRerun writes JSON lines to a file per subtask (sink.file.path):
// each restore cuts the files back to their checkpointed lengths.
func linesRerun() rerunCase {
	return rerunCase{name: "lines",
		write: func(t *testing.T, dir string) (string, int) {
			// Enough long lines that the write buffer reaches the files
			// between checkpoints, and runs outlast a few of them.
			const n = 30000
			pad := "  - map:\n      set: {pad: '\"" + strings.Repeat("x", 300) + "\"'}\n"
			return threeFilesPipeline(t, dir, "rerun-lines", n, pad, "file: {path: out.jsonl}"), n
		},
		output: func(t *testing.T, dir string) []string { return linesIDs(t, filepath.Join(dir, "out.jsonl*"), "id") },
	}
}

func agentRerun() rerunCase {
	return rerunCase{name: "agent",
		write: func(t *testing.T, dir string) (string, int) {
			src, err := os.ReadFile("../../examples/pipelines/agent-offline.yaml")
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.ReadFile("../../examples/pipelines/tickets.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "tickets.jsonl"), string(in))
			// The example, with its directories in dir (the same ones at
			// every run, as WEIR_OUT would give) and a checkpoint interval
			// short enough for checkpoints during a run.
			y := strings.ReplaceAll(string(src), "${WEIR_OUT:-/tmp/weir-pipelines}/agent-offline/", "")
			y = strings.Replace(y, "interval: 1s", "interval: 20ms", 1)
			if !strings.Contains(y, "dir: checkpoints") || !strings.Contains(y, "dir: replies") {
				t.Fatalf("examples/pipelines/agent-offline.yaml no longer has its checkpoint and reply directories:\n%s", y)
			}
			file := filepath.Join(dir, "agent.yaml")
			writeFile(t, file, y)
			return file, strings.Count(string(in), "\n")
		},
		output: func(t *testing.T, dir string) []string { return fileIDs(t, filepath.Join(dir, "replies"), "ticket") },
	}
}
