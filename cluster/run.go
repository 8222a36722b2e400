package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
)

// Run runs this process's share of the clustered job j until ctx is
// cancelled (it then hands its tasks over, each with a checkpoint, leaves
// the group, unless a static member without Config.LeaveOnStop, and
// returns ctx's error) or, with Config.Bounded, until every task of the
// job has finished (it returns nil). A static member fenced by another
// process with its Config.Member returns a *FencedMemberError (M7). Start it with the same
// Config and Job in every process; processes may come and go at any time.
//
// Before joining, Run checks cfg and j (one error naming each problem),
// reads the source topic's partition count, and creates the exchange and
// tasks topics if they are missing (an existing one with another partition
// count is an error).
func Run[IN, MID any, K comparable, OUT any](ctx context.Context, cfg Config, j Job[IN, MID, K, OUT]) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := j.validate(); err != nil {
		return err
	}
	if t := j.Sink.TransactionTimeout; t > 0 {
		if err := CheckTransactionTimeout(t, cfg.CheckpointInterval, cfg.SessionTimeout, cfg.RebalanceTimeout); err != nil {
			return fmt.Errorf("cluster: Job.Sink.TransactionTimeout (0 takes Config.TransactionTimeout): %w", err)
		}
	}
	sources, err := prepareTopics(ctx, cfg)
	if err != nil {
		return err
	}
	specs := Tasks(cfg, sources)
	var stop chan struct{}
	if cfg.Bounded {
		stop = make(chan struct{})
		close(stop)
	}
	out := make([]taskSpec, len(specs))
	for i, id := range specs {
		out[i].id = id
		if i < sources {
			p := i
			out[i].build = func() (*weir.Environment, string, error) {
				env, restored, err := taskEnv(cfg, id)
				if err != nil {
					return nil, "", err
				}
				j.buildSourceTask(env, cfg, p, stop)
				return env, restored, nil
			}
			continue
		}
		q := i - sources
		out[i].build = func() (*weir.Environment, string, error) {
			env, restored, err := taskEnv(cfg, id)
			if err != nil {
				return nil, "", err
			}
			j.buildKeyedTask(env, cfg, q, sources)
			return env, restored, nil
		}
	}
	m := newMember(context.WithoutCancel(ctx), cfg, out)
	return m.join(ctx)
}

// Tasks returns the job's task ids in the order of the tasks topic's
// partitions: "source-0" .. "source-<sources-1>", then "keyed-0" ..
// "keyed-<KeyedTasks-1>".
func Tasks(cfg Config, sources int) []string {
	if cfg.KeyedTasks == 0 {
		cfg.KeyedTasks = 4
	}
	ids := make([]string, 0, sources+cfg.KeyedTasks)
	for p := range sources {
		ids = append(ids, sourceTaskID(p))
	}
	for q := range cfg.KeyedTasks {
		ids = append(ids, keyedTaskID(q))
	}
	return ids
}

// prepareTopics returns the source topic's partition count and makes sure
// the exchange topic (KeyedTasks partitions) and the tasks topic (one
// partition per task) exist.
func prepareTopics(ctx context.Context, cfg Config) (int, error) {
	cl, err := kgo.NewClient(cfg.plainClientOptions()...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(rctx, cfg.SourceTopic)
	if err != nil {
		return 0, fmt.Errorf("cluster: metadata of %q from %v: %w (are the brokers reachable?)", cfg.SourceTopic, cfg.Brokers, err)
	}
	td, ok := md.Topics[cfg.SourceTopic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, fmt.Errorf("cluster: source topic %q does not exist on %v; create it first or fix Config.SourceTopic", cfg.SourceTopic, cfg.Brokers)
	}
	sources := len(td.Partitions)
	for _, t := range []struct {
		name  string
		parts int
	}{{cfg.ExchangeTopic(), cfg.KeyedTasks}, {cfg.TasksTopic(), sources + cfg.KeyedTasks}} {
		if err := ensureTopic(rctx, adm, t.name, t.parts); err != nil {
			return 0, err
		}
	}
	return sources, nil
}

func ensureTopic(ctx context.Context, adm *kadm.Client, name string, parts int) error {
	resp, err := adm.CreateTopic(ctx, int32(parts), -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("cluster: create topic %q: %w", name, err)
	}
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return fmt.Errorf("cluster: metadata of %q: %w", name, err)
	}
	if n := len(md.Topics[name].Partitions); n != parts {
		return fmt.Errorf("cluster: topic %q has %d partitions, want %d: it belongs to a job with another Config.KeyedTasks "+
			"or another source topic; use another Config.Group, or delete the topic and the job's checkpoints", name, n, parts)
	}
	return nil
}
