package pipeline

import (
	"errors"
	"fmt"

	"github.com/weirproject/weir"
)

// Dead letters of sinks. A sink that cannot write a record — an HTTP
// service answering 4xx (sink.http), a value a Postgres column's type
// cannot hold or no value for a NOT NULL column (sink.postgres), a field a
// Parquet column cannot hold or a required one missing (sink.parquet) —
// sends it, when the sink names a deadLetters output, to that output as
//
//	{"sink": OPERATOR, "reason": "...", "value": RECORD}
//
// (sink.http adds "status" and "key"), counted by the sink operator's
// deadLetters counter and the summary's sink dead letters. Without a
// deadLetters output such a record fails the job, naming the key that
// would keep it (sink.http drops and counts it, package httpsink).

// sinkDeadLetters returns the output the records sink s cannot write feed
// ("": none), where it is named, and the sink's kind.
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

// checkSinkDeadLetters checks the dead-letter outputs of sinks (feed is
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

// sinkRejects returns the side-output tag for the records the sink named
// name rejects (weir.Rejected) when its spec names a deadLetters output
// to ("" : nil, they fail the job), and the function that, given the
// sink's stream, sends them to that output as dead letters.
func (b *builder) sinkRejects(name, to string) (*weir.OutputTag[weir.Rejected[Record]], func(weir.Stream[struct{}])) {
	if to == "" {
		return nil, func(weir.Stream[struct{}]) {}
	}
	b.j.rejecting = append(b.j.rejecting, name)
	tag := weir.NewOutputTag[weir.Rejected[Record]](name + "-rejected")
	return tag, func(out weir.Stream[struct{}]) {
		b.output(to, weir.Map(weir.SideOutput(out, tag), name+"-dead-letters", func(r weir.Rejected[Record]) Record {
			return Record{"sink": name, "reason": r.Reason, "value": r.Value}
		}))
	}
}

// rejectedHint adds to a job's failure by a record a sink could not write
// (weir.ErrRejected) the key that would keep such records instead.
func rejectedHint(err error) error {
	if errors.Is(err, weir.ErrRejected) {
		return fmt.Errorf("%w (set deadLetters on the sink to send the records it cannot write to an output)", err)
	}
	return err
}
