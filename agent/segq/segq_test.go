package segq

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestScripts runs small scripts of queue operations, one line per step:
//
//	+K      AddKey(K)
//	-K      RemoveKey(K), expecting it found
//	-K!     RemoveKey(K), expecting it not found
//	wN      AddWatermark(N)
//	pop a,b PopReady until it fails, expecting exactly these marks
func TestScripts(t *testing.T) {
	cases := []struct {
		name   string
		script string
	}{
		{"two watermarks on an empty queue pop at once", `
			w1
			w2
			pop 1,2
			pop`},
		{"watermark after an active key waits for it", `
			+A
			w1
			pop
			-A
			pop 1`},
		{"a watermark waits for the earlier input of both keys, not for later input", `
			+A
			+B
			w1
			+A
			pop
			-B
			pop
			-A
			pop 1
			-A
			pop`},
		{"later input of the same key does not hold an earlier watermark", `
			+A
			w1
			+A
			+A
			-A
			pop 1
			w2
			pop
			-A
			pop
			-A
			pop 2`},
		{"watermarks leave in arrival order", `
			+A
			w1
			+B
			w2
			-B
			pop
			-A
			pop 1,2`},
		{"remove of an absent key", `
			-A!
			+A
			-A
			-A!
			w1
			pop 1`},
		{"key added after a popped watermark does not count before it", `
			w1
			pop 1
			+A
			w2
			pop
			-A
			pop 2`},
		{"same key twice in one segment", `
			+A
			+A
			w1
			-A
			pop
			-A
			pop 1`},
		{"mark added to an empty queue, then a key, pops", `
			w1
			+A
			pop 1
			w2
			pop
			-A
			pop 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q Queue[string, int]
			for i, line := range strings.Split(strings.TrimSpace(c.script), "\n") {
				line = strings.TrimSpace(line)
				fail := func(format string, args ...any) {
					t.Fatalf("step %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
				}
				switch {
				case strings.HasPrefix(line, "pop"):
					var want []int
					if f := strings.TrimSpace(strings.TrimPrefix(line, "pop")); f != "" {
						for _, s := range strings.Split(f, ",") {
							var n int
							fmt.Sscan(s, &n)
							want = append(want, n)
						}
					}
					var got []int
					for {
						m, ok := q.PopReady()
						if !ok {
							break
						}
						got = append(got, m)
					}
					if !slices.Equal(got, want) {
						fail("popped %v, want %v", got, want)
					}
				case line[0] == '+':
					q.AddKey(line[1:])
				case line[0] == '-':
					k, wantFound := strings.TrimSuffix(line[1:], "!"), !strings.HasSuffix(line, "!")
					if got := q.RemoveKey(k); got != wantFound {
						fail("RemoveKey = %v, want %v", got, wantFound)
					}
				case line[0] == 'w':
					var n int
					fmt.Sscan(line[1:], &n)
					q.AddWatermark(n)
				default:
					fail("bad step")
				}
			}
		})
	}
}

func TestIntrospection(t *testing.T) {
	now := int64(1000)
	q := Queue[string, int64]{Now: func() int64 { return now }}
	if _, _, ok := q.Oldest(); ok || q.Held() != 0 || q.OldestAge() != 0 || len(q.OldestKeys(0)) != 0 {
		t.Fatal("empty queue reports a held mark")
	}
	q.AddKey("A")
	q.AddKey("B")
	q.AddKey("B")
	q.AddWatermark(10)
	now = 1500
	q.AddKey("C")
	q.AddWatermark(20)
	now = 4000
	if q.Held() != 2 || q.Segments() != 3 || q.Refs() != 4 {
		t.Fatalf("held %d segments %d refs %d", q.Held(), q.Segments(), q.Refs())
	}
	m, at, ok := q.Oldest()
	if !ok || m != 10 || at != 1000 || q.OldestAge() != 3000 {
		t.Fatalf("oldest %d at %d ok %v age %d", m, at, ok, q.OldestAge())
	}
	if got := q.OldestKeys(0); len(got) != 2 || got["A"] != 1 || got["B"] != 2 {
		t.Fatalf("oldest keys %v", got)
	}
	if got := q.OldestKeys(1); len(got) != 1 {
		t.Fatalf("limit ignored: %v", got)
	}
	if q.OldestKeyCount() != 2 {
		t.Fatalf("key count %d", q.OldestKeyCount())
	}
	q.RemoveKey("A")
	q.RemoveKey("B")
	q.RemoveKey("B")
	if m, ok := q.PopReady(); !ok || m != 10 {
		t.Fatalf("pop %d %v", m, ok)
	}
	if got := q.OldestKeys(0); len(got) != 1 || got["C"] != 1 {
		t.Fatalf("oldest keys after pop %v", got)
	}
	if q.OldestAge() != 2500 {
		t.Fatalf("age %d", q.OldestAge())
	}
}

// TestMatchesModel checks the queue against a brute-force model: the
// arrival-ordered list of inputs and marks, where a mark is ready when every
// input before it has finished and every mark before it has left.
func TestMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		type item struct {
			mark   bool
			key    string
			val    int
			done   bool // input finished, or mark popped
			popped bool
		}
		var model []*item
		var q Queue[string, int]
		keys := []string{"a", "b", "c", "d"}
		next := 0
		rt.Repeat(map[string]func(*rapid.T){
			"addKey": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "k")
				q.AddKey(k)
				model = append(model, &item{key: k})
			},
			"removeKey": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "k")
				want := false
				for _, it := range model {
					if !it.mark && it.key == k && !it.done {
						it.done, want = true, true
						break
					}
				}
				if got := q.RemoveKey(k); got != want {
					rt.Fatalf("RemoveKey(%s) = %v, model %v", k, got, want)
				}
			},
			"addWatermark": func(rt *rapid.T) {
				next++
				q.AddWatermark(next)
				model = append(model, &item{mark: true, val: next})
			},
			"pop": func(rt *rapid.T) {
				var want []int
				blocked := false
				for _, it := range model {
					if blocked {
						break
					}
					switch {
					case !it.mark && !it.done:
						blocked = true
					case it.mark && !it.popped:
						it.popped = true
						want = append(want, it.val)
					}
				}
				var got []int
				for {
					m, ok := q.PopReady()
					if !ok {
						break
					}
					got = append(got, m)
				}
				if !slices.Equal(got, want) {
					rt.Fatalf("popped %v, model %v", got, want)
				}
			},
			"": func(rt *rapid.T) {
				held, refs := 0, 0
				for _, it := range model {
					if it.mark && !it.popped {
						held++
					}
					if !it.mark && !it.done {
						refs++
					}
				}
				if q.Held() != held || q.Refs() != refs {
					rt.Fatalf("held %d refs %d, model %d %d", q.Held(), q.Refs(), held, refs)
				}
				// The keys holding the oldest held mark: unfinished inputs
				// before it.
				want := map[string]int{}
				for _, it := range model {
					if it.mark && !it.popped {
						break
					}
					if !it.mark && !it.done && held > 0 {
						want[it.key]++
					}
				}
				if got := q.OldestKeys(0); !maps.Equal(got, want) || q.OldestKeyCount() != len(want) {
					rt.Fatalf("oldest keys %v (count %d), model %v", got, q.OldestKeyCount(), want)
				}
				// Per key: its unfinished inputs, and whether one of them
				// came after the last mark (the newest segment).
				for _, k := range keys {
					refs, newest := 0, false
					for _, it := range model {
						if it.mark {
							newest = false
							continue
						}
						if it.key == k && !it.done {
							refs++
							newest = true
						}
					}
					if q.KeyRefs(k) != refs || q.NewestHolds(k) != newest {
						rt.Fatalf("key %s: KeyRefs %d NewestHolds %v, model %d %v", k, q.KeyRefs(k), q.NewestHolds(k), refs, newest)
					}
				}
			},
		})
	})
}

func BenchmarkAddRemove(b *testing.B) {
	var q Queue[int, int64]
	for i := 0; b.Loop(); i++ {
		k := i % 1024
		q.AddKey(k)
		if i%64 == 0 {
			q.AddWatermark(int64(i))
		}
		if i >= 512 {
			q.RemoveKey((i - 512) % 1024)
		}
		for {
			if _, ok := q.PopReady(); !ok {
				break
			}
		}
	}
}
