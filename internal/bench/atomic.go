package bench

import "sync/atomic"

func atomicAdd(p *int64, n int64) { atomic.AddInt64(p, n) }
