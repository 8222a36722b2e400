package sim

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestBrokerNetRestart: a restart resets the connections open (their
// reads say ECONNRESET, as TCP's do), refuses new ones with ECONNREFUSED
// during a refused outage, holds them during a hanging one until the
// broker is back, and lets them through once it is.
func TestBrokerNetRestart(t *testing.T) {
	vn := &kfake.VirtualNetwork{}
	ln, err := vn.Listen("tcp", "localhost:9")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the broker: accept and keep every connection open
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c)
		}
	}()
	var b brokerNet
	ctx := context.Background()
	c, err := b.dial(ctx, vn, "tcp", "localhost:9")
	if err != nil {
		t.Fatal(err)
	}
	b.restart(time.Hour, restartRefused)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a connection the restart reset: %v, want ECONNRESET", err)
	}
	_, err = b.dial(ctx, vn, "tcp", "localhost:9")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during a refused outage: %v, want a dial error ECONNREFUSED", err)
	}
	b.recover(nil)
	c, err = b.dial(ctx, vn, "tcp", "localhost:9")
	if err != nil {
		t.Fatalf("dial after the outage: %v", err)
	}
	c.Close()

	b.restart(time.Hour, restartHang)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.dial(short, vn, "tcp", "localhost:9"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial during a hanging outage, its context ending: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		c, err := b.dial(ctx, vn, "tcp", "localhost:9")
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	b.recover(nil)
	if err := <-got; err != nil {
		t.Fatalf("a dial held by a hanging outage, once the broker is back: %v", err)
	}
}

// restartSeeds bounds the seeds whose Kafka form with broker restarts every
// `go test` runs.
const restartSeeds = 60

// TestKafkaFormRidesBrokerRestarts runs the Kafka form of the seeds
// 1..restartSeeds that draw a broker restart: S13-S15 must hold, and the
// restarts must strike (which request each strikes is logged).
func TestKafkaFormRidesBrokerRestarts(t *testing.T) {
	var seeds []uint64
	for seed := uint64(1); seed <= restartSeeds; seed++ {
		if s := Generate(seed); s.Kafka != nil && len(generateKafkaRestarts(seed)) > 0 {
			seeds = append(seeds, seed)
		}
	}
	struck := map[string]int{}
	n := 0
	for _, seed := range seeds {
		res, err := Run(context.Background(), seed, Options{onlyKafka: true})
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Failure; f != nil {
			t.Errorf("seed %d (%s; faults %s): %v %q\nreplay: %s", res.Seed, res.Shape, FaultSchedule(res.Faults), f, f.Records, res.Replay)
		}
		for _, f := range res.Faults {
			if f.Kind == FaultBrokerRestart && f.Struck {
				struck[f.Request]++
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no broker restart struck in %d Kafka seeds that draw one", len(seeds))
	}
	t.Logf("%d Kafka seeds with restarts: %d struck, by request %v", len(seeds), n, struck)
}

// TestMeasureBrokerRestarts prints how often broker restarts strike, by
// request kind, and what the seeds that draw them do, over the Kafka
// form of seeds 1..WEIR_SIM_RESTART_SEEDS and the clustered form of the
// first WEIR_SIM_RESTART_CLUSTERED clustered seeds that draw one. It runs
// only with WEIR_SIM_RESTART_SEEDS set.
func TestMeasureBrokerRestarts(t *testing.T) {
	if os.Getenv("WEIR_SIM_RESTART_SEEDS") == "" {
		t.Skip("set WEIR_SIM_RESTART_SEEDS=N [WEIR_SIM_RESTART_CLUSTERED=K] to measure")
	}
	n, err := strconv.Atoi(os.Getenv("WEIR_SIM_RESTART_SEEDS"))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := strconv.Atoi(os.Getenv("WEIR_SIM_RESTART_CLUSTERED"))
	tally := func(form string, run func(seed uint64) (*Result, error), seeds []uint64) {
		drawn, struck, ridden := map[string]int{}, map[string]int{}, map[string]int{}
		var failed []uint64
		for _, seed := range seeds {
			res, err := run(seed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != nil {
				failed = append(failed, seed)
				t.Logf("%s seed %d: %v %q (faults %s)", form, seed, res.Failure, res.Failure.Records, FaultSchedule(res.Faults))
			}
			for _, f := range res.Faults {
				if f.Kind == FaultBrokerRestart {
					drawn[f.Request]++
					if f.Struck {
						struck[f.Request]++
					}
					if f.RiddenOut {
						ridden[f.Request]++
					} else if f.Struck && form == "kafka" {
						t.Logf("%s seed %d: a restart at %s was not ridden out (faults %s)", form, seed, f.Request, FaultSchedule(res.Faults))
					}
				}
			}
		}
		var kinds []string
		for r := range drawn {
			kinds = append(kinds, r)
		}
		sort.Strings(kinds)
		line := ""
		for _, r := range kinds {
			line += " " + r + " " + strconv.Itoa(ridden[r]) + "/" + strconv.Itoa(struck[r]) + "/" + strconv.Itoa(drawn[r])
		}
		t.Logf("%s: %d seeds with restarts, failed %v; ridden out (Kafka form only)/struck/drawn by request:%s", form, len(seeds), failed, line)
	}
	var kseeds []uint64
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if s := Generate(seed); s.Kafka != nil && len(generateKafkaRestarts(seed)) > 0 {
			kseeds = append(kseeds, seed)
		}
	}
	tally("kafka", func(seed uint64) (*Result, error) {
		return Run(context.Background(), seed, Options{onlyKafka: true})
	}, kseeds)
	var cseeds []uint64
	for seed := uint64(1); len(cseeds) < k; seed++ {
		if s := Generate(seed); s.Cluster != nil && len(generateClusterRestarts(seed)) > 0 {
			cseeds = append(cseeds, seed)
		}
	}
	tally("clustered", func(seed uint64) (*Result, error) {
		return Run(context.Background(), seed, Options{onlyCluster: true})
	}, cseeds)
}
