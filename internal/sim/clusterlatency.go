package sim

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Latency spikes in the clustered form: up to two per seed, drawn from a
// stream of their own (rand.NewPCG(seed, 0xc1a7)) after the form's other
// faults, which keep their draws. A spike stalls the broker for 1-150ms
// on the At-th request of its kind of the run (over every member): a data
// path request (fetch, list-offsets, produce, transaction calls) or a
// group call (JoinGroup, SyncGroup, Heartbeat), as behind a broker's GC
// pause. The longest outlast the members' rebalance time-out (200ms) only
// with the requests queued behind them; the members must ride them out,
// S16 unchanged.
func generateClusterLatency(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0xc1a7))
	var fs []Fault
	for range rng.IntN(3) {
		var key kmsg.Key
		at := int64(1)
		if rng.IntN(2) == 0 {
			key = kafkaRequests[rng.IntN(len(kafkaRequests))].key
			at += rng.Int64N(20)
		} else {
			key = clusterGroupRequests[rng.IntN(len(clusterGroupRequests))].key
			at += rng.Int64N(8)
		}
		fs = append(fs, Fault{Kind: FaultLatency, Request: key.Name(), At: at, DelayMS: 1 + rng.Int64N(150)})
	}
	return fs
}

// armLatency adds a control to c that stalls the broker for f's delay on
// the At-th request of f's kind, until off is set.
func armLatency(c *kfake.Cluster, f *Fault, off *atomic.Bool) *armed {
	var key kmsg.Key
	for _, r := range kafkaRequests {
		if r.key.Name() == f.Request {
			key = r.key
		}
	}
	for _, r := range clusterGroupRequests {
		if r.key.Name() == f.Request {
			key = r.key
		}
	}
	a := &armed{f: f, key: key}
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		// Control functions run on the cluster's goroutine, one at a
		// time: count needs no lock.
		if !off.Load() && a.count(req) && !a.struck.Swap(true) {
			time.Sleep(time.Duration(f.DelayMS) * time.Millisecond)
		}
		return nil, nil, false
	})
	return a
}

// drawStatic draws whether the clustered form's members are static
// members (half the seeds), from a stream of its own (rand.NewPCG(seed,
// 0xc15a)). A killed static member keeps its tasks, which run nowhere,
// until the harness removes it from the group a session time-out later
// (expire, by member and instance id, as Kafka's coordinator does at the
// session's end); a member that joins takes a name of its own.
func drawStatic(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0xc15a)).IntN(2) == 0
}
