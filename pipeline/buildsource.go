package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

func (b *builder) source(ctx context.Context) (weir.Stream[Record], error) {
	s := &b.j.Spec.Source
	name := b.opName(s.Name, "source")
	strategy := watermarks(s)
	ts := timestampPath(s)
	var out weir.Stream[Record]
	switch {
	case s.Kafka != nil:
		k := s.Kafka
		o := kafka.Options{Brokers: b.j.Brokers, Security: b.j.Security, Topics: k.Topics, TopicPattern: k.TopicPattern, Group: k.Group, ReadCommitted: k.ReadCommitted}
		switch k.Start {
		case "earliest", "":
			o.Start = kafka.StartEarliest()
		case "latest":
			o.Start = kafka.StartLatest()
		case "committed":
			o.Start = kafka.StartCommitted(kafka.StartEarliest())
		default:
			t, _ := time.Parse(time.RFC3339Nano, k.Start) // checked by Parse
			o.Start = kafka.StartAt(t)
		}
		if k.Bounded {
			stop := make(chan struct{})
			close(stop)
			o.Stop = stop
		}
		deser, err := kafkaSourceRecords(ctx, b.j.Spec)
		if err != nil {
			return out, err
		}
		src := kafka.NewSource(o, deser)
		if err := src.Validate(); err != nil {
			return out, fmt.Errorf("%s: %w", k.Pos, err)
		}
		b.j.kafkaSource = src
		out = weir.FromSource(b.env, name, src, kafkaWatermarks(s))
	case s.File != nil:
		src := jsonl.SourceWith(jsonl.Options[Record]{Ordered: s.File.Ordered,
			Timestamp: func(r Record) (int64, bool) { return timestampOf(r, ts) }}, s.File.Paths...)
		for _, p := range s.File.Paths {
			if _, err := os.Stat(p); err != nil {
				return out, Errors{{Pos: s.File.Pos, Msg: fmt.Sprintf("source.file.paths: %v; want existing JSON-lines files (relative paths are relative to the pipeline file)", err)}}
			}
		}
		out = weir.FromSource(b.env, name, src, strategy)
	case s.Postgres != nil:
		var err error
		if out, err = b.postgresSource(ctx, name, s); err != nil {
			return out, err
		}
	case s.Generate != nil:
		g := s.Generate
		type field struct {
			name string
			prog *progRef
		}
		var fields []field
		for _, f := range sortedKeys(g.Fields) {
			p, err := compileExpr(g.Fields[f], exprAny)
			if err != nil {
				return out, fmt.Errorf("%s: %v", g.FieldPos[f], err) // checked by Parse
			}
			fields = append(fields, field{f, &progRef{&vmProgram{prog: p}}})
		}
		strategy = strategy.WithTimestamp(func(r Record, _ int64) (int64, bool) { return timestampOf(r, ts) })
		out = weir.Generate(b.env, name, g.Count, func(i int64) runtime.Record[Record] {
			env := map[string]any{"i": i}
			rec := make(Record, len(fields))
			for _, f := range fields {
				v, err := f.prog.run(env)
				if err != nil {
					// No timestamp: the record becomes a dead letter that says why.
					return runtime.Record[Record]{Value: Record{"error": fmt.Sprintf("field %s: %v", f.name, exprMessage(err)), "i": i},
						Timestamp: runtime.NoTimestamp}
				}
				rec[f.name] = v
			}
			return runtime.Record[Record]{Value: rec, Timestamp: runtime.NoTimestamp}
		}, strategy)
	case s.HTTP != nil:
		var err error
		if out, err = b.httpSource(name, s, strategy, ts); err != nil {
			return out, err
		}
	}
	out = out.UID(name)
	b.sourceDone = true
	b.sourceDeadLetters(name, out)
	return out, nil
}

// sourceDeadLetters feeds the source's dead letters to
// source.deadLetters, if named; name is the source operator's.
func (b *builder) sourceDeadLetters(name string, src weir.Stream[Record]) {
	b.j.sourceOp = name
	if s := &b.j.Spec.Source; s.DeadLetters != "" {
		dl := weir.Map(weir.DeadLetters(src), name+"-dead-letters", deadLetterRecord)
		b.output(s.DeadLetters, dl)
	}
}

// watermarks is the source's watermark strategy, without its timestamps
// (the Kafka record's timestamp, unless set by the caller).
func watermarks(s *SourceSpec) watermark.Strategy[Record] {
	strategy := watermark.ForBoundedOutOfOrderness[Record](s.OutOfOrderness).WithIdleness(s.Idleness)
	if s.EveryRecord {
		bound := s.OutOfOrderness.Milliseconds()
		strategy = watermark.ForGenerator(func() watermark.Generator[Record] {
			maxTs := int64(math.MinInt64)
			return watermark.Punctuated(func(_ Record, ts int64) (int64, bool) {
				if ts <= maxTs {
					return 0, false
				}
				maxTs = ts
				return ts - bound - 1, true
			})
		}).WithIdleness(s.Idleness)
	}
	return strategy
}

// timestampPath is source.timestamp parsed (nil without one).
func timestampPath(s *SourceSpec) fieldPath {
	if s.Timestamp == "" {
		return nil
	}
	ts, _ := parseFieldPath(s.Timestamp) // checked by Parse
	return ts
}

// kafkaWatermarks is a Kafka source's strategy: event time from
// source.timestamp, or the Kafka record's timestamp without one.
func kafkaWatermarks(s *SourceSpec) watermark.Strategy[Record] {
	strategy := watermarks(s)
	if ts := timestampPath(s); ts != nil {
		strategy = strategy.WithTimestamp(func(r Record, _ int64) (int64, bool) { return timestampOf(r, ts) })
	}
	return strategy
}

// kafkaRecords decodes a Kafka source's records: JSON objects, with the
// record's metadata in the field source.kafka.metadata if named.
func kafkaRecords(k *KafkaSourceSpec) kafka.Deserializer[Record] {
	meta := k.Metadata
	return kafka.DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		var rec Record
		if err := gojson.Unmarshal(r.Value, &rec); err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, errors.New("not a JSON object (null)")
		}
		if meta != "" {
			rec[meta] = recordMetadata(r)
		}
		return rec, nil
	})
}

// recordMetadata is the value of source.kafka.metadata's field: the
// record's topic, partition, offset and timestamp, and its W3C trace
// context headers (traceparent, tracestate) when it has them, which an
// agent step's trace continues (agent.Options.TraceContextOf).
func recordMetadata(r *kgo.Record) map[string]any {
	m := map[string]any{"topic": r.Topic, "partition": float64(r.Partition),
		"offset": float64(r.Offset), "timestamp": float64(r.Timestamp.UnixMilli())}
	for _, h := range r.Headers {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			m[h.Key] = string(h.Value)
		}
	}
	return m
}

// traceContextIn returns agent.Options.TraceContextOf for records whose
// field meta holds recordMetadata.
func traceContextIn(meta string) func(any) (string, string) {
	return func(v any) (string, string) {
		rec, _ := v.(Record)
		m, _ := rec[meta].(map[string]any)
		tp, _ := m["traceparent"].(string)
		ts, _ := m["tracestate"].(string)
		return tp, ts
	}
}

// deadLetterRecord turns a dead letter into a record: source, split,
// position, reason, and raw (the input as a string) or value.
func deadLetterRecord(d weir.DeadLetter) Record {
	r := Record{"source": d.Source, "split": float64(d.Split), "position": float64(d.Position), "reason": d.Reason}
	if d.Raw != nil {
		r["raw"] = string(d.Raw)
	}
	if d.Value != nil {
		r["value"] = d.Value
	}
	return r
}
