package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/kafkasec"
)

// kafkaSecureData is a second in-process broker holding the same events
// as kafkaData's, served over TLS with SCRAM-SHA-512 (SASL_SSL).
var kafkaSecureData struct {
	mu   sync.Mutex
	b    *broker.Broker
	sec  kafkasec.Security
	dir  string
	n    int64
	keys int
}

const benchPassword = "bench-password"

// kafkaSecureEvents returns the SASL_SSL broker with n events over nKeys
// keys (the same sequence as kafkaEvents), and the Security to reach it.
func kafkaSecureEvents(n int64, nKeys int) (*broker.Broker, kafkasec.Security, error) {
	d := &kafkaSecureData
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.b != nil && d.n == n && d.keys == nKeys {
		return d.b, d.sec, nil
	}
	closeSecure()
	ca, err := broker.SelfSignedCA("bench CA")
	if err != nil {
		return nil, kafkasec.Security{}, err
	}
	dir, err := os.MkdirTemp("", "weir-bench-tls")
	if err != nil {
		return nil, kafkasec.Security{}, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCAFile(caFile); err != nil {
		os.RemoveAll(dir)
		return nil, kafkasec.Security{}, err
	}
	srv, err := ca.ServerTLS(nil, false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, kafkasec.Security{}, err
	}
	b, err := broker.Start(broker.Options{Topics: map[string]int32{kafkaTopic: kafkaPartitions}, TLS: srv,
		Users: []broker.User{{Mechanism: kafkasec.ScramSHA512, Name: "bench", Password: benchPassword}}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, kafkasec.Security{}, err
	}
	sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile},
		SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "bench", Password: benchPassword}}
	d.b, d.sec, d.dir, d.n, d.keys = b, sec, dir, n, nKeys
	if err := produceEvents(b, sec, n, nKeys); err != nil {
		closeSecure()
		return nil, kafkasec.Security{}, err
	}
	return b, sec, nil
}

// closeSecure closes the SASL_SSL broker (d.mu held or at exit).
func closeSecure() {
	d := &kafkaSecureData
	if d.b != nil {
		d.b.Close()
		os.RemoveAll(d.dir)
		d.b = nil
	}
}

// produceEvents writes n events over nKeys keys (eventAt's sequence)
// round-robin to kafkaTopic's partitions of b, through a client with sec.
func produceEvents(b *broker.Broker, sec kafkasec.Security, n int64, nKeys int) error {
	so, err := sec.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(so, kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := Keys(nKeys)
	ctx := context.Background()
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		v, _ := gojson.Marshal(eventAt(keys, i))
		cl.Produce(ctx, &kgo.Record{Topic: kafkaTopic, Partition: int32(i % kafkaPartitions), Value: v, Timestamp: time.UnixMilli(i)},
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
// throughput over SASL_SSL's (1.15 means TLS costs 15%). Both brokers are
// in-process on loopback: the figure is the cost of encryption and
// authentication in the client and the broker, not of a network.
func KafkaKeyedCountTLS(n int64, nKeys, par int) (Result, error) {
	plain, err := kafkaEvents(n, nKeys)
	if err != nil {
		return Result{}, err
	}
	secure, sec, err := kafkaSecureEvents(n, nKeys)
	if err != nil {
		return Result{}, err
	}
	var scpu, pcpu []time.Duration
	count := func(addrs []string, sec kafkasec.Security, cpu *[]time.Duration) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: discard})
			stop := make(chan struct{})
			close(stop)
			src := kafka.NewSource(kafka.Options{Brokers: addrs, Security: sec, Topics: []string{kafkaTopic}, Stop: stop}, kafka.JSON[Event]())
			var total int64
			countPerKey(weir.FromSource(env, "events", src, monotone[Event]()), &total)
			c0 := cpuNanos()
			t, err := run(env)
			*cpu = append(*cpu, time.Duration(cpuNanos()-c0))
			if err == nil && total != n {
				return 0, fmt.Errorf("kafka keyed count over %s: %d outputs, want %d", sec, total, n)
			}
			return t, err
		}
	}
	s, p, err := sides(count(secure.Addrs(), sec, &scpu), count(plain.Addrs(), kafkasec.Security{}, &pcpu))
	if err != nil {
		return Result{}, err
	}
	r := result(fmt.Sprintf("Kafka JSON keyed count, SASL_SSL (engine) vs plaintext (loop) (parallelism %d)", par), n, s, p, 0, par)
	r.EngineCPUNsPerRecord = float64(median(scpu)) / float64(n)
	r.LoopCPUNsPerRecord = float64(median(pcpu)) / float64(n)
	return r, nil
}
