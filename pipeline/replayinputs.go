package pipeline

import (
	"context"
	"fmt"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AgentInputs returns how `weir agent replay --input-topic` turns a record
// of the agent step named name ("" means the only one) into the step's
// input and key: decoded as the pipeline's Kafka source decodes its
// records (its format and metadata fields; a JSON object for any other
// source), keyed by the keyBy right before the step. skip is set for a
// record the source would make a dead letter (the agent never saw it).
// operator is the step's operator name (as the event log names it). Only
// for an agent step of the main steps whose input is the source's records
// as they are: nothing but its keyBy before it.
func AgentInputs(ctx context.Context, s *Spec, name string) (decode func(*kgo.Record) (key string, input any, skip bool, err error), operator string, err error) {
	st, err := agentStep(s, name)
	if err != nil {
		return nil, "", err
	}
	i := -1
	for j := range s.Steps {
		if &s.Steps[j] == st {
			i = j
		}
	}
	if i < 0 {
		return nil, "", fmt.Errorf("%s: the agent step is in an output; --input-topic replays an agent step of the main steps", st.Pos)
	}
	for j := 0; j < i; j++ {
		if k := s.Steps[j].Kind; k != "keyBy" {
			return nil, "", fmt.Errorf("%s: steps[%d] is a %s step before the agent step; --input-topic replays an agent step that reads the source's records as they are (only its keyBy before it): use --log or --topic, the event log of the agent's own inputs", s.Steps[j].Pos, j, k)
		}
	}
	kp, _ := parseFieldPath(s.Steps[i-1].KeyBy) // checked by Parse
	key := recordKey(kp)
	var value func(*kgo.Record) (Record, error)
	if s.Source.Kafka != nil {
		d, err := kafkaSourceRecords(ctx, s)
		if err != nil {
			return nil, "", err
		}
		value = d.Deserialize
	} else {
		value = func(r *kgo.Record) (Record, error) {
			var rec Record
			err := gojson.Unmarshal(r.Value, &rec)
			return rec, err
		}
	}
	operator = st.Name
	if operator == "" {
		operator = "agent"
	}
	return func(r *kgo.Record) (string, any, bool, error) {
		rec, err := value(r)
		if err != nil || rec == nil {
			return "", nil, true, nil
		}
		return key(rec), map[string]any(rec), false, nil
	}, operator, nil
}
