package kafka

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// An exactly-once sink opening its producers (InitProducerID, which fences
// what an earlier run left open) ends with the job: a cancelled job does
// not wait out FlushTimeout for a broker that does not answer. The open
// used a context of its own, and a clustered member stopping its lost
// tasks after a broker restart waited past its run's limit (the
// simulator's seed 300306).
func TestExactlyOnceSinkOpenEndsWithTheJob(t *testing.T) {
	b := startBroker(t, map[string]int32{"out": 1})
	c := b.Cluster()
	hit := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	c.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case hit <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	s := weir.FromSlice(env, "in", []string{"a", "b"}, watermark.ForMonotonous[string]().
		WithTimestamp(func(string, int64) (int64, bool) { return 1, true }))
	ExactlyOnceSink(s, "out", SinkOptions[string]{Brokers: b.Addrs(), Topic: "out", Serialize: SerializeString(nil),
		TransactionalIDPrefix: "cancel", FlushTimeout: 10 * time.Minute,
		ClientOptions: []kgo.Opt{kgo.RequestTimeoutOverhead(10 * time.Minute)}})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hit:
	case <-testCtx(t).Done():
		t.Fatal("the sink never asked for a producer id")
	}
	job.Cancel()
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("job ended with %v", err)
		}
	case <-time.After(20 * time.Second): // lint:allow-time a bound on a hang, far above the expected end
		t.Fatal("the cancelled job still waits for the sink's InitProducerID (FlushTimeout 10m)")
	}
	once.Do(func() { close(release) })
}
