package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

var t0 = time.UnixMilli(1_000_000)

func at(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }

// drive runs what the subtask loop would run for procTimers: every fire
// that is pending on the timer channel.
func drive(pt *procTimers) int {
	n := 0
	for {
		select {
		case <-pt.C():
			pt.fire()
			n++
		default:
			return n
		}
	}
}

// TestProcTimersOrder: due callbacks run in (time, registration) order, each
// once, with the current time; callbacks not yet due wait.
func TestProcTimersOrder(t *testing.T) {
	clk := clock.NewManual(t0)
	var pt procTimers
	pt.init(clk)
	var got []string
	reg := func(name string, ms int64) {
		pt.register(1_000_000+ms, posTask, func(now int64) { got = append(got, fmt.Sprintf("%s@%d", name, now-1_000_000)) })
	}
	reg("c", 30)
	reg("a", 10)
	reg("b", 20)
	reg("a2", 10) // same time as a: registration order
	reg("z", 100)
	drive(&pt)
	if len(got) != 0 {
		t.Fatalf("fired before due: %v", got)
	}
	clk.Set(at(25))
	drive(&pt)
	if want := []string{"a@25", "a2@25", "b@25"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got = nil
	clk.Set(at(30))
	drive(&pt)
	if want := []string{"c@30"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got = nil
	clk.Set(at(99))
	drive(&pt)
	if len(got) != 0 {
		t.Fatalf("fired before due: %v", got)
	}
	clk.Set(at(100))
	drive(&pt)
	if want := []string{"z@100"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestProcTimersEarlierRegistrationRearms: registering a callback earlier
// than the armed one re-arms the clock timer for it.
func TestProcTimersEarlierRegistrationRearms(t *testing.T) {
	clk := clock.NewManual(t0)
	var pt procTimers
	pt.init(clk)
	var got []string
	pt.register(1_000_000+100, posTask, func(int64) { got = append(got, "late") })
	pt.register(1_000_000+10, posTask, func(int64) { got = append(got, "early") })
	clk.Set(at(10))
	drive(&pt)
	if want := []string{"early"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// movingClock is a manual clock that another goroutine moves right after
// every reading: what a simulation's clock may do while a subtask arms a
// timer.
type movingClock struct{ *clock.Manual }

func (c movingClock) Now() time.Time {
	now := c.Manual.Now()
	c.Manual.Set(now.Add(time.Millisecond))
	return now
}

// TestProcTimersArmTheCallbacksTime: the clock timer is armed for the
// callback's time itself, also when the clock moves between the
// subtask's reading and the arming: armed for the time minus that reading,
// it would fire late by the move, and a simulation that moves its clock
// only to the next armed deadline (seeds 966651, 1041218, 1053141: an
// agent's wait never timed out) would skip the callback's time.
func TestProcTimersArmTheCallbacksTime(t *testing.T) {
	clk := movingClock{clock.NewManual(t0)}
	var pt procTimers
	pt.init(clk)
	var got []int64
	pt.register(1_000_000+10, posTask, func(now int64) { got = append(got, now) })
	if next, ok := clk.NextDue(); !ok || !next.Equal(at(10)) {
		t.Fatalf("clock timer armed for %v, %v: want the callback's time %v", next.Sub(t0), ok, at(10).Sub(t0))
	}
	clk.Set(at(10))
	drive(&pt)
	if len(got) != 1 || got[0] < 1_000_000+10 {
		t.Fatalf("fired %v, want once at or after %d", got, 1_000_000+10)
	}
}

// TestProcTimersCallbacksRegisteringDueCallbacks: a callback that registers
// one already due gets it run in the same pass; one registered for later
// waits for its time.
func TestProcTimersCallbacksRegisteringDueCallbacks(t *testing.T) {
	clk := clock.NewManual(t0)
	var pt procTimers
	pt.init(clk)
	var got []string
	pt.register(1_000_000+10, posTask, func(now int64) {
		got = append(got, "first")
		pt.register(now-5, posTask, func(int64) { got = append(got, "due-now") })
		pt.register(now+10, posTask, func(int64) { got = append(got, "later") })
	})
	clk.Set(at(10))
	drive(&pt)
	if want := []string{"first", "due-now"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	clk.Set(at(20))
	drive(&pt)
	if want := []string{"first", "due-now", "later"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestProcTimersRearmAfterPeriodicCallback: a periodic callback (like the
// source's watermark tick or the flush tick) re-registers itself while a
// different callback is pending before the new time. The clock timer must
// then be armed for the pending one, not for the re-registered one.
//
// procTimers.fire used to re-arm only when no callback had armed the timer
// during the pass, so the pending callback ran at the periodic one's next
// time instead of its own: a processing-time timer at t+40 behind a flush
// tick every 100 ms fired at t+100.
func TestProcTimersRearmAfterPeriodicCallback(t *testing.T) {
	clk := clock.NewManual(t0)
	var pt procTimers
	pt.init(clk)
	var got []string
	var tick func(now int64)
	tick = func(now int64) {
		got = append(got, fmt.Sprintf("tick@%d", now-1_000_000))
		pt.register(now+100, posTask, tick)
	}
	pt.register(1_000_000+10, posTask, tick)
	pt.register(1_000_000+50, posTask, func(now int64) { got = append(got, fmt.Sprintf("user@%d", now-1_000_000)) })
	clk.Set(at(10))
	drive(&pt)
	clk.Set(at(50))
	drive(&pt)
	if want := []string{"tick@10", "user@50"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (the callback due at 50 did not run at 50)", got, want)
	}
	clk.Set(at(110))
	drive(&pt)
	if want := []string{"tick@10", "user@50", "tick@110"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestProcTimersManyPeriodic: several periodic callbacks with different
// periods, driven by a manual clock one millisecond at a time, each run
// exactly at its times.
func TestProcTimersManyPeriodic(t *testing.T) {
	clk := clock.NewManual(t0)
	var pt procTimers
	pt.init(clk)
	periods := []int64{7, 10, 13, 100}
	runs := make([][]int64, len(periods))
	for i, p := range periods {
		var f func(now int64)
		f = func(now int64) {
			runs[i] = append(runs[i], now-1_000_000)
			pt.register(now+p, posTask, f)
		}
		pt.register(1_000_000+p, posTask, f)
	}
	for ms := int64(1); ms <= 300; ms++ {
		clk.Set(at(ms))
		drive(&pt)
	}
	for i, p := range periods {
		var want []int64
		for x := p; x <= 300; x += p {
			want = append(want, x)
		}
		if !slices.Equal(runs[i], want) {
			t.Errorf("period %d ran at %v, want %v", p, runs[i], want)
		}
	}
}

// newTestTask returns a task with a mailbox and timers on clk, enough for
// a Context's Mailbox, Yield and RegisterProcessingTimer.
func newTestTask(clk clock.Clock) (*task, func()) {
	cfg := Config{Clock: clk}.withDefaults(nil)
	t := &task{job: &builder{cfg: cfg}}
	t.mailbox.init()
	t.timers.init(clk)
	done := make(chan struct{})
	t.done = done
	return t, func() { close(done) }
}

// TestMailboxPostFromManyGoroutines: letters from many goroutines all run,
// once each, on the consuming goroutine, and each goroutine's letters run
// in the order it posted them. Run with -race: the letters write
// unsynchronised state that only the consumer touches.
func TestMailboxPostFromManyGoroutines(t *testing.T) {
	var m mailbox
	m.init()
	mb := &Mailbox{m: &m}
	const producers, per = 8, 2000
	next := make([]int, producers) // consumer-owned
	total := 0
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				mb.Post(func() {
					if next[p] != i {
						t.Errorf("producer %d: letter %d ran, want %d", p, i, next[p])
					}
					next[p]++
					total++
				})
			}
		}()
	}
	deadline := time.After(20 * time.Second)
	for total < producers*per {
		select {
		case <-m.wake:
			m.runAll()
		case <-deadline:
			t.Fatalf("only %d of %d letters ran", total, producers*per)
		}
	}
	wg.Wait()
	if m.runAll() != 0 {
		t.Fatal("letters left over")
	}
}

// TestMailboxLetterPostedWhileRunning runs at the next runAll, and wake is
// signalled for it.
func TestMailboxLetterPostedWhileRunning(t *testing.T) {
	var m mailbox
	m.init()
	mb := &Mailbox{m: &m}
	var got []string
	mb.Post(func() {
		got = append(got, "a")
		m.post(func() { got = append(got, "b") }, 0)
	})
	<-m.wake
	if n := m.runAll(); n != 1 || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first runAll ran %d: %v", n, got)
	}
	select {
	case <-m.wake:
	default:
		t.Fatal("wake not signalled for the letter posted while running")
	}
	if n := m.runAll(); n != 1 || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("second runAll ran %d: %v", n, got)
	}
}

// TestYieldRunsLetters: Yield blocks until a letter posted from another
// goroutine has run on the calling goroutine.
func TestYieldRunsLetters(t *testing.T) {
	tk, cancel := newTestTask(clock.NewManual(t0))
	defer cancel()
	ctx := &Context{task: tk}
	ran := false
	started := make(chan struct{})
	go func() {
		<-started
		ctx.Mailbox().Post(func() { ran = true })
	}()
	close(started)
	if err := ctx.Yield(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("Yield returned before the letter ran")
	}
}

// TestYieldRunsDueTimers: Yield also returns once a processing-time
// callback has run.
func TestYieldRunsDueTimers(t *testing.T) {
	clk := clock.NewManual(t0)
	tk, cancel := newTestTask(clk)
	defer cancel()
	ctx := &Context{task: tk}
	var ranAt int64
	ctx.RegisterProcessingTimer(clock.NowMillis(clk)+50, func(now int64) { ranAt = now })
	go clk.Advance(50 * time.Millisecond)
	if err := ctx.Yield(); err != nil {
		t.Fatal(err)
	}
	if ranAt != clock.NowMillis(clk) {
		t.Fatalf("callback ran at %d, want %d", ranAt, clock.NowMillis(clk))
	}
}

// TestYieldCancelled: Yield returns context.Canceled when the job is
// cancelled.
func TestYieldCancelled(t *testing.T) {
	tk, cancel := newTestTask(clock.NewManual(t0))
	ctx := &Context{task: tk}
	go cancel()
	if err := ctx.Yield(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Yield returned %v, want context.Canceled", err)
	}
}

// TestContextFailNamesOperator: Fail records the first error with the
// operator and subtask.
func TestContextFailNamesOperator(t *testing.T) {
	tk, cancel := newTestTask(clock.NewManual(t0))
	defer cancel()
	tk.subtask, tk.parallelism = 1, 3
	ctx := &Context{Name: "enrich", task: tk}
	first := errors.New("boom")
	ctx.Fail(first)
	ctx.Fail(errors.New("second"))
	var oe *OperatorError
	if !errors.As(tk.err, &oe) || oe.Err != first ||
		oe.Operator != "enrich" || oe.Subtask != 1 || oe.Parallelism != 3 || oe.Phase != PhaseProcess {
		t.Fatalf("task error %#v, want an *OperatorError of enrich, subtask 1 of 3, PhaseProcess, with the first error", tk.err)
	}
	// The text names the operator and subtask as it always has (logs and
	// users match it).
	if tk.err.Error() != `operator "enrich" (subtask 1 of 3): boom` {
		t.Fatalf("task error %q", tk.err)
	}
}
