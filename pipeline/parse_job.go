package pipeline

import (
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/internal/bytesize"
	"github.com/weirproject/weir/state"
)

// job reads the job section: its table, and what needs several keys.
func (d *dec) job(k, n ast.Node, j *JobSpec) {
	j.Pos = d.pos(k)
	var cacheNode ast.Node
	defer func() {
		if cacheNode != nil && j.StateBackend != "pebble" {
			d.errf(cacheNode, "job.stateCache: only with stateBackend: pebble (the memory backend has no cache); remove it or set stateBackend: pebble")
		}
	}()
	d.object(n, "job",
		field{name: "parallelism", accepts: "an integer from 1 to 32768", def: "1", doc: "subtasks per operator (`--parallelism` overrides)",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 32768, &j.Parallelism) }},
		field{name: "maxParallelism", accepts: "an integer from 1 to 32768", def: "Flink's default (>= 128)", doc: "key groups: the largest parallelism a savepoint can be restored at",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 32768, &j.MaxParallelism) }},
		field{name: "autoWatermarkInterval", accepts: "a duration > 0", def: "200ms", doc: "how often sources emit watermarks (`emit: periodic`)",
			fn: func(at string, _, v ast.Node) {
				d.duration(v, at, true, &j.AutoWatermarkInterval)
			}},
		field{name: "checkpoint", accepts: "`{interval, dir, mode}`", def: "none", doc: "checkpoints", fn: func(at string, _, v ast.Node) {
			d.object(v, at,
				field{name: "interval", accepts: "a duration > 0", def: "none", doc: "time between checkpoints",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &j.CheckpointInterval) }},
				field{name: "dir", required: true, accepts: "a directory or storage URL", doc: "where checkpoints go (passed to the runtime as given); a restart resumes from the newest one",
					fn: func(at string, _, v ast.Node) {
						j.CheckpointDirPos = d.pos(v)
						d.nonEmpty(v, at, "a directory (or storage URL) such as /tmp/weir-checkpoints", &j.CheckpointDir)
					}},
				field{name: "mode", accepts: "`exactly-once`, `at-least-once`", def: "`exactly-once`", doc: "`at-least-once` aligns no barriers",
					fn: func(at string, _, v ast.Node) {
						d.oneOf(v, at, &j.CheckpointMode, "exactly-once", "at-least-once")
					}},
			)
		}},
		field{name: "stateBackend", accepts: "`memory`, `pebble`", def: "`memory`", doc: "`pebble` keeps keyed state on disk, with incremental checkpoints",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &j.StateBackend, "memory", "pebble") }},
		field{name: "stateDir", accepts: "a directory", def: "a temporary directory", doc: "parent of Pebble's working directories",
			fn: func(at string, _, v ast.Node) {
				j.StateDirPos = d.pos(v)
				d.nonEmpty(v, at, "a directory", &j.StateDir)
			}},
		field{name: "stateCache", accepts: "`off`, bytes, or a size such as 16MiB", def: "`4MiB`", doc: "with `stateBackend: pebble`: bound of each subtask's write-back cache in front of Pebble (`16MiB`, `512KiB`, bytes as an integer, or `off`; state-and-timers.md)",
			fn: func(at string, _, v ast.Node) { cacheNode = v; d.stateCache(v, &j.StateCacheBytes) }},
		field{name: "restoreFrom", accepts: "a directory", def: "none", doc: "a savepoint or checkpoint, or the directory holding `chk-N` (its newest complete one), to start from (`--restore` overrides)",
			fn: func(at string, _, v ast.Node) {
				j.RestoreFromPos = d.pos(v)
				d.nonEmpty(v, at, "a savepoint or checkpoint directory, or the directory holding chk-N", &j.RestoreFrom)
			}},
		field{name: "restart", accepts: "a mapping", def: "none", doc: "restarts in the process after a step fails (`--restart` overrides)",
			fn: func(at string, k, v ast.Node) { j.Restart = d.restart(k, v) }},
		field{name: "tracing", accepts: "a mapping", def: "none", doc: "export the agent steps' OpenTelemetry traces (docs/tracing.md)",
			fn: func(at string, k, v ast.Node) { j.Tracing = d.tracing(k, v) }},
		field{name: "approvals", accepts: "`{httpAddr}`", def: "none", doc: "the HTTP endpoint taking answers to agent approvals; needs an agent step with `approvals`",
			fn: func(at string, _, v ast.Node) { d.jobApprovals(v, j) }},
		field{name: "allowNonRestoredState", accepts: "true or false", def: "`false`", doc: "restore a snapshot holding state of an operator (by name or uid) the pipeline no longer has, dropping that state; otherwise that is refused (`--allow-non-restored-state`)",
			fn: func(at string, _, v ast.Node) {
				d.boolean(v, at, &j.AllowNonRestoredState)
			}},
		field{name: "metricsAddr", accepts: "host:port such as 127.0.0.1:9464", def: "none", doc: "serve Prometheus metrics at `/metrics`, and `/healthz`, `/readyz` (`--metrics-addr` overrides)",
			fn: func(at string, _, v ast.Node) {
				if d.nonEmpty(v, at, "host:port such as 127.0.0.1:9464", &j.MetricsAddr) && !hostPort(j.MetricsAddr) {
					d.errf(v, "%s: %q: want host:port, such as 127.0.0.1:9464", at, j.MetricsAddr)
				}
			}},
		field{name: "healthAddr", accepts: "host:port such as 127.0.0.1:8086", def: "none", doc: "serve `/healthz` and `/readyz` on an address of their own (`--health-addr` overrides; deploy.md, \"Health and readiness\")",
			fn: func(at string, _, v ast.Node) {
				if d.nonEmpty(v, at, "host:port such as 127.0.0.1:8086", &j.HealthAddr) && !hostPort(j.HealthAddr) {
					d.errf(v, "%s: %q: want host:port, such as 127.0.0.1:8086", at, j.HealthAddr)
				}
			}},
	)
}

// RestartStrategies are the values of job.restart.strategy.
var RestartStrategies = []string{"none", "fixed-delay", "exponential-backoff"}

// restart reads job.restart.
func (d *dec) restart(k, n ast.Node) *RestartSpec {
	r := &RestartSpec{Pos: d.pos(k)}
	backoffOnly := map[string]ast.Node{}
	var others []ast.Node
	d.object(n, "job.restart",
		field{name: "strategy", required: true, accepts: "`none`, `fixed-delay`, `exponential-backoff`", doc: "after a step fails, start the job again in the process from its newest checkpoint (`--restart` overrides)",
			fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &r.Strategy, RestartStrategies...) }},
		field{name: "attempts", accepts: "an integer from 1 to 1000000", def: "3", doc: "restarts allowed (in a row, for back-off) before a failure ends the job (`--restart-attempts`)",
			fn: func(at string, _, v ast.Node) {
				others = append(others, v)
				d.intField(v, at, 1, 1000000, &r.Attempts)
			}},
		field{name: "delay", accepts: "a duration > 0", def: "1s", doc: "the pause before each restart (`fixed-delay`), before the first (`exponential-backoff`) (`--restart-delay`)",
			fn: func(at string, _, v ast.Node) {
				others = append(others, v)
				d.duration(v, at, true, &r.Delay)
			}},
		field{name: "maxDelay", accepts: "a duration > 0", def: "1m", doc: "`exponential-backoff` only: the longest pause (`--restart-max-delay`)",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["maxDelay"] = v
				d.duration(v, at, true, &r.MaxDelay)
			}},
		field{name: "multiplier", accepts: "a number from 1 to 100", def: "2", doc: "`exponential-backoff` only: the pause grows by this factor after each restart",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["multiplier"] = v
				s, ok := scalarText(v)
				f, err := strconv.ParseFloat(s, 64)
				if _, isStr := v.(*ast.StringNode); !ok || isStr || err != nil {
					d.errf(v, "%s: got %s, want a number from 1 to 100, such as 2 or 1.5", at, describe(v))
					return
				}
				if f < 1 || f > 100 {
					d.errf(v, "%s: %s: want a number from 1 to 100, such as 2 or 1.5", at, s)
					return
				}
				r.Multiplier = f
			}},
		field{name: "resetAfter", accepts: "a duration > 0, or `never`", def: "1h", doc: "`exponential-backoff` only: a run that lasted this long counts as the first failure again",
			fn: func(at string, _, v ast.Node) {
				backoffOnly["resetAfter"] = v
				if s, ok := v.(*ast.StringNode); ok && s.Value == "never" {
					r.ResetAfter = -1
					return
				}
				d.duration(v, at, true, &r.ResetAfter)
			}},
	)
	switch r.Strategy {
	case "none":
		for _, v := range append(others, mapValues(backoffOnly)...) {
			d.errf(v, "job.restart: strategy none restarts nothing; remove this key or choose fixed-delay or exponential-backoff")
		}
	case "fixed-delay":
		for _, name := range sortedKeys(backoffOnly) {
			d.errf(backoffOnly[name], "job.restart.%s: only with strategy exponential-backoff (fixed-delay takes attempts and delay)", name)
		}
	}
	delay := r.Delay
	if delay == 0 {
		delay = time.Second // runtime.RestartStrategy's default
	}
	if r.Strategy == "exponential-backoff" && r.MaxDelay > 0 && r.MaxDelay < delay {
		d.errAt(r.Pos, "job.restart: maxDelay %v is shorter than delay %v; want maxDelay >= delay", r.MaxDelay, delay)
	}
	return r
}

func mapValues(m map[string]ast.Node) []ast.Node {
	var out []ast.Node
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// stateCache reads job.stateCache: off, or a size in bytes (an integer, or a
// string with KiB, MiB or GiB). 0 keeps the default.
func (d *dec) stateCache(n ast.Node, dst *int64) {
	const want = "want off, a number of bytes, or a size such as 16MiB (KiB, MiB, GiB)"
	var s string
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		if !d.str(n, "job.stateCache", &s) { // expands ${VAR}
			return
		}
	default:
		t, ok := scalarText(n) // a YAML integer such as 1048576
		if !ok {
			d.errf(n, "job.stateCache: got %s; %s", describe(n), want)
			return
		}
		s = t
	}
	if s == "off" {
		*dst = state.NoCache
		return
	}
	v, err := bytesize.Parse(s)
	if err != nil {
		d.errf(n, "job.stateCache: %q: %s", s, want)
		return
	}
	*dst = v
}

func hostPort(s string) bool {
	i := strings.LastIndex(s, ":")
	return i >= 0 && i < len(s)-1
}
