package kafka

import (
	"context"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// A savepoint whose Kafka position is negative (corrupt or edited) is
// rejected at restore with an error naming the offset, the topic and the
// partition, not later as a topic that changed.
func TestRestoreRejectsInvalidOffset(t *testing.T) {
	b := startBroker(t, map[string]int32{"neg": 1})
	for _, c := range []struct {
		item, want string
	}{
		{`{"topic":"neg","partition":0,"offset":-5}`, `offset -5 for topic "neg" partition 0`},
		{`{"topic":"neg","partition":-1,"offset":3}`, `partition -1 of topic "neg"`},
	} {
		sp := t.TempDir() + "/sp"
		snap := &checkpoint.Snapshot{ID: 7, Kind: checkpoint.KindSavepoint, MaxParallelism: 128,
			Operators: []*checkpoint.OperatorState{{UID: "kafka", Name: "kafka", Parallelism: 1,
				Subtasks: []*checkpoint.SubtaskState{{Lists: map[string]*checkpoint.ListState{
					unionList: {Mode: checkpoint.Union, Items: []checkpoint.Blob{checkpoint.Bytes(c.item)}}}}}}}}
		if _, err := checkpoint.Write(sp, snap); err != nil {
			t.Fatal(err)
		}
		env := weir.NewEnvironment(weir.Config{Logger: quiet, Checkpoint: runtime.CheckpointConfig{RestoreFrom: sp, AllowNonRestoredState: true}})
		src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"neg"}}, String())
		collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[string]()).UID("kafka"))
		err := env.Execute(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "corrupt or was edited") {
			t.Fatalf("restore of %s: %v, want an error containing %q", c.item, err, c.want)
		}
	}
}

// Options are checked as given: negative sizes and durations, unknown
// policies and missing required fields are reported before any reader is
// created, each naming the field.
func TestOptionsValidate(t *testing.T) {
	ok := Options{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}}
	cases := []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"valid", func(*Options) {}, ""},
		{"no brokers", func(o *Options) { o.Brokers = nil }, "Options.Brokers is empty"},
		{"no topics", func(o *Options) { o.Topics = nil }, "no topics"},
		{"bad pattern", func(o *Options) { o.TopicPattern = "(" }, "Options.TopicPattern"},
		{"records per poll", func(o *Options) { o.RecordsPerPoll = -1 }, "Options.RecordsPerPoll -1: want 0"},
		{"fetch max wait", func(o *Options) { o.FetchMaxWait = -1 }, "Options.FetchMaxWait"},
		{"fetch max bytes", func(o *Options) { o.FetchMaxBytes = -1 }, "Options.FetchMaxBytes -1"},
		{"partition max bytes", func(o *Options) { o.PartitionMaxBytes = -1 }, "Options.PartitionMaxBytes -1"},
		{"buffered fetches", func(o *Options) { o.BufferedFetches = -2 }, "Options.BufferedFetches -2"},
		{"discovery", func(o *Options) { o.DiscoveryInterval = -1 }, "Options.DiscoveryInterval"},
		{"request timeout", func(o *Options) { o.RequestTimeout = -1 }, "Options.RequestTimeout"},
		{"catch-up", func(o *Options) { o.CatchUp = 9 }, "Options.CatchUp 9"},
		{"live", func(o *Options) { o.Live = 9 }, "Options.Live 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.edit(&o)
			err := NewSource(o, String()).Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, c.want)
			}
			if _, err := NewSource(o, String()).CreateReader(runtime.SourceContext{Name: "k", Parallelism: 1}); err == nil {
				t.Fatal("CreateReader accepted the options")
			}
		})
	}
	if err := NewSource(ok, Deserializer[string](nil)).Validate(); err == nil {
		t.Fatal("a nil deserializer was accepted")
	}
}

func TestSinkOptionsValidate(t *testing.T) {
	ser := SerializeString(nil)
	cases := []struct {
		name string
		o    SinkOptions[string]
		want string
	}{
		{"valid", SinkOptions[string]{Brokers: []string{"x:1"}, Serialize: ser}, ""},
		{"no brokers", SinkOptions[string]{Serialize: ser}, "SinkOptions.Brokers is empty"},
		{"no serialize", SinkOptions[string]{Brokers: []string{"x:1"}}, "SinkOptions.Serialize is nil"},
		{"txn timeout", SinkOptions[string]{Brokers: []string{"x:1"}, Serialize: ser, TransactionTimeout: -1}, "SinkOptions.TransactionTimeout"},
		{"flush timeout", SinkOptions[string]{Brokers: []string{"x:1"}, Serialize: ser, FlushTimeout: -1}, "SinkOptions.FlushTimeout"},
	}
	for _, c := range cases {
		err := (&sinkOp[string]{opts: c.o}).Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Validate: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestExactlyOnceSinkOptionsCheckedAtStart: bad ExactlyOnceSink options
// fail Start, when the job is built and before any task runs (they were
// found only when the sink's subtask opened, with the job running).
func TestExactlyOnceSinkOptionsCheckedAtStart(t *testing.T) {
	ser := SerializeString(nil)
	for name, c := range map[string]struct {
		o    SinkOptions[string]
		want string
	}{
		"no prefix":     {SinkOptions[string]{Brokers: []string{"127.0.0.1:1"}, Serialize: ser}, "TransactionalIDPrefix"},
		"flush timeout": {SinkOptions[string]{Brokers: []string{"127.0.0.1:1"}, Serialize: ser, TransactionalIDPrefix: "p", FlushTimeout: -1}, "SinkOptions.FlushTimeout"},
		"pool size":     {SinkOptions[string]{Brokers: []string{"127.0.0.1:1"}, Serialize: ser, TransactionalIDPrefix: "p", TransactionalIDPoolSize: 2}, "SinkOptions.TransactionalIDPoolSize 2"},
	} {
		t.Run(name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.Generate(env, "src", 10, func(i int64) weir.Record[string] {
				return weir.Record[string]{Value: "v", Timestamp: i}
			}, watermark.NoWatermarks[string]())
			ExactlyOnceSink(src, "out", c.o)
			job, err := env.Start(context.Background())
			if job != nil {
				job.Cancel()
				job.Wait()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start: %v, want an error naming %s", err, c.want)
			}
		})
	}
}
