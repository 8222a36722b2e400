package sim

import (
	"fmt"
	"math"
	"slices"
)

// minWM is the watermark before any: watermark.Min, restated here so the
// oracle depends on nothing of the code under test.
const minWM = math.MinInt64

// windowLine and lateLine are the committed output's two kinds of lines:
// a window firing (its key, window, record count and the sum of its
// records' ids), and a late record.
func windowLine(key string, start, end, n, sum int64) string {
	return fmt.Sprintf("W %s [%d,%d) n=%d sum=%d", key, start, end, n, sum)
}

func lateLine(key string, ts, id int64) string {
	return fmt.Sprintf("L %s ts=%d id=%d", key, ts, id)
}

// sortLine and violationLine are the event-time sort's (Spec.Sort): a
// record on the sort's main output, and a record that reached the sort at
// or behind its watermark (ordering/doc.go S3: emitted at once, and also
// to the violations output).
func sortLine(key string, ts, id int64) string {
	return fmt.Sprintf("S %s ts=%d id=%d", key, ts, id)
}

func violationLine(key string, ts, id int64) string {
	return fmt.Sprintf("V %s ts=%d id=%d", key, ts, id)
}

// Reference computes the committed output the job must produce from the
// workload alone, by the rules the job declares (window/doc.go I1-I4, I8,
// restated independently): the source's watermark is the minimum of its
// splits' watermarks, forwarded when it rises, and reaches the window
// operator in order with the records; a tumbling window fires once when
// the watermark reaches its last millisecond, and again at once for every
// record that joins it after that and before the watermark reaches its
// cleanup time (last millisecond + lateness); a record whose window is
// gone goes to the late output. With Spec.Sort, every record is on the
// sort's output exactly once (held until the watermark passes it, or at
// once if it arrived at or behind the watermark: ordering/doc.go S1, S3),
// and those that arrived at or behind it are on its violations output
// too. It returns the lines sorted.
func Reference(s *Spec) []string {
	type win struct {
		key        string
		start      int64
		n, sum     int64
		timerArmed bool // its firing at the watermark is still to come
	}
	L := s.LatenessMS
	size := s.WindowMS
	splitWM := make([]int64, s.Splits)
	for i := range splitWM {
		splitWM[i] = minWM
	}
	wm := int64(minWM)
	open := map[[2]any]*win{}
	var out []string
	fire := func(w *win) { out = append(out, windowLine(w.key, w.start, w.start+size, w.n, w.sum)) }
	advance := func(to int64) {
		if to <= wm {
			return
		}
		wm = to
		for k, w := range open {
			maxTS := w.start + size - 1
			if w.timerArmed && maxTS <= wm {
				w.timerArmed = false
				fire(w)
			}
			if sat(maxTS, L) <= wm {
				delete(open, k)
			}
		}
	}
	for _, st := range s.Steps {
		switch st.Kind {
		case StepWatermark:
			splitWM[st.Split] = max(splitWM[st.Split], st.TS)
			advance(slices.Min(splitWM))
		case StepRecord:
			if s.Sort {
				out = append(out, sortLine(st.Key, st.TS, st.ID))
				if st.TS <= wm {
					out = append(out, violationLine(st.Key, st.TS, st.ID))
				}
			}
			start := st.TS - floorMod(st.TS, size)
			maxTS := start + size - 1
			if sat(maxTS, L) <= wm {
				out = append(out, lateLine(st.Key, st.TS, st.ID))
				continue
			}
			k := [2]any{st.Key, start}
			w := open[k]
			if w == nil {
				w = &win{key: st.Key, start: start, timerArmed: maxTS > wm}
				open[k] = w
			}
			w.n++
			w.sum += st.ID
			if maxTS <= wm {
				fire(w)
			}
		}
	}
	advance(math.MaxInt64) // every split finishes: the maximum watermark
	if s.Timers {
		out = append(out, timerReference(s)...)
	}
	if s.Session != nil {
		out = append(out, sessionReference(s)...)
	}
	slices.Sort(out)
	return out
}

func floorMod(a, b int64) int64 { return ((a % b) + b) % b }

// sat is a + b saturating at math.MaxInt64 (b >= 0).
func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
