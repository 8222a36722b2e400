package kafka

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

type deserProbe struct {
	Name string         `json:"name"`
	Tags []string       `json:"tags"`
	Attr map[string]int `json:"attr"`
	Opt  *int           `json:"opt"`
}

// The per-reader JSON deserializer reuses one value: a decoded value must
// not change when later records are decoded, and fields a later record
// lacks must not keep an earlier record's contents.
func TestJSONPerReaderValuesIndependent(t *testing.T) {
	for name, d := range map[string]Deserializer[deserProbe]{
		"JSON":         forReader(JSON[deserProbe]()),
		"WithMetadata": valueOf(forReader(WithMetadata(JSON[deserProbe]()))),
	} {
		t.Run(name, func(t *testing.T) {
			raw := []byte(`{"name":"a","tags":["x","y"],"attr":{"k":1},"opt":7}`)
			a, err := d.Deserialize(&kgo.Record{Value: raw})
			if err != nil {
				t.Fatal(err)
			}
			for i := range raw {
				raw[i] = 'X' // a value must not share memory with its record
			}
			b, err := d.Deserialize(&kgo.Record{Value: []byte(`{"name":"b","tags":["z"]}`)})
			if err != nil {
				t.Fatal(err)
			}
			seven := 7
			wantA := deserProbe{Name: "a", Tags: []string{"x", "y"}, Attr: map[string]int{"k": 1}, Opt: &seven}
			if !reflect.DeepEqual(a, wantA) {
				t.Errorf("first value changed to %+v after the second decode", a)
			}
			if want := (deserProbe{Name: "b", Tags: []string{"z"}}); !reflect.DeepEqual(b, want) {
				t.Errorf("second value %+v, want %+v (nothing of the first)", b, want)
			}
			for _, bad := range []string{`{"name":`, `{"name":5}`, `{"tags":"x"}`, `[1]`, ``} {
				if _, err := d.Deserialize(&kgo.Record{Value: []byte(bad)}); err == nil {
					t.Errorf("%q decoded without error", bad)
				}
			}
		})
	}
}

func valueOf[T any](d Deserializer[Message[T]]) Deserializer[T] {
	return DeserializerFunc[T](func(r *kgo.Record) (T, error) {
		m, err := d.Deserialize(r)
		return m.Value, err
	})
}

// BenchmarkJSONDeserialize: the per-reader JSON deserializer against the
// shared one (a new T per record), same records.
func BenchmarkJSONDeserialize(b *testing.B) {
	type ev struct {
		Item string `json:"item"`
		TS   int64  `json:"ts"`
	}
	rec := &kgo.Record{Value: []byte(`{"item":"item-1234","ts":1795399978210}`)}
	for name, d := range map[string]Deserializer[ev]{"shared": JSON[ev](), "per-reader": forReader(JSON[ev]())} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Deserialize(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDeserializerFailsJob: a Deserializer error wrapping ErrFailJob fails
// the job (naming the record) instead of making a dead letter.
func TestDeserializerFailsJob(t *testing.T) {
	b := startBroker(t, map[string]int32{"f": 1})
	produce(t, client(t, b), rec("f", 0, 1, "ok"), rec("f", 0, 2, "registry down"))
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	stop := make(chan struct{})
	close(stop)
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"f"}, Stop: stop}, DeserializerFunc[string](func(r *kgo.Record) (string, error) {
		if string(r.Value) != "ok" {
			return "", fmt.Errorf("schema registry: %w", ErrFailJob)
		}
		return "ok", nil
	}))
	s := weir.FromSource(env, "kafka", src, watermark.ForMonotonous[string]())
	bad := collectTo(weir.DeadLetters(s))
	collectTo(s)
	err := env.Execute(context.Background())
	if !errors.Is(err, ErrFailJob) || !strings.Contains(err.Error(), "topic f partition 0 offset 1") {
		t.Fatalf("Execute: %v; want ErrFailJob naming the record", err)
	}
	if bad.len() != 0 {
		t.Fatalf("%d dead letters; want none", bad.len())
	}
}

// TestMessageTraceContext: a Message carries its record's W3C trace
// context headers.
func TestMessageTraceContext(t *testing.T) {
	m := Message[int]{Headers: []kgo.RecordHeader{{Key: "x", Value: []byte("1")}, {Key: "traceparent", Value: []byte("00-a-b-01")}, {Key: "tracestate", Value: []byte("v=1")}}}
	if tp, ts := m.TraceContext(); tp != "00-a-b-01" || ts != "v=1" {
		t.Fatalf("TraceContext() = %q, %q", tp, ts)
	}
	if tp, ts := (Message[int]{}).TraceContext(); tp != "" || ts != "" {
		t.Fatalf("without headers: %q, %q", tp, ts)
	}
}
