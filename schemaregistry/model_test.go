package schemaregistry_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"pgregory.net/rapid"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/schemaregistry"
)

// model is the registry as a few maps: what ids and versions a sequence
// of registrations and deletes must give (I2, I3).
type model struct {
	ids      map[int]int // schema number -> id
	maxID    int
	subjects map[string][]modelVersion
}

type modelVersion struct {
	number, id int
	deleted    bool
}

func (m *model) register(subject string, schema int) int {
	id, known := m.ids[schema]
	for _, v := range m.subjects[subject] {
		if known && v.id == id && !v.deleted {
			return id
		}
	}
	if !known {
		m.maxID++
		id = m.maxID
		m.ids[schema] = id
	}
	vs := m.subjects[subject]
	next := 1
	if len(vs) > 0 {
		next = vs[len(vs)-1].number + 1
	}
	m.subjects[subject] = append(vs, modelVersion{number: next, id: id})
	return id
}

func (m *model) live(subject string) []int {
	out := []int{}
	for _, v := range m.subjects[subject] {
		if !v.deleted {
			out = append(out, v.number)
		}
	}
	return out
}

func modelSchema(n int) string {
	return fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"int"}]}`, n)
}

// TestIDsAndVersionsMatchModel runs random registrations and soft deletes
// against the registry and the model, checking every answer, then
// restarts the registry on the same topic and checks that every subject
// reads back the same (I1). Replay a failure with the -rapid.seed printed.
func TestIDsAndVersionsMatchModel(t *testing.T) {
	b := startBroker(t, broker.Options{})
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		cfg := schemaregistry.Config{Brokers: b.Addrs(), Topic: fmt.Sprintf("_schemas_%d", run)}
		c := ctx(t)
		s, err := schemaregistry.Start(c, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		h := httptest.NewServer(s.Handler())
		defer func() { h.Close(); s.Close() }()
		cl, _ := sr.NewClient(sr.URLs(h.URL))
		if r := cl.SetCompatibility(c, sr.SetCompatibility{Level: sr.CompatNone}); r[0].Err != nil {
			rt.Fatal(r[0].Err)
		}
		m := &model{ids: map[int]int{}, subjects: map[string][]modelVersion{}}
		subjects := []string{"a", "b", "c"}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			subject := rapid.SampledFrom(subjects).Draw(rt, "subject")
			if rapid.IntRange(0, 3).Draw(rt, "op") > 0 {
				schema := rapid.IntRange(0, 5).Draw(rt, "schema")
				want := m.register(subject, schema)
				id, err := cl.RegisterSchema(c, subject, sr.Schema{Schema: modelSchema(schema)}, -1, -1)
				if err != nil || id != want {
					rt.Fatalf("register %s R%d = %d, %v; model says %d", subject, schema, id, err, want)
				}
			} else {
				live := m.live(subject)
				if len(live) == 0 {
					if err := cl.DeleteSchema(c, subject, 1, sr.SoftDelete); code(err) != 40401 {
						rt.Fatalf("delete in %s without live versions: %v; want 40401", subject, err)
					}
					continue
				}
				n := rapid.SampledFrom(live).Draw(rt, "version")
				for i := range m.subjects[subject] {
					if m.subjects[subject][i].number == n {
						m.subjects[subject][i].deleted = true
					}
				}
				if err := cl.DeleteSchema(c, subject, n, sr.SoftDelete); err != nil {
					rt.Fatalf("delete %s/%d: %v", subject, n, err)
				}
			}
		}
		check := func(cl *sr.Client, when string) {
			for _, subject := range subjects {
				live := m.live(subject)
				got, err := cl.SubjectVersions(c, subject)
				if len(live) == 0 {
					if code(err) != 40401 {
						rt.Fatalf("%s: versions of %s = %v, %v; want 40401", when, subject, got, err)
					}
					continue
				}
				if err != nil || !slices.Equal(got, live) {
					rt.Fatalf("%s: versions of %s = %v, %v; model says %v", when, subject, got, err, live)
				}
				for _, v := range m.subjects[subject] {
					if v.deleted {
						continue
					}
					ss, err := cl.SchemaByVersion(c, subject, v.number)
					if err != nil || ss.ID != v.id {
						rt.Fatalf("%s: %s/%d = %+v, %v; model says id %d", when, subject, v.number, ss, err, v.id)
					}
				}
			}
		}
		check(cl, "running")
		s.Close()
		s2, err := schemaregistry.Start(c, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		h2 := httptest.NewServer(s2.Handler())
		defer func() { h2.Close(); s2.Close() }()
		cl2, _ := sr.NewClient(sr.URLs(h2.URL))
		check(cl2, "after restart")
		// The next new schema continues the ids.
		id, err := cl2.RegisterSchema(c, "new", sr.Schema{Schema: modelSchema(99)}, -1, -1)
		if err != nil || id != m.maxID+1 {
			rt.Fatalf("after restart a new schema got %d, %v; want %d", id, err, m.maxID+1)
		}
	})
}
