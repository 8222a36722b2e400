package runtime

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
	"pgregory.net/rapid"
)

// TestYieldPositionsProperty drives the mailbox of a task with a chain of
// three operators through random interleavings of posts (from the task
// goroutine and from one goroutine per operator), task-loop runs and
// Yields, with letters that themselves post or yield (as a letter that
// emits into a downstream operator which then waits). It checks M2/M3:
//
//   - a letter of position < p never runs while a Yield at p is active;
//   - every letter runs exactly once;
//   - each poster's letters run in the order it posted them.
func TestYieldPositionsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const nOps = 3
		tk, stop := newTestTask(clock.NewManual(t0))
		var once sync.Once
		cancel := func() { once.Do(stop) }
		defer cancel()
		// A Yield that waits forever is a failure: cancelling makes it
		// return an error.
		watchdog := time.AfterFunc(30*time.Second, cancel) // lint:allow-time a hang guard, not a measurement
		defer watchdog.Stop()
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		ctxs := make([]*Context, nOps)
		for i := range ctxs {
			ctxs[i] = &Context{task: tk, pos: int32(i)}
		}

		// Posters: 0..2 are goroutines posting for operator 0..2; 3..5 post
		// for operator 0..2 from the task goroutine; 6 posts task letters.
		const syncPoster, taskPoster = nOps, 2 * nOps
		type run struct {
			id, poster int
			pos        int32
			yields     []int32 // the Yields active when it ran, outermost first
		}
		// All of this is touched by the task (test) goroutine only.
		var (
			runs   []run
			yields []int32
			posted = map[int][]int{}
			total  int
		)
		async := make([]chan func(), nOps)
		var wg sync.WaitGroup
		for q := range async {
			async[q] = make(chan func(), 1024)
			mb := ctxs[q].Mailbox()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for f := range async[q] {
					mb.Post(f)
				}
			}()
		}

		var mk func(pos int32, poster, depth int) func()
		var doYield func(p int32, depth int)
		postAsync := func(q int32, depth int) { async[q] <- mk(q, int(q), depth) }
		postSync := func(q int32, depth int) {
			if q == posTask {
				tk.postTask(mk(q, taskPoster, depth))
				return
			}
			ctxs[q].Mailbox().Post(mk(q, syncPoster+int(q), depth))
		}
		// mk makes the body of a new letter of pos and records it as
		// posted by poster (the caller posts it right away).
		mk = func(pos int32, poster, depth int) func() {
			id := total
			total++
			posted[poster] = append(posted[poster], id)
			nested := 0
			if depth < 3 && pos != posTask {
				nested = rng.IntN(3)
			}
			return func() {
				runs = append(runs, run{id: id, poster: poster, pos: pos, yields: slices.Clone(yields)})
				switch nested {
				case 1: // post more, of any position
					for range 1 + rng.IntN(2) {
						postSync(int32(rng.IntN(nOps+1))-1, depth+1)
					}
				case 2: // emit into an operator at or after pos, which waits
					doYield(pos+int32(rng.IntN(nOps-int(pos))), depth+1)
				}
			}
		}
		doYield = func(p int32, depth int) {
			// Something this Yield may run will arrive.
			postAsync(p+int32(rng.IntN(nOps-int(p))), depth)
			yields = append(yields, p)
			if err := ctxs[p].Yield(); err != nil {
				rt.Fatalf("Yield at %d: %v (it waited for a letter that never ran)", p, err)
			}
			yields = yields[:len(yields)-1]
		}

		steps := rapid.SliceOfN(rapid.IntRange(0, 4), 1, 40).Draw(rt, "steps")
		for _, s := range steps {
			switch s {
			case 0: // a goroutine posts
				postAsync(int32(rng.IntN(nOps)), 0)
			case 1, 2: // the task goroutine posts (a task letter too)
				postSync(int32(rng.IntN(nOps+1))-1, 0)
			case 3: // an operator waits
				doYield(int32(rng.IntN(nOps)), 0)
			case 4: // a turn of the task loop
				select {
				case <-tk.mailbox.wake:
				default:
				}
				tk.mailbox.runAll()
			}
		}
		// The task loop runs the rest (M4: wake is signalled for them; a
		// letter still on its way from a poster goroutine signals it when
		// it arrives).
		for len(runs) < total {
			select {
			case <-tk.mailbox.wake:
			case <-tk.done:
				rt.Fatalf("%d letters posted, %d ran, and wake was not signalled for the rest", total, len(runs))
			}
			tk.mailbox.runAll()
		}
		for _, c := range async {
			close(c)
		}
		wg.Wait()
		if n := tk.mailbox.runAll(); n != 0 {
			rt.Fatalf("%d letters ran that were never posted", n)
		}

		seen := make([]int, total)
		byPoster := map[int][]int{}
		for _, r := range runs {
			seen[r.id]++
			byPoster[r.poster] = append(byPoster[r.poster], r.id)
			for _, y := range r.yields {
				if r.pos < y {
					rt.Fatalf("letter %d of position %d ran inside a Yield at %d (active Yields %v)", r.id, r.pos, y, r.yields)
				}
			}
		}
		for id, n := range seen {
			if n != 1 {
				rt.Fatalf("letter %d ran %d times", id, n)
			}
		}
		for p, ids := range posted {
			if !slices.Equal(byPoster[p], ids) {
				rt.Fatalf("poster %d posted %v, they ran as %v", p, ids, byPoster[p])
			}
		}
	})
}
