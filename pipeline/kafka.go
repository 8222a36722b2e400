package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
)

// startKafka starts the embedded broker, or notes the external brokers,
// and checks the topics the pipeline names.
func (j *Job) startKafka(ctx context.Context) error {
	ks := j.Spec.Kafka
	if ks == nil {
		return nil
	}
	if e := ks.Embedded; e != nil {
		br, err := broker.Start(broker.Options{DataDir: e.Dir, Topics: e.Topics})
		if err != nil {
			return fmt.Errorf("%s: kafka.embedded: %w", e.Pos, err)
		}
		j.closers = append(j.closers, func() error { br.Close(); return nil })
		if r := br.Recovery().String(); r != "" {
			j.brokerRecovery = "the embedded broker in " + e.Dir + " " + r
		}
		j.Brokers = br.Addrs()
		reg, err := j.startEmbeddedRegistry(ctx) // pipeline/format.go
		if err != nil {
			return err
		}
		if err := produceFiles(ctx, j.Brokers, e.Dir, e.Produce, reg); err != nil {
			return err
		}
	} else {
		j.Brokers = ks.Brokers
		j.Security = ks.Security
		if err := j.Security.Validate(); err != nil {
			return securityError(ks, err)
		}
	}
	return checkTopics(ctx, j.Spec, j.Brokers, j.Security)
}

// checkTopics checks that every Kafka topic the pipeline names exists on
// the cluster at brokers: an unknown one is an Errors at the topic's
// position.
func checkTopics(ctx context.Context, s *Spec, brokers []string, sec kafkasec.Security) error {
	ks := s.Kafka
	type ref struct {
		topic, what string
		pos         Pos
	}
	var refs []ref
	if k := s.Source.Kafka; k != nil {
		for i, t := range k.Topics {
			refs = append(refs, ref{t, "source.kafka.topics", k.TopicPos[i]})
		}
	}
	sinks := map[string]*SinkSpec{"sink": s.Sink}
	for name, o := range s.Outputs {
		sinks["outputs."+name] = o.Sink
	}
	for _, what := range sortedKeys(sinks) {
		if k := sinks[what].Kafka; k != nil {
			refs = append(refs, ref{k.Topic, what + ".kafka.topic", k.TopicPos})
		}
	}
	for _, a := range approvalsOf(s) {
		refs = append(refs, ref{a.Topic, "approvals.topic", a.TopicPos})
		if a.Requests != "" {
			refs = append(refs, ref{a.Requests, "approvals.requests", a.RequestsPos})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	secOpts, err := sec.Opts()
	if err != nil {
		return securityError(ks, err)
	}
	// Few retries: this is the job's first contact with the cluster, and
	// a refused authentication or a TLS mismatch should fail fast.
	cl, err := kgo.NewClient(append(secOpts, kgo.SeedBrokers(brokers...), kgo.RequestRetries(3))...)
	if err != nil {
		return fmt.Errorf("%s: kafka: %w", ks.Pos, err)
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(lctx)
	if err != nil {
		return fmt.Errorf("%s: kafka: listing topics: %w", ks.Pos, sec.Explain(err))
	}
	var errs Errors
	for _, r := range refs {
		if !topics.Has(r.topic) {
			errs = append(errs, &Error{Pos: r.pos, Msg: fmt.Sprintf("%s: unknown topic %q: the cluster has %s", r.what, r.topic, listOrNone(topics.Names()))})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
