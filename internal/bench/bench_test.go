package bench

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir/state"
)

func TestScenariosAgreeWithLoops(t *testing.T) {
	if _, err := Chain(100_000); err != nil {
		t.Fatal(err)
	}
	for _, o := range KeyOrders {
		for _, periodic := range []bool{false, true} {
			if _, err := WindowSumOrder(100_000, 1000, o, periodic); err != nil {
				t.Fatal(o, periodic, err)
			}
		}
		if _, err := KeyedCountOrder(100_000, 1000, 1, o); err != nil {
			t.Fatal(o, err)
		}
	}
	for _, p := range []int{1, 2} {
		if _, err := KeyedCount(100_000, 1000, p); err != nil {
			t.Fatal(err)
		}
		for _, shape := range []Shape{ShapePeers, ShapeBare} {
			if _, err := KafkaKeyedCount(20_000, 1000, p, shape); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := KafkaKeyedCountTLS(20_000, 1000, 1); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"avro", "protobuf"} {
		if _, err := KafkaFormatKeyedCount(kind, 5_000, 100, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkKafkaKeyedCountTLS: the Kafka JSON keyed count over SASL_SSL
// (TLS + SCRAM-SHA-512) and over plaintext, side by side in one run, each
// broker in a child process; no timed assert (x-plaintext is plaintext's
// throughput over SASL_SSL's from the medians of each side, -paired the
// median of the rounds' ratios; *-cpu-ns/rec the client's CPU, this
// process's; *-broker-cpu-ns/rec the child broker's):
//
//	go test -run XXX -bench KafkaKeyedCountTLS -benchtime 1x ./internal/bench/
func BenchmarkKafkaKeyedCountTLS(b *testing.B) {
	for b.Loop() {
		r, err := KafkaKeyedCountTLS(1_000_000, 10_000, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.EnginePerSec, "sasl_ssl-records/s")
		b.ReportMetric(r.LoopPerSec, "plaintext-records/s")
		b.ReportMetric(r.Ratio, "x-plaintext")
		b.ReportMetric(r.PairedRatio, "x-plaintext-paired")
		b.ReportMetric(r.EngineCPUNsPerRecord, "sasl_ssl-cpu-ns/rec")
		b.ReportMetric(r.LoopCPUNsPerRecord, "plaintext-cpu-ns/rec")
		b.ReportMetric(r.EngineBrokerCPUNsPerRecord, "sasl_ssl-broker-cpu-ns/rec")
		b.ReportMetric(r.LoopBrokerCPUNsPerRecord, "plaintext-broker-cpu-ns/rec")
	}
}

// BenchmarkKafkaKeyedCount: 1M JSON events from the in-process broker,
// 10k keys, 4 partitions, against franz-go + the same decoder + a map, in
// one run, the sides alternating (Reps rounds, medians): shape=peers is
// what users send (a Kafka key on every record, a 3-field value), shape=bare
// the records of before (no key, 2 fields). x-loop is the loop's speed over
// the engine's (from each side's median), x-loop-paired the median of the
// rounds' time ratios:
//
//	go test -run XXX -bench KafkaKeyedCount/ -benchtime 1x ./internal/bench/
func BenchmarkKafkaKeyedCount(b *testing.B) {
	for _, shape := range []Shape{ShapePeers, ShapeBare} {
		for _, par := range []int{1, 2} {
			name := "peers"
			if shape == ShapeBare {
				name = "bare"
			}
			b.Run(fmt.Sprintf("shape=%s/parallelism=%d", name, par), func(b *testing.B) {
				for b.Loop() {
					r, err := KafkaKeyedCount(1_000_000, 10_000, par, shape)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(r.EnginePerSec, "records/s")
					b.ReportMetric(r.Ratio, "x-loop")
					b.ReportMetric(r.PairedRatio, "x-loop-paired")
					b.ReportMetric(r.EngineCPUNsPerRecord, "cpu-ns/rec")
					b.ReportMetric(r.LoopCPUNsPerRecord, "loop-cpu-ns/rec")
				}
			})
		}
	}
}

// benchVsLoop runs a scenario over b.N records (plus a thousand, so that
// even b.N = 1 makes windows) and reports the engine's rate and its ratio
// to the loop.
func benchVsLoop(b *testing.B, scenario func(n int64) (Result, error)) Result {
	r, err := scenario(int64(b.N) + 1000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.EnginePerSec, "records/s")
	b.ReportMetric(r.Ratio, "x-loop")
	return r
}

func BenchmarkChain(b *testing.B) {
	r := benchVsLoop(b, Chain)
	b.ReportMetric(r.OverheadNsPerRecordPerOp, "ns-overhead/rec/op")
}

// BenchmarkKeyedCount: the keyed count with value state, 10k string keys,
// in each key order (keys=uniform is the default workload; round-robin the
// shape before issue 31), against a loop over a map reading the same key
// sequence:
//
//	go test -run XXX -bench '^BenchmarkKeyedCount$' -benchtime 2000000x ./internal/bench/
func BenchmarkKeyedCount(b *testing.B) {
	for _, o := range KeyOrders {
		b.Run("keys="+o.String(), func(b *testing.B) {
			r := benchVsLoop(b, func(n int64) (Result, error) { return KeyedCountOrder(n, 10_000, 1, o) })
			b.ReportMetric(r.EngineCPUNsPerRecord, "cpu-ns/rec")
			b.ReportMetric(r.LoopCPUNsPerRecord, "loop-cpu-ns/rec")
		})
	}
}

func BenchmarkKeyBy2Subtasks(b *testing.B) {
	r := benchVsLoop(b, func(n int64) (Result, error) { return KeyedCount(n, 10_000, 2) })
	b.ReportMetric(r.EngineCPUNsPerRecord, "cpu-ns/rec")
	b.ReportMetric(r.LoopCPUNsPerRecord, "loop-cpu-ns/rec")
}

func TestCheckpointScenarioRuns(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		r, err := Checkpoint(20_000, 2, backend)
		if err != nil {
			t.Fatal(err)
		}
		if r.SizeBytes < r.StateBytes/2 || r.RestoreMoreMs <= 0 || r.DeltaBytes <= 0 {
			t.Fatalf("%+v", r)
		}
	}
}

// BenchmarkWindowSum10kKeys: the tumbling 1 s window sum, 10k keys, a
// watermark at every new timestamp, in each key order, against the
// hand-written loop reading the same key sequence:
//
//	go test -run XXX -bench '^BenchmarkWindowSum10kKeys' -benchtime 2000000x ./internal/bench/
func BenchmarkWindowSum10kKeys(b *testing.B) {
	for _, o := range KeyOrders {
		b.Run("keys="+o.String(), func(b *testing.B) {
			benchVsLoop(b, func(n int64) (Result, error) { return WindowSumOrder(n, 10_000, o, false) })
		})
	}
}

// BenchmarkWindowSum10kKeysPeriodic is BenchmarkWindowSum10kKeys with the
// default 200 ms periodic watermark.
func BenchmarkWindowSum10kKeysPeriodic(b *testing.B) {
	for _, o := range KeyOrders {
		b.Run("keys="+o.String(), func(b *testing.B) {
			benchVsLoop(b, func(n int64) (Result, error) { return WindowSumOrder(n, 10_000, o, true) })
		})
	}
}

// The key sequences are what their orders say: uniform covers the keys
// about evenly, Zipf puts its hottest key far above the mean and its ranks
// on scattered keys, round-robin cycles with the given stride, and every
// order draws the same sequence again.
func TestKeySequences(t *testing.T) {
	const n, keys = 200_000, 1000
	counts := func(seq []int32) []int {
		c := make([]int, keys)
		for _, k := range seq {
			if k < 0 || int(k) >= keys {
				t.Fatalf("key %d out of range", k)
			}
			c[k]++
		}
		return c
	}
	u := counts(KeySequence(KeysUniform, n, keys, 1))
	if lo, hi := slices.Min(u), slices.Max(u); lo < 120 || hi > 290 {
		t.Fatalf("uniform: per-key counts %d..%d, want about %d", lo, hi, n/keys)
	}
	zs := KeySequence(KeysZipf, n, keys, 1)
	z := counts(zs)
	hot := slices.Index(z, slices.Max(z))
	if z[hot] < 20*n/keys || hot == 0 {
		t.Fatalf("zipf: hottest key %d has %d records, want >= %d and not key 0", hot, z[hot], 20*n/keys)
	}
	r := KeySequence(KeysRoundRobin, 3*keys, keys, 7)
	for i, k := range r {
		if int(k) != i*7%keys {
			t.Fatalf("round-robin: record %d has key %d, want %d", i, k, i*7%keys)
		}
	}
	if !slices.Equal(zs, KeySequence(KeysZipf, n, keys, 1)) {
		t.Fatal("zipf: a second sequence differs from the first")
	}
}

func BenchmarkCheckpointCost(b *testing.B) {
	benchCheckpointCost(b, "", 6_000_000, 10_000)
}

// BenchmarkCheckpointCostLargeState is BenchmarkCheckpointCost with a
// million keys, so that every checkpoint has megabytes of state to
// serialize while the count keeps writing it (the copy-on-write path).
func BenchmarkCheckpointCostLargeState(b *testing.B) {
	benchCheckpointCost(b, "", 12_000_000, 1_000_000)
}

// BenchmarkCheckpointCostPebble is BenchmarkCheckpointCost with the keyed
// state in the Pebble backend (incremental native checkpoints).
func BenchmarkCheckpointCostPebble(b *testing.B) {
	benchCheckpointCost(b, state.BackendPebble, 3_000_000, 10_000)
}

// benchCheckpointCost runs CheckpointThroughputOn with at least minN
// records over keys keys and a checkpoint every second, and reports both
// rates and their ratio.
func benchCheckpointCost(b *testing.B, backend string, minN int64, keys int) {
	r, err := CheckpointThroughputOn(backend, max(int64(b.N), minN), keys, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.EnginePerSec, "records/s-with")
	b.ReportMetric(r.LoopPerSec, "records/s-without")
	b.ReportMetric(r.Ratio, "x-cost")
}

// Both backends keep every key's value over a state that the Pebble
// backend's memtable cannot hold whole (20k keys of 1 KiB = 20 MB against
// an 8 MiB memtable), and report what they measured.
func TestStateSizeKeepsEveryKey(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		r, err := StateSize(StateSizeConfig{Keys: 20_000, ValueBytes: 1024, Backend: backend, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if r.Found != 20_000 || r.Records != 40_000 || r.StateBytes < 20_000*1024 || r.PeakGoMemBytes <= 0 || r.RecordsPerSec <= 0 {
			t.Fatalf("%s: %+v", backend, r)
		}
	}
}

// BenchmarkKafkaFormatKeyedCount: peers-style records (three fields), 200k
// in Avro and 50k in Protobuf (dynamic messages cost 3x as much: the run
// stays under a minute), from the in-process broker, 10k keys, through the
// Kafka source into a keyed count, against franz-go + the same library and
// cached schema + a map, in one run (issue 26):
//
//	go test -run XXX -bench KafkaFormatKeyedCount -benchtime 1x ./internal/bench/
func BenchmarkKafkaFormatKeyedCount(b *testing.B) {
	for _, kind := range []string{"avro", "protobuf"} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				n := int64(200_000)
				if kind == "protobuf" {
					n = 50_000
				}
				r, err := KafkaFormatKeyedCount(kind, n, 10_000, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.EnginePerSec, "records/s")
				b.ReportMetric(r.Ratio, "x-loop")
				b.ReportMetric(r.EngineCPUNsPerRecord, "cpu-ns/rec")
				b.ReportMetric(r.LoopCPUNsPerRecord, "loop-cpu-ns/rec")
				b.ReportMetric(r.EngineCPUNsPerRecord/r.LoopCPUNsPerRecord, "cpu-x-loop")
			}
		})
	}
}

// BenchmarkKafkaKeyedCountSides runs one side of BenchmarkKafkaKeyedCount's
// shape=peers at a time (1M records, 10k keys, 4 partitions, produced
// once), so that a CPU profile holds one side only and allocs/rec can be
// compared between the engine and the loop without noise. settle=true
// collects garbage before every run as KafkaKeyedCount does (its CPU not
// counted), which also empties the pools a job leaves behind; settle=false
// lets the runs follow each other as one long job's batches would:
//
//	go test -run XXX -bench KafkaKeyedCountSides -benchtime 5x -cpuprofile /tmp/c.out ./internal/bench/
func BenchmarkKafkaKeyedCountSides(b *testing.B) {
	const n, nKeys = 1_000_000, 10_000
	for _, side := range []string{"engine-p1", "engine-p2", "loop"} {
		for _, settled := range []bool{false, true} {
			b.Run(fmt.Sprintf("side=%s/settle=%v", side, settled), func(b *testing.B) {
				b.StopTimer() // producing the records is neither side's time
				br, err := kafkaEvents(n, nKeys, ShapePeers)
				if err != nil {
					b.Fatal(err)
				}
				var m0, m1 goruntime.MemStats
				var cpu int64
				var mallocs uint64
				for range b.N {
					b.StopTimer()
					if settled {
						settle()
					}
					goruntime.ReadMemStats(&m0)
					c0 := cpuNanos()
					b.StartTimer()
					switch side {
					case "loop":
						if _, keys, err := kafkaKeyedCountLoop(br.Addrs(), n, func(e *PeerEvent) string { return e.Key }); err != nil || keys != nKeys {
							b.Fatalf("loop: %d keys, %v", keys, err)
						}
					default:
						var total int64
						par := 1
						if side == "engine-p2" {
							par = 2
						}
						if err := kafkaCountJob(br.Addrs(), par, ShapePeers, &total).Execute(context.Background()); err != nil || total != n {
							b.Fatalf("engine: %d outputs, %v", total, err)
						}
					}
					b.StopTimer()
					cpu += cpuNanos() - c0
					goruntime.ReadMemStats(&m1)
					mallocs += m1.Mallocs - m0.Mallocs
				}
				per := float64(n) * float64(b.N)
				b.ReportMetric(float64(cpu)/per, "cpu-ns/rec")
				b.ReportMetric(float64(mallocs)/per, "allocs/rec")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/rec")
			})
		}
	}
}
