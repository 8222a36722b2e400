package format_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/internal/srtest"
)

// TestSchemasOnce: goroutines meeting a new id at once make its schema
// once (C1), from one registry request; an unknown id, a schema of another
// type and one the codec refuses are *DecodeErrors naming the id (dead
// letters); a registry that stays down fails the job (R2).
func TestSchemasOnce(t *testing.T) {
	reg := srtest.Start(t, nil, nil)
	c, err := format.NewClient(format.RegistryConfig{URL: reg.URL, RetryLimit: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	avroID, err := c.Register(ctx, "a-value", sr.Schema{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	jsonID, err := c.Register(ctx, "j-value", sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := format.NewClient(format.RegistryConfig{URL: reg.URL, RetryLimit: 300 * time.Millisecond}) // nothing cached
	var built atomic.Int64
	s := format.NewSchemas(fresh, sr.TypeAvro, "Avro", func(_ context.Context, id int, raw sr.Schema) (string, error) {
		built.Add(1)
		if strings.Contains(raw.Schema, "refuse") {
			return "", errors.New("refused")
		}
		return raw.Schema, nil
	})
	before := reg.Requests.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if got, err := s.Of(avroID); err != nil || got != schema {
					t.Errorf("Of(%d) = %q, %v", avroID, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, r := built.Load(), reg.Requests.Load()-before; n != 1 || r != 1 {
		t.Errorf("made %d times from %d requests; want once from one", n, r)
	}

	refusedID, _ := c.Register(ctx, "r-value", sr.Schema{Schema: `{"type":"record","name":"refuse","fields":[]}`})
	for _, tc := range []struct {
		id   int
		want error
		text string
	}{
		{4242, format.ErrUnknownSchema, "schema id 4242: schema id unknown"},
		{jsonID, format.ErrPayload, "the schema is JSON, not Avro"},
		{refusedID, format.ErrPayload, "refused"},
	} {
		_, err := s.Of(tc.id)
		var de *format.DecodeError
		if !errors.As(err, &de) || de.ID != tc.id || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Of(%d): %v; want a DecodeError of id %d saying %q", tc.id, err, tc.id, tc.text)
		}
	}

	reg.Down.Store(1 << 30)
	defer reg.Down.Store(0)
	if _, err := s.Of(avroID + 100); !errors.Is(err, kafka.ErrFailJob) || !errors.Is(err, format.ErrUnavailable) {
		t.Errorf("Of with the registry down: %v; want ErrFailJob wrapping ErrUnavailable", err)
	}
}

// TestTargetFind: each way of choosing the encoding schema, and its
// errors.
func TestTargetFind(t *testing.T) {
	ctx := context.Background()
	m := format.NewMemory()
	id, _ := m.Register(ctx, "t-value", sr.Schema{Schema: schema})
	for _, tc := range []struct {
		t      format.Target
		wantID int
		err    string
	}{
		{format.Target{ID: id}, id, ""},
		{format.Target{Subject: "t-value"}, id, ""},
		{format.Target{Subject: "n-value", AutoRegister: true, Schema: `"string"`}, id + 1, ""},
		{format.Target{Subject: "t-value", AutoRegister: true}, 0, "x: AutoRegister needs Subject and Schema"},
		{format.Target{Subject: "n-value", AutoRegister: true, Schema: "bad"}, 0, "x: Schema: bad schema"},
		{format.Target{Subject: "none"}, 0, "x: format: subject none"},
		{format.Target{}, 0, "x: encoding needs Subject"},
	} {
		got, s, err := tc.t.Find(ctx, m, "x", sr.TypeAvro, "Avro", func(s sr.Schema) error {
			if s.Schema == "bad" {
				return errors.New("bad schema")
			}
			return nil
		})
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("Find(%+v): %v; want %q", tc.t, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.wantID || s.Type != sr.TypeAvro {
			t.Errorf("Find(%+v) = %d, %+v, %v; want id %d", tc.t, got, s, err, tc.wantID)
		}
	}
	jid, _ := m.Register(ctx, "j-value", sr.Schema{Schema: "{}", Type: sr.TypeJSON})
	if _, _, err := (format.Target{ID: jid}).Find(ctx, m, "x", sr.TypeAvro, "Avro", nil); err == nil || !strings.Contains(err.Error(), "is JSON, not Avro") {
		t.Errorf("Find of a JSON schema for Avro: %v", err)
	}
}
