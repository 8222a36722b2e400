package broker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kill -9 tests run the broker in a child process: the test binary
// re-executed with -test.run=TestHelperBrokerProcess and these variables.
const (
	helperDirEnv  = "WEIR_BROKER_HELPER_DIR"
	helperSyncEnv = "WEIR_BROKER_HELPER_SYNC"
)

// TestHelperBrokerProcess is not a test: in a child process started by
// startBrokerProcess it runs a broker on the data directory in
// $WEIR_BROKER_HELPER_DIR, prints "addr <host:port>" and serves until its
// stdin closes or it is killed.
func TestHelperBrokerProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for the kill -9 tests")
	}
	sync, _ := strconv.ParseBool(os.Getenv(helperSyncEnv))
	b, err := Start(Options{DataDir: dir, SyncWrites: sync, Topics: map[string]int32{"t9": 1}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("addr %s\n", b.Addr())
	io.Copy(io.Discard, os.Stdin) // the parent holds stdin open
	b.Close()
	os.Exit(0)
}

// brokerProcess is a broker running in a child process.
type brokerProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string
	done  chan error
}

// startBrokerProcess starts a broker process on dir and waits (up to a
// generous deadline) until it prints its address.
func startBrokerProcess(t *testing.T, dir string, sync bool) *brokerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperSyncEnv+"="+strconv.FormatBool(sync))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProcess{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
				addrc <- a
				break
			}
		}
		io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { p.kill(t) })
	select {
	case p.addr = <-addrc:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("broker process exited before listening: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("broker process did not print its address within 2 minutes")
	}
	return p
}

// kill sends SIGKILL to the broker process and waits for it to die. It
// does nothing if the process is gone already.
func (p *brokerProcess) kill(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.stdin.Close()
}

// stop stops the broker process cleanly (its broker's Close runs) and
// waits for it to exit.
func (p *brokerProcess) stop(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("broker process: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("broker process did not exit within 2 minutes of its stdin closing")
	}
}

// txnProducer returns a transactional producer with the given id.
func txnProducer(t *testing.T, addr, txid string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(txid), kgo.DefaultProduceTopic("t9"),
		kgo.RecordRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// produceTxn produces values in one transaction of cl and commits it if
// commit, or leaves it open otherwise.
func produceTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if !commit {
		return
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit %v: %v", values, err)
	}
}

// producerID returns cl's producer id and epoch.
func producerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pid, epoch
}

// endTxnByID sends EndTxn(commit) for txid with the given producer id and
// epoch and returns the broker's error.
func endTxnByID(t *testing.T, addr, txid string, pid int64, epoch int16) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txid, pid, epoch, true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// readCommitted reads t9 with read_committed isolation until it has seen
// the value last (or a generous deadline passes) and returns the values
// read, in order.
func readCommitted(t *testing.T, addr, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("t9"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read_committed: %q not seen within 30 s; read %q", last, got)
			return got
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) > 0 && got[len(got)-1] == last {
			return got
		}
	}
}

// readLog reads t9 with read_uncommitted isolation, control records
// included, until offset end-1 and returns each record as "offset=value" or
// "offset=abort"/"offset=commit" for control records.
func readLog(t *testing.T, addr string, end int64) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("t9"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_uncommitted: offset %d not reached within 30 s; read %q", end-1, got)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if r.Attrs.IsControl() {
				v = "commit"
				if len(r.Key) >= 4 && r.Key[2] == 0 && r.Key[3] == 0 {
					v = "abort"
				}
			}
			got = append(got, fmt.Sprintf("%d=%s", r.Offset, v))
			done = done || r.Offset >= end-1
		})
		if done {
			return got
		}
	}
}

// TestKill9AbortsOpenTransaction is issue 12: a transaction left open by
// a producer when the broker is killed with SIGKILL must be aborted on
// restart, and the same transactional id must then commit visibly (B2).
func TestKill9AbortsOpenTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns broker processes")
	}
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			p := startBrokerProcess(t, dir, sync)
			x := txnProducer(t, p.addr, "x")
			produceTxn(t, x, true, "c1")
			// A clean restart in between: the broker then remembers
			// that x's last transaction committed.
			p.stop(t)
			x.Close()
			p = startBrokerProcess(t, dir, sync)
			x = txnProducer(t, p.addr, "x")
			produceTxn(t, x, false, "open")
			pid, epoch := producerID(t, x)
			p.kill(t)
			x.Close()

			p = startBrokerProcess(t, dir, sync)
			// A commit of the aborted transaction by producer id and
			// epoch (as weir's exactly-once sink commits a
			// pre-committed transaction) must be refused.
			if err := endTxnByID(t, p.addr, "x", pid, epoch); err == nil {
				t.Error("committing the aborted transaction by producer id and epoch succeeded, want a fencing error")
			}
			x = txnProducer(t, p.addr, "x")
			produceTxn(t, x, true, "c2")
			if got, want := readCommitted(t, p.addr, "c2"), []string{"c1", "c2"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read_committed after kill -9 and a commit: %q, want %q", got, want)
			}
			produceTxn(t, x, true, "c3")
			if got, want := readCommitted(t, p.addr, "c3"), []string{"c1", "c2", "c3"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read_committed after a further commit: %q, want %q", got, want)
			}
			// c1, its commit, the open record, the abort marker, c2,
			// its commit, c3, its commit.
			log := readLog(t, p.addr, 8)
			if want := "[0=c1 1=commit 2=open 3=abort 4=c2 5=commit 6=c3 7=commit]"; fmt.Sprint(log) != want {
				t.Errorf("log after restart: %v, want %s", log, want)
			}

			// The repair is on disk: after another kill -9 the same
			// transactions are visible.
			p.kill(t)
			x.Close()
			p = startBrokerProcess(t, dir, sync)
			if got, want := readCommitted(t, p.addr, "c3"), []string{"c1", "c2", "c3"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read_committed after a second kill -9: %q, want %q", got, want)
			}
		})
	}
}

// TestKill9KeepsCommitsRetryable: a commit sent again by producer id and
// epoch after the broker was killed with SIGKILL succeeds, as in Kafka,
// when that transaction, the id's last, had committed (weir's exactly-once
// sink commits the transactions of the checkpoint it restores so), and is
// refused when it had aborted; the records read committed are the same.
func TestKill9KeepsCommitsRetryable(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns broker processes")
	}
	dir := t.TempDir()
	p := startBrokerProcess(t, dir, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ended := func(txid, value string, commit kgo.TransactionEndTry) (int64, int16) {
		cl := txnProducer(t, p.addr, txid)
		defer cl.Close()
		produceTxn(t, cl, false, value)
		pid, epoch := producerID(t, cl)
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
		return pid, epoch
	}
	xpid, xepoch := ended("x", "c1", kgo.TryCommit)
	ypid, yepoch := ended("y", "a1", kgo.TryAbort)
	p.kill(t)

	for round := range 2 { // the repaired log survives a second kill
		p = startBrokerProcess(t, dir, false)
		if err := endTxnByID(t, p.addr, "x", xpid, xepoch); err != nil {
			t.Errorf("round %d: a commit of the committed transaction again: %v, want success (Kafka's retry)", round, err)
		}
		if err := endTxnByID(t, p.addr, "y", ypid, yepoch); err == nil {
			t.Errorf("round %d: a commit of the aborted transaction succeeded, want a refusal", round)
		}
		if got := readCommitted(t, p.addr, "c1"); fmt.Sprint(got) != "[c1]" {
			t.Errorf("round %d: read_committed %q, want [c1]", round, got)
		}
		p.kill(t)
	}
}
