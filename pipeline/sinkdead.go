package pipeline

import (
	"strings"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Dead letters of sinks. A record a sink cannot write does not fail the
// job: a value a Postgres column's type cannot hold or no value for a NOT
// NULL column (sink.postgres), a field a Parquet column cannot hold or a
// required one missing (sink.parquet), a record its Kafka format cannot
// encode (pipeline/kafkasink.go), a 4xx answer of an HTTP service
// (sink.http). It becomes the dead letter
//
//	{"sink": OPERATOR, "reason": "...", "value": RECORD}
//
// (Kafka adds "topic", HTTP "status" and "key") sent, with the record's
// timestamp, to the sink's deadLetters output (http, postgres, parquet),
// else the source's deadLetters (sinkDeadLettersOf; not for http), else
// dropped; either way counted and the first reasons logged, as the dead
// letters of steps (P7), so a dropped one makes `weir run` exit with
// status 3. The two-phase sinks reject such a record before it joins a
// transaction (weir.ErrRejected), so it never fails a commit.

// sinkDeadLetters returns the output a sink's own deadLetters key names
// ("": none), where, and the sink's kind.
func sinkDeadLetters(s *SinkSpec) (string, Pos, string) {
	switch {
	case s == nil:
	case s.HTTP != nil:
		return s.HTTP.DeadLetters, s.HTTP.DeadLettersPos, "http"
	case s.Postgres != nil:
		return s.Postgres.DeadLetters, s.Postgres.DeadLettersPos, "postgres"
	case s.Parquet != nil:
		return s.Parquet.DeadLetters, s.Parquet.DeadLettersPos, "parquet"
	}
	return "", Pos{}, ""
}

// rejectingSinkFeeds adds to feed (feeders') the dead letters of the sinks
// of outputs that go to the source's deadLetters: Kafka sinks, and
// Postgres and Parquet sinks without a deadLetters of their own.
func rejectingSinkFeeds(s *Spec, add func(to, from string)) {
	for _, name := range sortedKeys(s.Outputs) {
		sk := s.Outputs[name].Sink
		if sk == nil {
			continue
		}
		if own, _, _ := sinkDeadLetters(sk); own == "" && (sk.Kafka != nil || sk.Postgres != nil || sk.Parquet != nil) {
			add(sinkDeadLettersOf(s, name), name)
		}
	}
}

// checkSinkDeadLetters checks the dead-letter outputs sinks name (feed is
// check's).
func checkSinkDeadLetters(d *dec, s *Spec, feed func(name string, p Pos, what, how string)) {
	sinks := map[string]*SinkSpec{"sink": s.Sink}
	for name, o := range s.Outputs {
		sinks["outputs."+name] = o.Sink
	}
	for _, what := range sortedKeys(sinks) {
		to, pos, kind := sinkDeadLetters(sinks[what])
		if to == "" {
			continue
		}
		if what == "outputs."+to {
			d.errAt(pos, "%s.%s.deadLetters: output %q would feed itself; name another output", what, kind, to)
			continue
		}
		feed(to, pos, what+"."+kind+".deadLetters", "dead")
	}
}

// sinkRejects returns the side-output tag for the records the two-phase
// sink operator name (of output, "sink" for the main one) rejects, and the
// function that, given the sink's stream, makes dead letters of them (an
// operator name-rejected): to own, else the source's deadLetters, else
// dropped, counted.
func (b *builder) sinkRejects(name, output, own string) (*weir.OutputTag[weir.Rejected[Record]], func(weir.Stream[struct{}])) {
	to := own
	if to == "" {
		to = sinkDeadLettersOf(b.j.Spec, output)
	}
	b.j.rejecting = append(b.j.rejecting, name)
	tag := weir.NewOutputTag[weir.Rejected[Record]](name + "-rejected")
	return tag, func(out weir.Stream[struct{}]) {
		op := b.opName("", name+"-rejected")
		b.j.failing = append(b.j.failing, op)
		dead := weir.Transform(weir.SideOutput(out, tag), op, func() runtime.OneInputOperator[weir.Rejected[Record], Record] {
			return &sinkRejectedOp{sink: name, routed: to != ""}
		}).UID(op)
		if to != "" {
			b.output(to, dead)
		}
	}
}

// sinkRejectedOp turns the records a two-phase sink rejected into its dead
// letters (stepDeadLetters: counted, the first logged; sent on when
// routed).
type sinkRejectedOp struct {
	runtime.Base[Record]
	sink   string
	routed bool // false: no dead-letter output, dropped
	dead   stepDeadLetters
}

func (o *sinkRejectedOp) Open(ctx *runtime.Context, out runtime.Output[Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, nil, "")
	o.dead.step = o.sink
	if o.routed {
		o.dead.out = out
	}
	return nil
}

func (o *sinkRejectedOp) ProcessRecord(r runtime.Record[weir.Rejected[Record]]) error {
	reason := "sink " + o.sink + ": " + strings.TrimPrefix(r.Value.Reason, weir.ErrRejected.Error()+": ")
	o.dead.letter(Record{"sink": o.sink, "reason": reason, "value": r.Value.Value}, r.Timestamp, reason)
	return nil
}
