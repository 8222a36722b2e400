package state

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirproject/weir/internal/cputime"
)

// BenchmarkPebbleValueGetUpdate is BenchmarkValueGetUpdate (set the current
// key, read its counter, write it back incremented, over 10k existing
// string keys) on each backend in one run: "memory"; "pebble-cache", the
// Pebble backend with its write-back cache (the default); "pebble-nocache",
// Options.CacheBytes = NoCache, every access a Pebble get or commit; and
// "pebble-indexed-batch", the alternative design the cache was measured
// against: the reads and writes go through a Pebble indexed batch
// (read-your-writes in Pebble's own skiplist), committed every 4 MiB.
// Besides ns/op it reports cpu-ns/op, the process's CPU time (user and
// system, Pebble's background work included) per operation, which a
// loaded machine disturbs less than wall time.
func BenchmarkPebbleValueGetUpdate(b *testing.B) {
	keys, kgs := benchKeySet()
	for _, mode := range []string{"memory", "pebble-cache", "pebble-nocache", "pebble-indexed-batch"} {
		b.Run(mode, func(b *testing.B) {
			o := Options{Kind: BackendPebble, Dir: b.TempDir()}
			switch mode {
			case "memory":
				o = Options{Kind: BackendMemory}
			case "pebble-nocache", "pebble-indexed-batch":
				o.CacheBytes = NoCache
			}
			be, err := Open[string](o, full().Range())
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			st := MustValue[string, int](be, "count")
			for i, k := range keys {
				be.SetCurrentKey(k, kgs[i])
				st.Update(0)
			}
			if mode == "pebble-indexed-batch" {
				benchIndexedBatch(b, be, st, keys, kgs)
				return
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				j := i % benchKeys
				be.SetCurrentKey(keys[j], kgs[j])
				v, _ := st.Value()
				st.Update(v + 1)
			}
		})
	}
}

// benchIndexedBatch is the get+update loop on a Pebble indexed batch.
func benchIndexedBatch(b *testing.B, be *Backend[string], st *ValueState[string, int], keys []string, kgs []int) {
	ps, pk := be.pebble(), statePrefix(st.name, st.kind)
	db := ps.db
	batch := db.NewIndexedBatch()
	var vbuf []byte
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		j := i % benchKeys
		be.SetCurrentKey(keys[j], kgs[j])
		k := be.pkey(ps, pk)
		v := 0
		raw, c, err := batch.Get(k)
		if err == nil {
			v = dec(st.vc, raw, st.name, "value")
			c.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			b.Fatal(err)
		}
		vbuf = enc(vbuf[:0], st.vc, v+1, st.name, "value")
		if err := batch.Set(k, vbuf, nil); err != nil {
			b.Fatal(err)
		}
		if batch.Len() > 4<<20 {
			if err := batch.Commit(noSync); err != nil {
				b.Fatal(err)
			}
			batch.Close()
			batch = db.NewIndexedBatch()
		}
	}
	if err := batch.Commit(noSync); err != nil {
		b.Fatal(err)
	}
	batch.Close()
}

// reportCPU returns a function that reports the process's CPU time per
// operation since reportCPU was called, as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuNow()
	return func() { b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuNow() int64 { return int64(cputime.Process()) }
