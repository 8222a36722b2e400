package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/kafkasec"
)

// tlsBrokers are the two child brokers (childbroker.go) of
// KafkaKeyedCountTLS, one over plaintext and one over SASL_SSL (TLS with
// SCRAM-SHA-512), holding the same events; kept between calls with the
// same n and keys.
var tlsBrokers struct {
	mu            sync.Mutex
	plain, secure *childBroker
	n             int64
	keys          int
}

const benchPassword = "bench-password"

// produceBatch is how many records produceEvents puts in a batch (below
// kgo's 10,000 buffered records across kafkaPartitions partitions).
const produceBatch = 2000

// kafkaTLSEvents returns the plaintext and the SASL_SSL child brokers,
// each with n events over nKeys keys (kafkaEvents' sequence).
func kafkaTLSEvents(n int64, nKeys int) (plain, secure *childBroker, err error) {
	d := &tlsBrokers
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plain != nil && d.n == n && d.keys == nKeys {
		return d.plain, d.secure, nil
	}
	closeTLSBrokers()
	if d.plain, err = startChildBroker("plaintext"); err != nil {
		return nil, nil, err
	}
	if d.secure, err = startChildBroker("sasl_ssl"); err != nil {
		closeTLSBrokers()
		return nil, nil, err
	}
	for _, c := range []*childBroker{d.plain, d.secure} {
		if err := produceEvents(c.addrs, c.sec, n, nKeys, ShapeBare); err != nil {
			closeTLSBrokers()
			return nil, nil, err
		}
	}
	d.n, d.keys = n, nKeys
	return d.plain, d.secure, nil
}

// closeTLSBrokers stops the child brokers (tlsBrokers.mu held).
func closeTLSBrokers() {
	d := &tlsBrokers
	for _, c := range []**childBroker{&d.plain, &d.secure} {
		if *c != nil {
			(*c).close()
			*c = nil
		}
	}
}

// produceEvents writes n events over nKeys keys (eventAt's sequence) in
// shape (kafkaRecord) round-robin to kafkaTopic's partitions of the broker
// at addrs, through a client with sec, in batches of produceBatch records per partition
// whatever the speed of the connection: a flush after each produceBatch
// per partition, and a linger long enough never to cut a batch before.
// Two brokers so filled hold the same batches, so a reader's work (CRC,
// decompression, allocation per batch) is the same on both; batches cut
// by a linger time would depend on each broker's round trip.
func produceEvents(addrs []string, sec kafkasec.Security, n int64, nKeys int, shape Shape) error {
	so, err := sec.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(so, kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Minute))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := Keys(nKeys)
	ctx := context.Background()
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		if i > 0 && i%(produceBatch*kafkaPartitions) == 0 {
			if err := cl.Flush(ctx); err != nil {
				return err
			}
		}
		rec, err := kafkaRecord(keys, i, shape)
		if err != nil {
			return err
		}
		cl.Produce(ctx, rec,
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

// KafkaKeyedCountTLS is KafkaKeyedCount's engine side twice, on the same
// events: over SASL_SSL (TLS with SCRAM-SHA-512, kafkasec) as the
// "engine" and over plaintext as the "loop", so Ratio is plaintext's
// throughput over SASL_SSL's (1.15 means TLS costs 15%). Each broker runs
// in a child process on the same machine (loopback), so the figure is the
// cost of encryption and authentication in the client and the broker, not
// of a network, and the CPU of each is measured apart: Engine/LoopCPU is
// the client's (this process), Engine/LoopBrokerCPU the broker's (the
// child's). The sides alternate, each going first in every other round,
// Reps rounds; each figure is the median of its side's runs.
func KafkaKeyedCountTLS(n int64, nKeys, par int) (Result, error) {
	plain, secure, err := kafkaTLSEvents(n, nKeys)
	if err != nil {
		return Result{}, err
	}
	var scpu, pcpu, sbcpu, pbcpu []time.Duration
	count := func(c *childBroker, cpu, bcpu *[]time.Duration) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: discard})
			stop := make(chan struct{})
			close(stop)
			src := kafka.NewSource(kafka.Options{Brokers: c.addrs, Security: c.sec, Topics: []string{kafkaTopic}, Stop: stop}, kafka.JSON[Event]())
			var total int64
			countPerKey(weir.FromSource(env, "events", src, monotone[Event]()), &total)
			settle()
			b0, err := c.cpu()
			if err != nil {
				return 0, err
			}
			c0 := cpuNanos()
			start := time.Now()
			err = env.Execute(context.Background())
			t := time.Since(start)
			*cpu = append(*cpu, time.Duration(cpuNanos()-c0))
			b1, berr := c.cpu()
			*bcpu = append(*bcpu, b1-b0)
			if err == nil && total != n {
				return 0, fmt.Errorf("kafka keyed count over %s: %d outputs, want %d", c.sec, total, n)
			}
			return t, errors.Join(err, berr)
		}
	}
	s, p, paired, err := alternate(count(secure, &scpu, &sbcpu), count(plain, &pcpu, &pbcpu))
	if err != nil {
		return Result{}, err
	}
	r := result(fmt.Sprintf("Kafka JSON keyed count, SASL_SSL (engine) vs plaintext (loop), brokers in child processes (parallelism %d)", par), n, s, p, 0, par)
	perRec := func(d []time.Duration) float64 { return float64(median(d)) / float64(n) }
	r.EngineCPUNsPerRecord, r.LoopCPUNsPerRecord = perRec(scpu), perRec(pcpu)
	r.EngineBrokerCPUNsPerRecord, r.LoopBrokerCPUNsPerRecord = perRec(sbcpu), perRec(pbcpu)
	r.PairedRatio = paired
	return r, nil
}

// alternate is sides with the order swapped every other round (a first
// run after a GC and a second after the other side's garbage are not
// alike on a loaded machine): Reps runs of each. It returns the median
// time of each side, and the median over rounds of a's time over b's in
// the same round (the two runs of a round, back to back, see much the
// same load).
func alternate(a, b func() (time.Duration, error)) (time.Duration, time.Duration, float64, error) {
	var as, bs []time.Duration
	var ratios []float64
	for i := range max(Reps, 1) {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		x, err := first()
		if err != nil {
			return 0, 0, 0, err
		}
		y, err := second()
		if err != nil {
			return 0, 0, 0, err
		}
		if i%2 == 1 {
			x, y = y, x
		}
		as, bs = append(as, x), append(bs, y)
		ratios = append(ratios, float64(x)/float64(y))
	}
	slices.Sort(ratios)
	return median(as), median(bs), ratios[len(ratios)/2], nil
}
