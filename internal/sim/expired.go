package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/checkpoint"
)

// S18 (nothing expired is kept) is checked on what the job really keeps:
// the keyed state and timers its checkpoints hold, read back from the
// checkpoint storage and decoded here from the documented format
// (docs/state-format.md), not from the operators' own counters. At a
// checkpoint, the watermark every keyed operator has processed is fixed by
// the script: the source's splits' watermarks of the steps before the
// checkpoint's barrier (the source position the checkpoint holds), or the
// maximum watermark at the final checkpoint (position: the end of the
// script). Then:
//
//   - window: every window whose contents are kept has a cleanup time
//     (MaxTimestamp + lateness) above the watermark;
//   - session: every session of a key's merging set has a cleanup time
//     above the watermark, and every contents entry belongs to a session
//     of the set;
//   - timers: every pending map entry's time is above the watermark;
//   - sort: every held record's timestamp is above the watermark;
//   - and for all four, every event-time timer is above the watermark (a
//     timer at or behind it has fired and must be gone).
//
// At the final checkpoint, after the maximum watermark, all of that must
// be empty. Processing-time timers and what they hold are not judged:
// processing time need not have reached them.
//
// In the Kafka form no script fixes the watermark at a checkpoint: it
// depends on the order in which the source read the partitions. There a
// tap chained right behind each keyed window operator (wmTap,
// kafkasession.go) records, per subtask, the last watermark the operator
// forwarded before each checkpoint's barrier. The operator forwards a
// watermark only after it has fired and cleaned up for it (window
// operator ProcessWatermark), and takes its snapshot at the same barrier,
// so that watermark is a lower bound of the one the snapshot reflects:
// every key group of the subtask is judged against it by the rules above
// (the window's and the sessions'), at every checkpoint TriggerCheckpoint
// completes and at the final one (behind the maximum watermark: all
// empty). A checkpoint no tap of the attempt recorded (the latest at the
// end is an earlier attempt's when the final one was given up) is not
// judged; a subtask with key groups and no recorded watermark fails.

// InvExpired is S18.
const InvExpired = "S18 nothing expired is kept"

// wmAtPosition returns the watermark the keyed operators have processed
// when a checkpoint whose source position is pos (the index of the next
// step) reaches them: the minimum over the splits of the highest
// watermark step before pos (minWM for a split without one), and the
// maximum watermark at the end of the script (the final checkpoint).
func wmAtPosition(s *Spec, pos int) int64 {
	if pos >= len(s.Steps) {
		return math.MaxInt64
	}
	wm := make([]int64, s.Splits)
	for i := range wm {
		wm[i] = minWM
	}
	for _, st := range s.Steps[:pos] {
		if st.Kind == StepWatermark {
			wm[st.Split] = max(wm[st.Split], st.TS)
		}
	}
	return slices.Min(wm)
}

// checkExpired checks S18 on the complete checkpoint at loc in fs.
func checkExpired(spec *Spec, fs vfs.FS, loc string) *Failure {
	snap, f := readForExpired(fs, loc)
	if snap == nil {
		return f
	}
	pos, err := sourcePosition(snap)
	if err != nil {
		return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("checkpoint %s: %v", loc, err)}
	}
	wm := wmAtPosition(spec, pos)
	at := fmt.Sprintf("checkpoint %d (source position %d of %d, watermark %s)", snap.ID, pos, len(spec.Steps), wmString(wm))
	rules := []expiredRule{
		{"window", windowRule(spec.LatenessMS)},
		{"timers", func(wm int64, _ keyGroupSessions, e keptEntry) string {
			if e.state != "pending" {
				return ""
			}
			t, err := decodeVarint(e.userKey)
			if err != nil || t <= wm {
				return fmt.Sprintf("a pending timer entry at %d, at or behind the watermark", t)
			}
			return ""
		}},
		{"sort", func(wm int64, _ keyGroupSessions, e keptEntry) string {
			if e.state != "ordering.held" {
				return ""
			}
			ts, err := decodeVarint(e.ns)
			if err != nil || ts <= wm {
				return fmt.Sprintf("%d records held at %d, at or behind the watermark", e.n, ts)
			}
			return ""
		}},
	}
	if spec.Session != nil {
		rules = append(rules, expiredRule{"session", sessionRule(spec.Session.LatenessMS)})
	}
	return judgeExpired(snap, rules, func(string, int) (int64, error) { return wm, nil }, at)
}

// readForExpired reads the complete checkpoint at loc in fs: a nil
// snapshot with a nil Failure is a checkpoint retention deleted meanwhile.
func readForExpired(fs vfs.FS, loc string) (*checkpoint.Snapshot, *Failure) {
	snap, err := (checkpoint.Storage{FS: fs}).Read(loc)
	if err != nil {
		// The job goes on while this reads (its final checkpoint need not
		// wait for the script's barrier), and retention may delete the
		// checkpoint meanwhile: it deletes the manifest first (checkpoint
		// Storage.Retain), so a checkpoint whose manifest is gone was
		// retired, not lost, and is not judged (seed 95848). A file missing
		// under a manifest that is still there is a failure.
		if _, serr := fs.Stat(checkpoint.Join(loc, checkpoint.MetadataFile)); errors.Is(serr, os.ErrNotExist) {
			return nil, nil
		}
		return nil, &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("checkpoint %s, reported complete, cannot be read: %v", loc, err)}
	}
	return snap, nil
}

// expiredRule is S18's rule for the keyed operator uid: given the
// watermark one of its subtasks had processed, the session windows of the
// key group entry e is in, and e, it says why e must be gone ("" if it
// may stay).
type expiredRule struct {
	uid  string
	keep func(wm int64, g keyGroupSessions, e keptEntry) string
}

// keyGroupSessions holds the state windows of the sessions in the merging
// sets of one key group's keys, by key + "\x00" + state window bytes (the
// session rule's contents must be in them).
type keyGroupSessions map[string]bool

func sessionsOf(entries []keptEntry) keyGroupSessions {
	var g keyGroupSessions
	for _, e := range entries {
		if e.state != "window-sessions" {
			continue
		}
		if g == nil {
			g = keyGroupSessions{}
		}
		for _, sw := range decodeSessionSet(e.value) {
			g[e.key+"\x00"+string(sw)] = true
		}
	}
	return g
}

// judgeExpired judges every key group of the operators of snap that rules
// name: wmOf gives the watermark subtask sub of operator uid had processed
// at the checkpoint (its key groups are judged against it); at describes
// the checkpoint in a failure.
func judgeExpired(snap *checkpoint.Snapshot, rules []expiredRule, wmOf func(uid string, sub int) (int64, error), at string) *Failure {
	for _, r := range rules {
		op := snap.Operator(r.uid)
		if op == nil {
			continue
		}
		for sub, st := range op.Subtasks {
			if st == nil || len(st.KeyGroups) == 0 {
				continue
			}
			wm, err := wmOf(r.uid, sub)
			if err != nil {
				return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("%s: operator %s subtask %d: %v", at, r.uid, sub, err)}
			}
			for kg, blob := range st.KeyGroups {
				data, err := blob.Bytes()
				if err != nil {
					return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("%s: operator %s subtask %d key group %d: %v", at, r.uid, sub, kg, err)}
				}
				entries, timers, err := decodeKeyed(data)
				if err != nil {
					return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("%s: operator %s subtask %d key group %d: %v", at, r.uid, sub, kg, err)}
				}
				for _, t := range timers {
					if !t.proc && t.ts <= wm {
						return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("%s: operator %s (subtask %d, watermark %s) keeps an event-time timer at %d of key %q, at or behind the watermark (it has fired)", at, r.uid, sub, wmString(wm), t.ts, t.key),
							Records: []string{fmt.Sprintf("timer ts=%d key=%q namespace=%x", t.ts, t.key, t.ns)}}
					}
				}
				g := sessionsOf(entries)
				for _, e := range entries {
					if why := r.keep(wm, g, e); why != "" {
						return &Failure{Invariant: InvExpired, Detail: fmt.Sprintf("%s: operator %s (subtask %d, watermark %s) keeps %s", at, r.uid, sub, wmString(wm), why),
							Records: []string{fmt.Sprintf("state %q key=%q namespace=%x", e.state, e.key, e.ns)}}
					}
				}
			}
		}
	}
	return nil
}

func wmString(wm int64) string {
	switch wm {
	case math.MaxInt64:
		return "+inf (the end of input)"
	case minWM:
		return "-inf"
	}
	return fmt.Sprint(wm)
}

// windowRule is the tumbling window's rule: contents only of windows
// whose cleanup time (last millisecond + lateness) is above the watermark.
func windowRule(lateness int64) func(wm int64, _ keyGroupSessions, e keptEntry) string {
	return func(wm int64, _ keyGroupSessions, e keptEntry) string {
		if e.state != "window-contents" {
			return ""
		}
		start, end, err := decodeWindowNS(e.ns)
		if err != nil {
			return "contents of an undecodable window: " + err.Error()
		}
		if c := sat(end-1, lateness); c <= wm {
			return fmt.Sprintf("the contents of window [%d,%d) of key %q, whose cleanup time %d the watermark has reached", start, end, e.key, c)
		}
		return ""
	}
}

// sessionRule is the session operator's rule: every session of a key's
// set has a cleanup time above wm, and every contents entry is the state
// window of a session in its key's set (g).
func sessionRule(lateness int64) func(wm int64, g keyGroupSessions, e keptEntry) string {
	return func(wm int64, g keyGroupSessions, e keptEntry) string {
		switch e.state {
		case "window-sessions":
			set, err := sessionWindows(e.value)
			if err != nil {
				return "an undecodable session set: " + err.Error()
			}
			for _, w := range set {
				if c := sat(w[1]-1, lateness); c <= wm {
					return fmt.Sprintf("session [%d,%d) of key %q in its merging set, whose cleanup time %d the watermark has reached", w[0], w[1], e.key, c)
				}
			}
		case "window-contents":
			if !g[e.key+"\x00"+string(e.ns)] {
				start, end, _ := decodeWindowNS(e.ns)
				return fmt.Sprintf("the contents of window [%d,%d) of key %q, which no session of the key's set holds", start, end, e.key)
			}
		}
		return ""
	}
}

// keptEntry is one entry of a keyed state in a key-group blob: its state's
// name, key, namespace (namespaced kinds), user key (a map entry: one per
// entry of the map), value (value kinds) and item count (list kinds).
type keptEntry struct {
	state       string
	key         string
	ns, userKey []byte
	value       []byte
	n           int
}

type keptTimer struct {
	ts   int64
	key  string
	ns   []byte
	proc bool
}

var errShort = errors.New("truncated blob")

type blobReader struct{ b []byte }

func (r *blobReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, errShort
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *blobReader) varint() (int64, error) {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		return 0, errShort
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *blobReader) field() ([]byte, error) {
	l, err := r.uvarint()
	if err != nil || l > uint64(len(r.b)) {
		return nil, errShort
	}
	f := r.b[:l]
	r.b = r.b[l:]
	return f, nil
}

// decodeKeyed decodes the blob of one key group of a keyed operator of
// package weir, window or ordering: uvarint(len(stateBlob)) stateBlob
// timerBlob (window/snapshot.go), each in the format of
// docs/state-format.md.
func decodeKeyed(data []byte) ([]keptEntry, []keptTimer, error) {
	r := &blobReader{data}
	sb, err := r.field()
	if err != nil {
		return nil, nil, fmt.Errorf("key-group blob: %w", err)
	}
	entries, err := decodeStateBlob(sb)
	if err != nil {
		return nil, nil, fmt.Errorf("state blob: %w", err)
	}
	timers, err := decodeTimerBlob(r.b)
	if err != nil {
		return nil, nil, fmt.Errorf("timer blob: %w", err)
	}
	return entries, timers, nil
}

// blobAfterHeader reads the header a state or timer blob of a key group
// starts with (format version 1, the key group) and returns a reader at
// what follows.
func blobAfterHeader(b []byte) (*blobReader, error) {
	r := &blobReader{b}
	if v, err := r.uvarint(); err != nil || v != 1 {
		return nil, fmt.Errorf("version %d (%v)", v, err)
	}
	if _, err := r.uvarint(); err != nil { // key group
		return nil, err
	}
	return r, nil
}

func decodeStateBlob(b []byte) ([]keptEntry, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r, err := blobAfterHeader(b)
	if err != nil {
		return nil, err
	}
	states, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	var out []keptEntry
	for range states {
		name, err := r.field()
		if err != nil {
			return nil, err
		}
		kind, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		sec, err := r.field()
		if err != nil {
			return nil, err
		}
		s := &blobReader{sec}
		n, err := s.uvarint()
		if err != nil {
			return nil, err
		}
		for range n {
			key, err := s.field()
			if err != nil {
				return nil, err
			}
			e := keptEntry{state: string(name), key: string(key)}
			if kind == 4 || kind == 5 {
				if e.ns, err = s.field(); err != nil {
					return nil, err
				}
			}
			switch kind {
			case 1, 4: // value, namespaced value
				if e.value, err = s.field(); err != nil {
					return nil, err
				}
				out = append(out, e)
			case 2, 5: // list, namespaced list
				items, err := s.uvarint()
				if err != nil {
					return nil, err
				}
				for range items {
					if _, err := s.field(); err != nil {
						return nil, err
					}
				}
				e.n = int(items)
				out = append(out, e)
			case 3: // map: an entry per user key
				items, err := s.uvarint()
				if err != nil {
					return nil, err
				}
				for range items {
					m := e
					if m.userKey, err = s.field(); err != nil {
						return nil, err
					}
					if m.value, err = s.field(); err != nil {
						return nil, err
					}
					out = append(out, m)
				}
			default:
				return nil, fmt.Errorf("state %q: unknown kind %d", name, kind)
			}
		}
		if len(s.b) != 0 {
			return nil, fmt.Errorf("state %q: %d trailing bytes", name, len(s.b))
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return out, nil
}

func decodeTimerBlob(b []byte) ([]keptTimer, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r, err := blobAfterHeader(b)
	if err != nil {
		return nil, err
	}
	var out []keptTimer
	for _, proc := range []bool{false, true} {
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		for range n {
			t := keptTimer{proc: proc}
			if t.ts, err = r.varint(); err != nil {
				return nil, err
			}
			key, err := r.field()
			if err != nil {
				return nil, err
			}
			t.key = string(key)
			if t.ns, err = r.field(); err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return out, nil
}

// decodeVarint decodes an int64 of the default codec (a zig-zag varint).
func decodeVarint(b []byte) (int64, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("bad varint %x", b)
	}
	return v, nil
}

// decodeWindowNS decodes a window namespace (window.WindowCodec: start and
// end as zig-zag varints).
func decodeWindowNS(b []byte) (start, end int64, err error) {
	r := &blobReader{b}
	if start, err = r.varint(); err != nil {
		return 0, 0, err
	}
	if end, err = r.varint(); err != nil {
		return 0, 0, err
	}
	if len(r.b) != 0 {
		return 0, 0, fmt.Errorf("window namespace %x: trailing bytes", b)
	}
	return start, end, nil
}

// sessionWindows decodes a session set (window/codec.go: uvarint count,
// then per session its window and its state window) into its windows.
func sessionWindows(b []byte) ([][2]int64, error) {
	r := &blobReader{b}
	n, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	var out [][2]int64
	for range n {
		var w [4]int64
		for i := range w {
			if w[i], err = r.varint(); err != nil {
				return nil, err
			}
		}
		out = append(out, [2]int64{w[0], w[1]})
	}
	return out, nil
}

// decodeSessionSet returns the encoded state windows of a session set.
func decodeSessionSet(b []byte) [][]byte {
	r := &blobReader{b}
	n, err := r.uvarint()
	if err != nil {
		return nil
	}
	var out [][]byte
	for range n {
		if _, err := r.varint(); err != nil {
			return out
		}
		if _, err := r.varint(); err != nil {
			return out
		}
		from := r.b
		if _, err := r.varint(); err != nil {
			return out
		}
		if _, err := r.varint(); err != nil {
			return out
		}
		out = append(out, from[:len(from)-len(r.b)])
	}
	return out
}

// sourcePosition returns the scripted source's position in snap: the
// index of the next step (source.go, SnapshotSplits).
func sourcePosition(snap *checkpoint.Snapshot) (int, error) {
	op := snap.Operator("src")
	if op == nil || len(op.Subtasks) != 1 || op.Subtasks[0] == nil {
		return 0, errors.New("no state of the source's one subtask")
	}
	l := op.Subtasks[0].Lists["splits"]
	if l == nil || len(l.Items) != 1 {
		return 0, errors.New("the source's position is not one item")
	}
	b, err := l.Items[0].Bytes()
	if err != nil {
		return 0, err
	}
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) || v < 0 {
		return 0, fmt.Errorf("bad source position %x", b)
	}
	return int(v), nil
}
