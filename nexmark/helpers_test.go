package nexmark

import (
	"iter"
	"sync/atomic"
)

type iterSeq = iter.Seq[Event]

type atomicInt = atomic.Int64
