package kafka

import (
	stdjson "encoding/json"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

type fuzzMsg struct {
	ID    int64              `json:"id"`
	Name  string             `json:"name"`
	Tags  []string           `json:"tags"`
	Attrs map[string]int     `json:"attrs"`
	Raw   stdjson.RawMessage `json:"raw"`
	Bytes []byte             `json:"bytes"`
	Next  *fuzzMsg           `json:"next"`
}

func showMsg(t *testing.T, v fuzzMsg) string {
	t.Helper()
	b, err := stdjson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzJSONDeserializer feeds arbitrary record values to the JSON
// deserializer, in both its forms (JSON, and the per-reader form that
// decodes into one reused value). It must never panic; the two forms must
// agree; a value it accepts must re-encode and decode to itself; and
// (package documentation) a decoded value shares no memory with the
// record or with the values decoded before it: scribbling over the
// record's bytes, and decoding another record into the reused value,
// change nothing in it.
//
//	go test ./connector/kafka -run '^$' -fuzz FuzzJSONDeserializer -fuzztime 60s -parallel 1
func FuzzJSONDeserializer(f *testing.F) {
	f.Add([]byte(`{"id":1,"name":"a","tags":["x","y"],"attrs":{"k":2},"raw":{"z":[1,2]},"bytes":"AQID","next":{"id":2}}`), []byte(`{"name":"b","tags":["q"]}`))
	f.Add([]byte(`{"id":"1"}`), []byte(`null`))
	f.Add([]byte(`{"raw":"\u00e9\ud83d\ude00","attrs":{"a":1,"a":2}}`), []byte(`{"attrs":{"b":3},"raw":null}`))
	f.Add([]byte(`{"id":1} trailing`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		plain := JSON[fuzzMsg]()
		reused := forReader(plain)
		va, errA := plain.Deserialize(&kgo.Record{Value: a})
		reused.Deserialize(&kgo.Record{Value: b}) // b only dirties the reused value
		aCopy := append([]byte(nil), a...)
		ra, errR := reused.Deserialize(&kgo.Record{Value: aCopy})
		if (errA == nil) != (errR == nil) {
			t.Fatalf("%q: JSON says %v, the per-reader form %v", a, errA, errR)
		}
		if errA != nil {
			return
		}
		want := showMsg(t, va)
		if got := showMsg(t, ra); got != want {
			t.Fatalf("%q after %q: the per-reader form decoded %s, JSON %s", a, b, got, want)
		}
		for i := range aCopy {
			aCopy[i] = 'X'
		}
		reused.Deserialize(&kgo.Record{Value: b})
		if got := showMsg(t, ra); got != want {
			t.Fatalf("%q: a decoded value changed after its record was overwritten and %q decoded: %s, want %s", a, b, got, want)
		}
		var back fuzzMsg
		if err := stdjson.Unmarshal([]byte(want), &back); err != nil {
			t.Fatalf("%q: the decoded value's encoding %s does not decode: %v", a, want, err)
		}
		again, err := plain.Deserialize(&kgo.Record{Value: []byte(want)})
		if err != nil || !reflect.DeepEqual(showMsg(t, again), want) {
			t.Fatalf("%q: re-encoded as %s, which decodes as %s (%v)", a, want, showMsg(t, again), err)
		}
	})
}
