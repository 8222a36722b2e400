package sim

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// S6 (no goroutine leak) is checked by labelling: Run runs the whole seed
// under a pprof label unique to the run, which every goroutine the job
// starts inherits (and those they start, and so on); once the job has
// ended for the last time, no goroutine may carry the label. Labels make
// the check exact with several seeds running at once, which a count of
// goroutines is not.

// leakLabel is the pprof label key of a run.
const leakLabel = "weir_sim_run"

// leakGrace is how long the goroutines of a run that has ended may take to
// exit. A goroutine still alive after it is a leak.
const leakGrace = 5 * time.Second

var runIDs atomic.Uint64

// labelled runs fn with a fresh run label and returns the label's value.
func labelled(ctx context.Context, fn func(context.Context)) string {
	id := strconv.FormatUint(runIDs.Add(1), 10)
	pprof.Do(ctx, pprof.Labels(leakLabel, id), fn)
	return id
}

// checkLeaks checks S6 for the run labelled id.
func checkLeaks(id string) *Failure {
	deadline := time.Now().Add(leakGrace)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		n, stacks := goroutinesLabelled(id)
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			f := &Failure{Invariant: InvNoLeak, Detail: fmt.Sprintf("%d goroutines the job started are alive %v after its end", n, leakGrace)}
			for i, s := range stacks {
				if i == 4 {
					break
				}
				f.Records = append(f.Records, s)
			}
			return f
		}
		time.Sleep(wait)
	}
}

// goroutinesLabelled returns how many goroutines carry the run label id,
// and the innermost frames of each distinct stack among them.
func goroutinesLabelled(id string) (int, []string) {
	return goroutinesWith(leakLabel, id)
}

// goroutinesWith returns how many goroutines carry the pprof label
// key=value, and the innermost frames of each distinct stack among them.
func goroutinesWith(key, value string) (int, []string) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return 0, nil
	}
	want := fmt.Sprintf("%q:%q", key, value)
	n := 0
	var stacks []string
	// debug=1: records separated by blank lines, each "N @ pcs", then
	// "# labels: {...}" when labelled, then "#\tpc\tfunc+off\tfile:line"
	// frames.
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		lines := strings.Split(rec, "\n")
		labelled := false
		var frames []string
		for _, l := range lines {
			if strings.HasPrefix(l, "# labels: ") && strings.Contains(l, want) {
				labelled = true
			}
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && strings.HasPrefix(f[1], "0x") {
				frames = append(frames, f[2])
			}
		}
		if !labelled {
			continue
		}
		count, _, _ := strings.Cut(lines[0], " ")
		c, err := strconv.Atoi(count)
		if err != nil {
			c = 1
		}
		n += c
		where := strings.Join(telling(frames), " <- ")
		if where == "" {
			where = "a function not started yet"
		}
		stacks = append(stacks, fmt.Sprintf("%d goroutine(s) in %s", c, where))
	}
	return n, stacks
}

// telling returns the innermost frame of a stack and the three frames
// from the first one outside the runtime and the sync packages on (where
// a goroutine blocked on a lock or a channel waits in weir's code).
func telling(frames []string) []string {
	if len(frames) == 0 {
		return nil
	}
	first := len(frames)
	for i, f := range frames {
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "internal/sync.") && !strings.HasPrefix(f, "sync.") {
			first = i
			break
		}
	}
	if first == 0 || first == len(frames) {
		return frames[:min(3, len(frames))]
	}
	return append([]string{frames[0], "..."}, frames[first:min(first+3, len(frames))]...)
}
