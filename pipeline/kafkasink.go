package pipeline

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
)

// Dead letters of Kafka sinks. A Kafka sink's records are encoded by an
// operator of their own, <sink>-encode, chained before the sink: a record
// that its format cannot write (an Avro field missing without a default, a
// number where the Protobuf message has a string, a JSON Schema validation
// that fails, a key that does not fit keyFormat) does not fail the job: it
// becomes the dead letter
//
//	{"sink": SINK, "topic": TOPIC, "reason": "...", "value": RECORD}
//
// sent, with the record's timestamp, to the source's deadLetters output
// (sinkDeadLettersOf), or dropped without one; either way counted
// (deadLetters, deadLettersDropped: the summary's dead letters) and the
// first reasons logged, as the dead letters of steps (P7). Local and
// clustered jobs build it alike (kafkaEncode): the sink itself then only
// produces the records it is given.

// kafkaEncodeOp encodes the records of a Kafka sink with ser, routing the
// records ser refuses to dead letters. The *kgo.Record it emits belongs to
// the sink from then on.
type kafkaEncodeOp struct {
	runtime.Base[*kgo.Record]
	ser         func(Record) (*kgo.Record, error)
	sink, topic string
	tag         *runtime.OutputTag[Record] // nil: dropped
	dead        stepDeadLetters
}

func (o *kafkaEncodeOp) Open(ctx *runtime.Context, out runtime.Output[*kgo.Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, o.tag, "")
	return nil
}

func (o *kafkaEncodeOp) ProcessRecord(r runtime.Record[Record]) error {
	rec, err := o.ser(r.Value)
	if err != nil {
		if errors.Is(err, kafka.ErrFailJob) {
			return err // not the record's fault (R2)
		}
		reason := fmt.Sprintf("sink %s (topic %s): %v", o.sink, o.topic, err)
		o.dead.letter(Record{"sink": o.sink, "topic": o.topic, "reason": reason, "value": r.Value}, r.Timestamp, reason)
		return nil
	}
	o.Out.Collect(runtime.Record[*kgo.Record]{Value: rec, Timestamp: r.Timestamp})
	return nil
}

// produceEncoded is the Serialize of a Kafka sink fed by kafkaEncodeOp:
// the record is already made.
func produceEncoded(r *kgo.Record) (*kgo.Record, error) { return r, nil }

// kafkaEncode adds the encoding operator of the Kafka sink named sink (of
// output, "sink" for the main one) writing to topic, and routes its dead
// letters.
func (b *builder) kafkaEncode(sink, output, topic string, ser func(Record) (*kgo.Record, error), in weir.Stream[Record]) weir.Stream[*kgo.Record] {
	first := b.j.firstOp == sink
	name := b.opName("", sink+"-encode")
	if first {
		// The encoder, not the sink, sees every record the source sent.
		b.j.firstOp = name
	}
	b.j.failing = append(b.j.failing, name)
	to := sinkDeadLettersOf(b.j.Spec, output)
	var tag *weir.OutputTag[Record]
	if to != "" {
		tag = weir.NewOutputTag[Record](name + "-dead-letters")
	}
	out := weir.Transform(in, name, func() runtime.OneInputOperator[Record, *kgo.Record] {
		return &kafkaEncodeOp{ser: ser, sink: sink, topic: topic, tag: tag}
	}).UID(name)
	if to != "" {
		b.output(to, weir.SideOutput(out, tag))
	}
	return out
}

// sinkDeadLettersOf is the output receiving the dead letters of the Kafka
// sink of output ("sink": the main one): the source's deadLetters, unless
// that is output itself or feeds it (directly or through other outputs),
// which would make a cycle; "" drops them (counted).
func sinkDeadLettersOf(s *Spec, output string) string {
	d := s.Source.DeadLetters
	if d == "" || output == "sink" {
		return d
	}
	if d == output || feedsInto(s, d, output) {
		return ""
	}
	return d
}

// feedsInto reports whether output from feeds output to through steps
// (tees, dead letters, late records, violations) of outputs.
func feedsInto(s *Spec, from, to string) bool {
	feed := stepFeeders(s)
	seen := map[string]bool{}
	var walk func(name string) bool
	walk = func(name string) bool {
		if name == from {
			return true
		}
		if seen[name] {
			return false
		}
		seen[name] = true
		for _, f := range feed[name] {
			if walk(f) {
				return true
			}
		}
		return false
	}
	return walk(to)
}
