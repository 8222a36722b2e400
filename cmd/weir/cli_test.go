package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadCommandLines: every bad flag value or argument is rejected with
// exit status 2 and one line on stderr naming the flag (or argument), before
// any work: nothing on stdout, no data directory created.
func TestBadCommandLines(t *testing.T) {
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	literalSecret := filepath.Join(tmp, "kafka.yaml")
	if err := os.WriteFile(literalSecret, []byte("tls: true\nsasl: {mechanism: PLAIN, username: u, password: Hidden-pw-2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := func(args ...string) []string { return append([]string{"demo", "--kafka-data", data}, args...) }
	broker := func(args ...string) []string {
		return append([]string{"broker", "--data", data, "--addr", "127.0.0.1:0"}, args...)
	}
	cases := []struct {
		args []string
		want string // the start of the single stderr line
	}{
		{demo("--items", "-1"), "weir demo: --items -1: want an integer >= 1"},
		{demo("--items", "0"), "weir demo: --items 0: want an integer >= 1"},
		{demo("--parallelism", "-2"), "weir demo: --parallelism -2: want an integer from 1 to 128"},
		{demo("--parallelism", "200"), "weir demo: --parallelism 200: want an integer from 1 to 128"},
		{demo("--days", "-1"), "weir demo: --days -1"},
		{demo("--orders", "-10"), "weir demo: --orders -10"},
		{demo("--customers", "0"), "weir demo: --customers 0"},
		{demo("--rate", "0"), "weir demo: --rate 0"},
		{demo("--live", "-1s"), "weir demo: --live -1s: want a duration >= 0"},
		{demo("--malformed", "-2"), "weir demo: --malformed -2"},
		{demo("--held-back", "-2"), "weir demo: --held-back -2"},
		{demo("--state-backend", "rocksdb"), `weir demo: --state-backend "rocksdb": want one of memory, pebble`},
		{demo("--savepoint-after", "1s"), "weir demo: --savepoint-after 1s: needs --savepoint-dir"},
		{demo("--savepoint-after", "-1s", "--savepoint-dir", filepath.Join(tmp, "sp")), "weir demo: --savepoint-after -1s"},
		{demo("--resume"), "weir demo: --resume: needs --checkpoint-dir"},
		{demo("--restore", filepath.Join(tmp, "none")), "weir demo: --restore"},
		{demo("--checkpoint-dir", "/proc/x"), `weir demo: --checkpoint-dir "/proc/x"`},
		{demo("--checkpoint-dir", file), "weir demo: --checkpoint-dir"},
		{demo("--checkpoint-dir", "ftp://host/chk"), `weir demo: --checkpoint-dir "ftp://host/chk": has scheme "ftp"; accepted schemes are file, s3, gs and azblob`},
		{demo("--restore", "s3:///no-bucket"), `weir demo: --restore "s3:///no-bucket": names no bucket`},
		{demo("--savepoint-after", "1s", "--savepoint-dir", "http://x/sp"), `weir demo: --savepoint-dir "http://x/sp": has scheme "http"`},
		{[]string{"savepoint", "inspect", "ftp://host/sp"}, `weir savepoint inspect: location "ftp://host/sp" has scheme "ftp"; accepted schemes are file, s3, gs and azblob`},
		{demo("--metrics-addr", "nohostport"), "weir demo: --metrics-addr"},
		{[]string{"run", "--approvals-addr", "nohostport", "p.yaml"}, `weir run: --approvals-addr "nohostport": want host:port`},
		{[]string{"run", "--approvals-addr", "x:y", "p.yaml"}, `weir run: --approvals-addr "x:y": port "y": want a number from 0 to 65535`},
		{[]string{"run", "--log-level", "loud", "p.yaml"}, `weir run: --log-level "loud": want none, debug, info, warn or error`},
		{[]string{"run", "--group", "g", "--log-level", "", "p.yaml"}, `weir run: --log-level "": want none, debug, info, warn or error`},
		{[]string{"agent", "replay", "--input-topic", "orders", "--pipeline", "p.yaml"}, `weir agent replay: --input-topic "orders": give --brokers`},
		{demo("--ui-addr", "8081"), `weir demo: --ui-addr "8081": want host:port`},
		{demo("--ui-addr", "127.0.0.1:99999"), `weir demo: --ui-addr "127.0.0.1:99999": want host:port`},
		{demo("extra"), `weir demo: unexpected argument "extra"`},
		{demo("--items", "abc"), "weir demo: invalid argument \"abc\" for \"--items\""},
		{demo("--no-such-flag"), "weir demo: unknown flag: --no-such-flag"},
		{[]string{"bench", "--records", "-5"}, "weir bench: --records -5: want an integer >= 1"},
		{[]string{"sim", "--seeds", "0"}, "weir sim: --seeds 0: want an integer >= 1"},
		{[]string{"sim", "--workers", "0"}, "weir sim: --workers 0: want an integer from 1 to 4096"},
		{[]string{"sim", "--seed", "-1"}, "weir sim: invalid argument \"-1\" for \"--seed\" flag"},
		{[]string{"sim", "extra"}, "weir sim: unexpected argument \"extra\""},
		{[]string{"sim", "--duration", "-1s"}, "weir sim: --duration -1s: want a duration >= 0"},
		{[]string{"sim", "--random", "--seed", "4"}, "weir sim: --random and --seed: give one of them"},
		{[]string{"bench", "--records", "0"}, "weir bench: --records 0"},
		{[]string{"bench", "--keys", "0"}, "weir bench: --keys 0"},
		{[]string{"bench", "--scenarios", "window-sum,window-summ"}, `weir bench: --scenarios "window-summ": want one of chain, keyed-count,`},
		{[]string{"bench", "x"}, "weir bench: unexpected argument"},
		{[]string{"bench", "state-size", "--keys", "0"}, "weir bench state-size: --keys 0"},
		{[]string{"bench", "state-size", "--backend", "rocksdb"}, `weir bench state-size: --backend "rocksdb"`},
		{[]string{"bench", "state-size", "--memory-limit", "lots"}, `weir bench state-size: --memory-limit "lots": want a non-negative number of bytes`},
		{[]string{"bench", "state-size", "--value-bytes", "-1"}, "weir bench state-size: --value-bytes -1"},
		{[]string{"bench", "state-size", "--cache", "lots"}, `weir bench state-size: --cache "lots"`},
		{[]string{"bench", "checkpoint", "--keys", "-1"}, "weir bench checkpoint: --keys -1"},
		{[]string{"bench", "checkpoint", "--parallelism", "0"}, "weir bench checkpoint: --parallelism 0"},
		{[]string{"bench", "checkpoint", "--backend", "rocksdb"}, `weir bench checkpoint: --backend "rocksdb"`},
		{[]string{"bench", "nexmark", "--query", "q9"}, `weir bench nexmark: --query "q9": want one of q0, q1, q2, q3, q4, q5, q6, q7, q8, q11, all`},
		{[]string{"bench", "nexmark", "--events", "0"}, "weir bench nexmark: --events 0: want an integer >= 1"},
		{[]string{"bench", "nexmark", "--from", "file"}, `weir bench nexmark: --from "file": want one of generator, kafka`},
		{[]string{"bench", "nexmark", "--parallelism", "0"}, "weir bench nexmark: --parallelism 0"},
		{[]string{"bench", "nexmark", "--rate", "-1"}, "weir bench nexmark: --rate -1: want an integer >= 1"},
		{[]string{"bench", "nexmark", "x"}, "weir bench nexmark: unexpected argument"},
		{broker("--topic", ":3"), `weir broker: --topic ":3": want name or name:partitions`},
		{broker("--topic", "t:0"), `weir broker: --topic "t:0"`},
		{broker("--topic", "a b"), `weir broker: --topic "a b"`},
		{broker("--topic", "t:x"), `weir broker: --topic "t:x"`},
		{broker("--topic", "t:"), `weir broker: --topic "t:"`},
		{broker("--brokers", "0"), "weir broker: --brokers 0"},
		{broker("--partitions", "-1"), "weir broker: --partitions -1"},
		{broker("--config", "novalue"), `weir broker: --config "novalue"`},
		{broker("--config", "=v"), `weir broker: --config "=v"`},
		{broker("--log-level", "loud"), `weir broker: --log-level "loud"`},
		{broker("--addr", "9092"), `weir broker: --addr "9092"`},
		{broker("x"), "weir broker: unexpected argument"},
		{broker("--schema-registry", "8081"), `weir broker: --schema-registry "8081": want host:port, such as 127.0.0.1:8081, or off`},
		{broker("--schema-registry", ""), `weir broker: --schema-registry "": want host:port`},
		{[]string{"keys"}, "weir keys: no keys"},
		{[]string{"keys", "--parallelism", "0", "k"}, "weir keys: --parallelism 0"},
		{[]string{"keys", "--max-parallelism", "40000", "k"}, "weir keys: --max-parallelism 40000"},
		{[]string{"keys", "--max-parallelism", "4", "--parallelism", "8", "k"}, "weir keys: --parallelism 8: want at most --max-parallelism 4"},
		{[]string{"keys", "--type", "float", "k"}, `weir keys: --type "float"`},
		{[]string{"savepoint", "inspect"}, "weir savepoint inspect: got 0 arguments"},
		{[]string{"savepoint", "inspect", "a", "b"}, "weir savepoint inspect: got 2 arguments"},
		{[]string{"experiment", "ordering", "--topics", "0"}, "weir experiment ordering: --topics 0"},
		{[]string{"experiment", "ordering", "--partitions", "-1"}, "weir experiment ordering: --partitions -1"},
		{[]string{"experiment", "ordering", "--items", "0"}, "weir experiment ordering: --items 0"},
		{[]string{"experiment", "ordering", "--history-records", "-1"}, "weir experiment ordering: --history-records -1"},
		{[]string{"experiment", "ordering", "--history-span", "0s"}, "weir experiment ordering: --history-span 0s"},
		{[]string{"experiment", "ordering", "--stagger", "-1s"}, "weir experiment ordering: --stagger -1s"},
		{[]string{"experiment", "ordering", "--timeout", "0s"}, "weir experiment ordering: --timeout 0s"},
		{[]string{"experiment", "ordering", "--timeouts", "2s,0s"}, "weir experiment ordering: --timeouts 0s"},
		{[]string{"experiment", "ordering", "--tick", "0s"}, "weir experiment ordering: --tick 0s"},
		{[]string{"experiment", "ordering", "--live-rate", "0"}, "weir experiment ordering: --live-rate 0"},
		{[]string{"experiment", "ordering", "--parallelism", "0"}, "weir experiment ordering: --parallelism 0"},
		{[]string{"experiment", "ordering", "--policy", "fifo"}, `weir experiment ordering: --policy "fifo"`},
		{[]string{"experiment", "ordering", "x"}, "weir experiment ordering: unexpected argument"},
		{[]string{"experiment", "agent", "--inputs", "0"}, "weir experiment agent: --inputs 0"},
		{[]string{"experiment", "agent", "--keys", "-1"}, "weir experiment agent: --keys -1"},
		{[]string{"experiment", "agent", "--limit", "0"}, "weir experiment agent: --limit 0"},
		{[]string{"experiment", "agent", "--parallelism", "0"}, "weir experiment agent: --parallelism 0"},
		{[]string{"experiment", "agent", "--latency-dist", "pareto"}, `weir experiment agent: --latency-dist "pareto"`},
		{[]string{"experiment", "agent", "--latency-mean", "-1ms"}, "weir experiment agent: --latency-mean -1ms"},
		{[]string{"experiment", "agent", "--watermark-interval", "0s"}, "weir experiment agent: --watermark-interval 0s"},
		{[]string{"experiment", "agent", "x"}, "weir experiment agent: unexpected argument"},
		{[]string{"experiment", "agent", "--stores", "redis"}, `weir experiment agent: --stores "redis"`},
		{[]string{"experiment", "agent", "--model", "grpc"}, `weir experiment agent: --model "grpc"`},
		{[]string{"experiment", "agent", "--latency-sigma", "-1"}, "weir experiment agent: --latency-sigma -1"},
		{[]string{"experiment", "agent", "--rate-limit-rate", "1.5"}, "weir experiment agent: --rate-limit-rate 1.5"},
		{[]string{"experiment", "agent", "--error-rate", "-0.1"}, "weir experiment agent: --error-rate -0.1"},
		{[]string{"experiment", "agent", "--error-rate", "0.6", "--rate-limit-rate", "0.6"}, "weir experiment agent: --rate-limit-rate 0.6 with --error-rate 0.6"},
		{[]string{"experiment", "agent", "--stream"}, "weir experiment agent: --stream with --model \"offline\": streaming applies to --model http only"},
		{[]string{"experiment", "agent", "--retry-after", "0s"}, "weir experiment agent: --retry-after 0s"},
		{[]string{"experiment", "agent", "--retry-initial", "0s"}, "weir experiment agent: --retry-initial 0s"},
		{[]string{"experiment", "agent", "--tree-depth", "-1"}, "weir experiment agent: --tree-depth -1"},
		{[]string{"experiment", "agent", "--tree-fanout", "0"}, "weir experiment agent: --tree-fanout 0"},
		{[]string{"experiment", "agent", "--tree-depth", "20", "--tree-fanout", "2"}, "weir experiment agent: --tree-depth 20 with --tree-fanout 2"},
		{[]string{"experiment", "scaleout", "--processes", "1"}, "weir experiment scaleout: --processes 1"},
		{[]string{"experiment", "scaleout", "--records", "0"}, "weir experiment scaleout: --records 0"},
		{[]string{"experiment", "scaleout", "--kill-after", "1.5"}, "weir experiment scaleout: --kill-after 1.5"},
		{[]string{"experiment", "scaleout", "--throughput", "0"}, "weir experiment scaleout: --throughput 0"},
		{[]string{"experiment", "scaleout", "--pace", "-1"}, "weir experiment scaleout: --pace -1"},
		{[]string{"experiment", "scaleout", "--throughput-only", "--ordering-only"}, "weir experiment scaleout: --throughput-only: needs process counts"},
		{[]string{"experiment", "scaleout", "x"}, "weir experiment scaleout: unexpected argument"},
		{[]string{"experiment", "scaleout", "--agent", "redis"}, `weir experiment scaleout: --agent "redis"`},
		{[]string{"experiment", "scaleout", "--agent-inputs", "0"}, "weir experiment scaleout: --agent-inputs 0"},
		{[]string{"experiment", "scaleout", "--agent-pace", "0"}, "weir experiment scaleout: --agent-pace 0"},
		{[]string{"experiment", "scaleout", "--call-delay", "0s"}, "weir experiment scaleout: --call-delay 0s"},
		{[]string{"experiment", "scaleout", "--restart-member", "--restart-signal", "HUP"}, `weir experiment scaleout: --restart-signal "HUP": want one of TERM, KILL`},
		{[]string{"experiment", "scaleout", "--restart-only", "--restart-session-timeout", "0s"}, "weir experiment scaleout: --restart-session-timeout 0s"},
		{[]string{"experiment", "scaleout", "--restart-delay", "1s"}, "weir experiment scaleout: --restart-delay: needs --restart-member or --restart-only"},
		{[]string{"experiment", "durability", "--trials", "0"}, "weir experiment durability: --trials 0"},
		{[]string{"experiment", "durability", "--inputs", "-1"}, "weir experiment durability: --inputs -1"},
		{[]string{"experiment", "durability", "--parallelism", "200"}, "weir experiment durability: --parallelism 200"},
		{[]string{"experiment", "durability", "--max-kills", "0"}, "weir experiment durability: --max-kills 0"},
		{[]string{"experiment", "durability", "--seed", "0"}, "weir experiment durability: --seed 0"},
		{[]string{"experiment", "durability", "--stores", "redis"}, `weir experiment durability: --stores "redis"`},
		{[]string{"experiment", "durability", "x"}, "weir experiment durability: unexpected argument"},
		{[]string{"agent", "log"}, "weir agent log: give --file FILE or --topic TOPIC"},
		{[]string{"agent", "log", "--file", file, "--topic", "t"}, "weir agent log: --file and --topic: give one of them"},
		{[]string{"agent", "log", "--topic", "t"}, `weir agent log: --topic "t": give --brokers`},
		{[]string{"agent", "log", "--topic", "t", "--brokers", "9092"}, `weir agent log: --brokers "9092": want host:port`},
		{[]string{"agent", "log", "--file", filepath.Join(tmp, "none")}, `weir agent log: --file "`},
		{[]string{"agent", "log", "--file", file, "x"}, "weir agent log: unexpected argument"},
		{[]string{"agent", "log", "--topic", "t", "--brokers", "h:9092", "--kafka-config", literalSecret},
			"weir agent log: --kafka-config: " + literalSecret + ":2:49: kafka.sasl.password: a literal secret is refused"},
		{[]string{"agent", "log", "--topic", "t", "--brokers", "h:9092", "--kafka-config", filepath.Join(tmp, "none.yaml")}, "weir agent log: --kafka-config: pipeline: open "},
		{broker("--sasl-user", "SCRAM-SHA-1:u:Hidden-pw-1"), `weir broker: --sasl-user: want MECHANISM:USER:PASSWORD with MECHANISM one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (got one for "u")`},
		{broker("--sasl-users", filepath.Join(tmp, "none")), "weir broker: --sasl-users: open "},
		{broker("--tls-cert", "c.pem"), "weir broker: --tls-cert and --tls-key go together"},
		{broker("--tls-client-ca", "ca.pem", "--tls-self-signed", "ca.pem"), "weir broker: --tls-client-ca needs --tls-cert"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			if code != 2 {
				t.Errorf("exit status %d, want 2 (stderr %q)", code, errb.String())
			}
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
				t.Errorf("stderr %q, want one line starting %q", errb.String(), c.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q: work was done", out.String())
			}
			if strings.Contains(errb.String(), "Hidden-pw") {
				t.Errorf("stderr %q shows the password", errb.String())
			}
			if _, err := os.Stat(data); err == nil {
				t.Fatalf("%s was created: work was done", data)
			}
		})
	}
}

// A good command line still runs, with exit status 0 and nothing on stderr.
func TestGoodCommandLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"keys", "--max-parallelism", "128", "--parallelism", "4", "user_A"}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit status %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), `"key":"user_A"`) {
		t.Fatalf("stdout %q", out.String())
	}
}
