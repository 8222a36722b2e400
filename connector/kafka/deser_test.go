package kafka

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
