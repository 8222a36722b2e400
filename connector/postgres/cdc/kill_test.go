package cdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/connector/postgres/cdc"
	"github.com/weirproject/weir/internal/childproc"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// errKilled is a child's end by the test's SIGKILL.
var errKilled = errors.New("killed")

// child is what a child process of TestKill9 runs.
type child struct {
	URL, Slot, Out, Chk string
}

// TestMain lets the test binary run a job as the child process TestKill9
// kills.
func TestMain(m *testing.M) {
	if spec := os.Getenv("WEIR_CDC_CHILD"); spec != "" {
		var c child
		if err := json.Unmarshal([]byte(spec), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := runChild(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	os.Exit(code)
}

// runChild runs the bounded job from the newest checkpoint in c.Chk, if
// any, into exactly-once files.
func runChild(c child) error {
	cfg := runtime.CheckpointConfig{Interval: 5 * time.Millisecond, Dir: c.Chk}
	if p, _, err := checkpoint.Latest(c.Chk); err == nil && p != "" {
		cfg.RestoreFrom = p
	}
	env := weir.NewEnvironment(weir.Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Checkpoint: cfg})
	src := weir.FromSource(env, "pg", cdc.NewSource(cdc.Options{URL: c.URL, Slot: c.Slot, Publication: c.Slot, Bounded: true}),
		watermark.ForBoundedOutOfOrderness[cdc.Change](0)).UID("pg")
	lines := weir.Map(src, "line", line).UID("line")
	weir.TwoPhaseCommit(lines, "sink", file.ExactlyOnce(c.Out, func(s string) ([]byte, error) { return []byte(s), nil })).UID("sink")
	return env.Execute(context.Background())
}

// TestKill9: the job runs in a child process that is killed with SIGKILL
// at random moments (three times), each new child restoring from the
// newest checkpoint, until one completes. The exactly-once files hold
// every change once, in commit order: the slot replayed what the killed
// children had read but no completed checkpoint covered.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	url, slot := freshDB(t)
	db := connect(t, url)
	execSQL(t, db, "CREATE TABLE k9 (id int PRIMARY KEY, v text)", "ALTER TABLE k9 REPLICA IDENTITY FULL",
		"CREATE PUBLICATION "+slot+" FOR TABLE k9", "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	var want []string
	for i := range 1500 {
		execSQL(t, db, fmt.Sprintf("INSERT INTO k9 VALUES (%d, 'v%d')", i, i))
		want = append(want, fmt.Sprintf("insert public.k9 before=- after=id:%d,v:v%d", i, i))
	}
	execSQL(t, db, "UPDATE k9 SET v = 'big' WHERE id < 1000")
	for i := range 1000 {
		want = append(want, fmt.Sprintf("update public.k9 before=id:%d,v:v%d after=id:%d,v:big", i, i, i))
	}
	c := child{URL: url, Slot: slot, Out: filepath.Join(t.TempDir(), "out"), Chk: t.TempDir()}
	spec, _ := json.Marshal(c)
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	kills := 0
	var froms []string // where each child's stream started
	for attempt := 0; ; attempt++ {
		if attempt > 10 {
			t.Fatal("no child completed in 10 attempts")
		}
		// The child logs "cdc: streaming" once its slot streams; the kill
		// comes a random moment after it.
		streaming := make(chan struct{})
		var logs strings.Builder // written by the line reader until the child is waited for
		p, err := childproc.Start(ctx, "WEIR_CDC_CHILD", string(spec), func(line string) {
			logs.WriteString(line + "\n")
			if strings.Contains(line, "cdc: streaming") {
				if i := strings.Index(line, " from="); i >= 0 {
					froms = append(froms, strings.Fields(line[i:])[0])
				}
				close(streaming)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			killed, err := p.Wait()
			if err == nil && killed {
				err = errKilled
			}
			done <- err
		}()
		if kills < 3 {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("child: %v\n%s", err, logs.String())
				}
			case <-streaming:
				// Once a checkpoint taken while streaming has completed,
				// so that the next child restores a position inside the
				// stream, at a random moment after it.
				_, first, _ := checkpoint.Latest(c.Chk)
				for {
					if _, id, _ := checkpoint.Latest(c.Chk); id > first+1 {
						break
					}
					select {
					case err := <-done:
						done <- err
					case <-time.After(5 * time.Millisecond):
						continue
					}
					break
				}
				time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // a random moment, not a synchronisation
				p.Kill()
				switch err := <-done; {
				case err == errKilled:
					kills++
					continue
				case err != nil:
					t.Fatalf("child: %v\n%s", err, logs.String())
				}
				// It completed before the kill.
			}
		} else if err := <-done; err != nil {
			t.Fatalf("child: %v\n%s", err, logs.String())
		}
		break
	}
	got := committed(t, c.Out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after %d kills: committed %d lines, want %d; %s", kills, len(got), len(want), firstDiff(got, want))
	}
	t.Logf("%d kills; %d changes committed once each; the children streamed %v", kills, len(got), froms)
}
