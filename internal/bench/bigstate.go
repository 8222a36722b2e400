package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
)

// StateSizeConfig is a keyed job whose state is larger than the memory it
// is allowed: Keys distinct keys, each holding a ValueBytes string in
// ValueState, under a Go memory limit of MemoryLimit bytes.
type StateSizeConfig struct {
	Keys       int
	ValueBytes int
	// Backend is "memory" or "pebble".
	Backend string
	// MemoryLimit is set with debug.SetMemoryLimit for the run (0: none).
	MemoryLimit int64
	// Dir holds the Pebble working directory ("" : a new one under
	// os.TempDir, removed at the end).
	Dir string
	// CacheBytes is the Pebble backend's write-back cache bound
	// (state.Options.CacheBytes: 0 the default, state.NoCache off).
	CacheBytes int64
}

// StateSizeResult is what StateSize measured.
type StateSizeResult struct {
	Backend    string `json:"backend"`
	CacheBytes int64  `json:"cacheBytes"`
	Keys       int    `json:"keys"`
	ValueBytes int    `json:"valueBytes"`
	// StateBytes is the state's logical size: keys and values.
	StateBytes int64 `json:"stateBytes"`
	// MemoryLimitBytes is the Go memory limit of the run (0: none).
	MemoryLimitBytes int64 `json:"memoryLimitBytes"`
	// Records is 2 x Keys: every key is written once, then read and
	// written again once every key exists (a read of state that is not
	// in memory under the Pebble backend).
	Records          int64   `json:"records"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSec    float64 `json:"recordsPerSec"`
	CPUNsPerRecord   float64 `json:"cpuNsPerRecord"`
	PeakGoMemBytes   int64   `json:"peakGoMemBytes"`
	PeakRSSBytes     int64   `json:"peakRssBytes"`
	StateOverPeakRSS float64 `json:"stateOverPeakRss"`
	// Found counts second-pass reads that found the key's own value:
	// Keys when no state was lost.
	Found int64 `json:"found"`
}

// sizeFn writes a value of its own to each key (a window of random bytes
// chosen by the key, so that compression does not shrink the state), and
// on a key's second record checks that the value it wrote is there.
type sizeFn struct {
	v     *state.ValueState[string, string]
	bytes int
	found *atomic.Int64
}

// randomBytes is the source of the values: 4 MiB of pseudo-random bytes.
var randomBytes = func() string {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 4<<20)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return string(b)
}()

// valueOf is key k's value: n bytes of randomBytes from an offset derived
// from the key (a substring: no copy).
func valueOf(k string, n int) string {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint64(k[i])) * 1099511628211
	}
	off := int(h % uint64(len(randomBytes)-n+1))
	return randomBytes[off : off+n]
}

func (f *sizeFn) Open(ctx *weir.KeyedContext[string, int64]) error {
	var err error
	f.v, err = state.Value[string, string](ctx.State(), "value")
	return err
}

func (f *sizeFn) ProcessElement(k string, _ *weir.KeyedContext[string, int64]) error {
	want := valueOf(k, f.bytes)
	if old, ok := f.v.Value(); ok && old == want {
		f.found.Add(1)
	}
	// A copy of its own, as a value decoded from a record would be: the
	// memory backend then holds the whole state on the heap.
	f.v.Update(strings.Clone(want))
	return nil
}

func (f *sizeFn) OnTimer(int64, *weir.KeyedContext[string, int64]) error { return nil }

// StateSize runs the job of cfg at parallelism 1 and reports its
// throughput and peak memory: the Go runtime's (samplePeak, every 10 ms)
// and the process's peak resident set (getrusage; meaningful when the
// process runs nothing else, as `weir bench state-size` does).
func StateSize(cfg StateSizeConfig) (StateSizeResult, error) {
	if cfg.Keys < 1 || cfg.ValueBytes < 0 || cfg.ValueBytes > len(randomBytes) {
		return StateSizeResult{}, fmt.Errorf("bench: state size: %d keys of %d bytes; want at least 1 key and 0 to %d bytes", cfg.Keys, cfg.ValueBytes, len(randomBytes))
	}
	r := StateSizeResult{Backend: cfg.Backend, CacheBytes: cfg.CacheBytes, Keys: cfg.Keys, ValueBytes: cfg.ValueBytes,
		MemoryLimitBytes: cfg.MemoryLimit, Records: 2 * int64(cfg.Keys)}
	dir := cfg.Dir
	if cfg.Backend == state.BackendPebble && dir == "" {
		d, err := os.MkdirTemp("", "weir-state-size-")
		if err != nil {
			return r, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	keyName := func(i int64) string { return fmt.Sprintf("key-%09d", i) }
	r.StateBytes = int64(cfg.Keys) * int64(len(keyName(0))+cfg.ValueBytes)
	if cfg.MemoryLimit > 0 {
		old := debug.SetMemoryLimit(cfg.MemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: discard,
		StateBackend: runtime.StateBackendConfig{Kind: cfg.Backend, Dir: dir, CacheBytes: cfg.CacheBytes}})
	keys := int64(cfg.Keys)
	src := weir.Generate(env, "keys", r.Records, func(i int64) weir.Record[string] {
		return weir.Record[string]{Value: keyName(i % keys), Timestamp: i}
	}, monotone[string]())
	var found atomic.Int64
	weir.Process(weir.KeyBy(src, func(k string) string { return k }), "state",
		func() weir.KeyedProcessFunction[string, string, int64] {
			return &sizeFn{bytes: cfg.ValueBytes, found: &found}
		})

	goruntime.GC()
	peak := samplePeak()
	c0 := cpuNanos()
	start := time.Now()
	err := env.Execute(context.Background())
	elapsed := time.Since(start)
	cpu := cpuNanos() - c0
	r.PeakGoMemBytes = int64(peak())
	if err != nil {
		return r, err
	}
	r.Seconds = elapsed.Seconds()
	r.RecordsPerSec = float64(r.Records) / elapsed.Seconds()
	r.CPUNsPerRecord = float64(cpu) / float64(r.Records)
	r.Found = found.Load()
	r.PeakRSSBytes = maxRSS()
	if r.PeakRSSBytes > 0 {
		r.StateOverPeakRSS = float64(r.StateBytes) / float64(r.PeakRSSBytes)
	}
	if r.Found != keys {
		return r, fmt.Errorf("bench: state size: %d of %d keys found their value on their second record: state was lost", r.Found, keys)
	}
	return r, nil
}
