package agentbench

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
)

// sink checks outputs against watermarks, counts each action's outputs
// and timestamps the 10% and 90% marks.
type sink struct {
	runtime.Base[struct{}]
	st *sinkState
	wm int64
}

type sinkState struct {
	n, violations, watermarks atomic.Int64
	total                     int64 // set before the run
	mu                        sync.Mutex
	t10, t90, tEnd            time.Time
	// t0 and called are the action's (treeAction); lag[g] is the time
	// from action g's call returning to its output here (nanoseconds),
	// outputs[g] the number of its outputs (the sink has one subtask).
	t0      time.Time
	called  []atomic.Int64
	lag     []int64
	outputs []int32
	// malformed counts outputs without an action index.
	malformed int64
}

func (s *sink) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	s.wm = runtime.NoTimestamp
	return s.Base.Open(ctx, out)
}

func (s *sink) ProcessRecord(r runtime.Record[string]) error {
	if r.Timestamp <= s.wm {
		s.st.violations.Add(1)
	}
	g := int64(-1)
	if i := strings.IndexByte(r.Value, ' '); i > 0 {
		if v, err := strconv.ParseInt(r.Value[:i], 10, 64); err == nil && v >= 0 && v < int64(len(s.st.outputs)) {
			g = v
		}
	}
	if g < 0 {
		s.st.malformed++
	} else {
		s.st.outputs[g]++
		if c := s.st.called[g].Load(); c > 0 {
			s.st.lag[g] = int64(time.Since(s.st.t0)) - c
		}
	}
	n := s.st.n.Add(1)
	if n == s.st.total/10 || n == s.st.total*9/10 || n == s.st.total {
		now := time.Now()
		s.st.mu.Lock()
		switch n {
		case s.st.total / 10:
			s.st.t10 = now
		case s.st.total * 9 / 10:
			s.st.t90 = now
		}
		if n == s.st.total {
			s.st.tEnd = now
		}
		s.st.mu.Unlock()
	}
	return nil
}

func (s *sink) ProcessWatermark(ts int64) error {
	s.wm = ts
	s.st.watermarks.Add(1)
	return nil
}

// percentilesMs returns the 50th and 99th percentiles of ds (nanoseconds;
// zero entries not measured) in milliseconds.
func percentilesMs(ds []atomic.Int64) (p50, p99 float64) {
	v := make([]int64, 0, len(ds))
	for i := range ds {
		if d := ds[i].Load(); d > 0 {
			v = append(v, d)
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return float64(v[len(v)/2]) / 1e6, float64(v[len(v)*99/100]) / 1e6
}

// lagStats returns the mean and the 99th percentile of the lags measured
// (zero entries are inputs not measured), in microseconds.
func lagStats(lag []int64) (mean, p99 float64) {
	ls := make([]int64, 0, len(lag))
	var sum int64
	for _, l := range lag {
		if l > 0 {
			ls = append(ls, l)
			sum += l
		}
	}
	if len(ls) == 0 {
		return 0, 0
	}
	slices.Sort(ls)
	return float64(sum) / float64(len(ls)) / 1e3, float64(ls[len(ls)*99/100]) / 1e3
}

// meanLatency is the mean of the latency distribution, computed from its
// quantile function.
func meanLatency(l model.Latency) time.Duration {
	const n = 10000
	var sum float64
	for i := range n {
		sum += float64(l.Sample((float64(i) + 0.5) / n))
	}
	return time.Duration(sum / n)
}
