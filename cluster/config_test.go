package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/scaleout"
)

// Bad configuration fails Run before any work, one line per problem,
// naming the field and what is accepted.
func TestRunValidatesConfig(t *testing.T) {
	job := scaleout.WindowJob("out", 0)
	for _, c := range []struct {
		cfg  cluster.Config
		want []string
	}{
		{cluster.Config{}, []string{"Config.Brokers is empty", "Config.Group", "Config.SourceTopic is empty", "Config.CheckpointBase is empty"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "a b", SourceTopic: "in", CheckpointBase: "/tmp/x"}, []string{`Config.Group "a b"`}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			KeyedTasks: 200, MaxParallelism: 128}, []string{"Config.KeyedTasks 200 with MaxParallelism 128"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			SessionTimeout: -time.Second, Retain: -1}, []string{"Config.SessionTimeout -1s: want 0 (meaning 3s)", "Config.Retain -1"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			Advertise: "10.0.0.5:8081"}, []string{`Config.Advertise "10.0.0.5:8081": want an absolute http or https URL`}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			StaticMembership: true}, []string{"Config.StaticMembership needs Config.Member"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x", Member: "m",
			LeaveOnStop: true}, []string{"Config.LeaveOnStop is only for a static member"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			RebalanceTimeout: time.Second}, []string{"Config.RevokeCheckpointTimeout 2s must be shorter than Config.RebalanceTimeout 1s"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			RebalanceTimeout: -time.Second}, []string{"Config.RebalanceTimeout -1s: want 0 (meaning 1m)"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			TransactionTimeout: time.Minute}, []string{"Config.TransactionTimeout: the transaction time-out 1m0s must be longer than checkpoint interval + session time-out + rebalance time-out (1m4s)"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			RebalanceTimeout: 20 * time.Minute}, []string{"Config.TransactionTimeout: the transaction time-out 10m0s must be longer than checkpoint interval + session time-out + rebalance time-out (20m4s)"}},
		{cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x",
			ExchangeVersion: 3}, []string{"Config.ExchangeVersion 3: want 0 (the newest, 2), 1 (JSON batches, which every build reads) or 2"}},
	} {
		err := cluster.Run(context.Background(), c.cfg, job)
		if err == nil {
			t.Fatalf("config %+v: no error", c.cfg)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("config %+v: error %q does not mention %q", c.cfg, err, w)
			}
		}
	}
	short := job
	short.Sink.TransactionTimeout = 30 * time.Second
	err := cluster.Run(context.Background(), cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x"}, short)
	if err == nil || !strings.Contains(err.Error(), "Job.Sink.TransactionTimeout (0 takes Config.TransactionTimeout): the transaction time-out 30s must be longer than checkpoint interval + session time-out + rebalance time-out (1m4s)") {
		t.Fatalf("a job whose sink's transaction time-out is shorter than a task's move: error %v", err)
	}
	bad := job
	bad.Key = nil
	bad.Sink.Serialize = nil
	err = cluster.Run(context.Background(), cluster.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", SourceTopic: "in", CheckpointBase: "/tmp/x"}, bad)
	if err == nil || !strings.Contains(err.Error(), "Job.Key is nil") || !strings.Contains(err.Error(), "Job.Sink.Serialize is nil") {
		t.Fatalf("a job without a key and a serializer: error %v", err)
	}
}
