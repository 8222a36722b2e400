package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// txnStore is an in-memory transactional sink shared by the runs of a
// test: transactions are committed at most once, and Recover drops the
// uncommitted ones from the open one on.
type txnStore struct {
	mu        sync.Mutex
	next      int
	open      map[int][]string
	committed []string
}

func (s *txnStore) newSink(*runtime.Context) (weir.TwoPhaseCommitter[string, int], error) {
	return txnSink{s}, nil
}

func (s *txnStore) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.committed)
}

type txnSink struct{ s *txnStore }

func (k txnSink) Begin() (int, error) {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	k.s.next++
	k.s.open[k.s.next] = []string{}
	return k.s.next, nil
}

func (k txnSink) Write(txn int, r weir.Record[string]) error {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	k.s.open[txn] = append(k.s.open[txn], r.Value)
	return nil
}

func (k txnSink) PreCommit(int) error { return nil }

func (k txnSink) Commit(txn int) error {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	if vs, ok := k.s.open[txn]; ok {
		k.s.committed = append(k.s.committed, vs...)
		delete(k.s.open, txn)
	}
	return nil
}

func (k txnSink) Recover(open int, ok bool) error {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	for txn := range k.s.open {
		if !ok || txn >= open {
			delete(k.s.open, txn)
		}
	}
	return nil
}

// logSignal closes seen when a record whose message contains text is
// logged.
type logSignal struct {
	slog.Handler
	text string
	once *sync.Once
	seen chan struct{}
}

func (h logSignal) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		h.once.Do(func() { close(h.seen) })
	}
	return h.Handler.Handle(ctx, r)
}

func (h logSignal) WithAttrs(as []slog.Attr) slog.Handler {
	return logSignal{h.Handler.WithAttrs(as), h.text, h.once, h.seen}
}

func (h logSignal) WithGroup(n string) slog.Handler {
	return logSignal{h.Handler.WithGroup(n), h.text, h.once, h.seen}
}

// TestResumeFromFinalCheckpointRunsNothingAgain runs a bounded job to its
// end while an input's model call is in flight when its final checkpoint is
// taken, then resumes from that checkpoint. The final checkpoint must cover
// every output: the first run commits each output once, and the resumed
// run, whose source has nothing left, runs no action and commits nothing.
// (The final checkpoint used to store the unfinished input while the end of
// input finished it and the two-phase-commit sink committed its output;
// the resumed run then ran it again and committed it twice.)
func TestResumeFromFinalCheckpointRunsNothingAgain(t *testing.T) {
	ctx := testCtx(t)
	base := t.TempDir()
	store := &txnStore{open: map[int][]string{}}
	m := newGatedModel()
	openA1 := m.gate("A1")
	defer openA1()
	draining := make(chan struct{})
	run := func(dir, restore string) {
		logger := slog.New(logSignal{Handler: slog.NewTextHandler(&strings.Builder{}, nil),
			text: "before the final checkpoint", once: &sync.Once{}, seen: draining})
		if restore != "" {
			logger = slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
		}
		// Only the final checkpoint is taken: the interval is never reached.
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Logger: logger,
			Checkpoint: runtime.CheckpointConfig{Interval: time.Hour, Dir: dir, RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(
			rec(msg{Key: "A", Text: "A1"}, 1),
			rec(msg{Key: "B", Text: "B1"}, 2),
		), watermark.NoWatermarks[msg]()).UID("src")
		out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", countingAgent(m), Options{}).UID("agent")
		weir.TwoPhaseCommit(out, "sink", store.newSink).UID("sink")
		if err := env.Execute(ctx); err != nil {
			t.Fatalf("job (restore %q): %v", restore, err)
		}
	}

	// A1's call is released once the final checkpoint has either been
	// written (it did not wait for A1) or is waiting for A1.
	go func() {
		defer openA1()
		for p := ""; p != "A1"; {
			select {
			case p = <-m.entered:
			case <-ctx.Done():
				return
			}
		}
		for {
			if es, _ := os.ReadDir(filepath.Join(base, "c1")); len(es) > 0 {
				break
			}
			select {
			case <-draining:
			case <-time.After(5 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
			break
		}
	}()
	run(filepath.Join(base, "c1"), "")
	want := []string{"re:A1 count=1 seq=0", "re:B1 count=1 seq=0"}
	got := store.values()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("first run committed %q, want %q", got, want)
	}
	final, id, err := checkpoint.Latest(filepath.Join(base, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	calls := m.calls.Load()
	run(filepath.Join(base, "c2"), final)
	if again := m.calls.Load() - calls; again != 0 {
		t.Errorf("the run resumed from final checkpoint %d made %d model calls, want none", id, again)
	}
	got = store.values()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("after the resumed run the sink committed %q, want %q (each output once)", got, want)
	}
}
