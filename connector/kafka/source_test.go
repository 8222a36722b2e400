package kafka

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// K1, K2, K3: every record of every partition arrives once, in partition
// order, with the Kafka timestamp; partition i of the sorted list is read
// by subtask i % parallelism.
func TestReadsEveryPartitionOnce(t *testing.T) {
	b := startBroker(t, map[string]int32{"a": 3, "b": 2})
	cl := client(t, b)
	var want []string
	for _, tp := range []struct {
		topic string
		parts int32
	}{{"a", 3}, {"b", 2}} {
		for p := range tp.parts {
			for i := range 50 {
				v := fmt.Sprintf("%s%d-%d", tp.topic, p, i)
				ts := int64(1000 + i*10 + int(p))
				produce(t, cl, rec(tp.topic, p, ts, v))
				want = append(want, fmt.Sprintf("%s/%d/%d=%s@%d", tp.topic, p, i, v, ts))
			}
		}
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"b", "a"}}, WithMetadata(String()))
	out := collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[Message[string]]()))
	_, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "all records", func() bool { return out.len() >= len(want) })
	weirtest.Eventually(t, "catch-up", src.CaughtUp)
	stop()
	got := sortedStrings(out.records())
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(want)) {
		t.Fatalf("records differ:\ngot  %v\nwant %v", got, want)
	}
	// Per-partition order.
	last := map[string]int64{}
	for _, r := range out.records() {
		k := fmt.Sprintf("%s/%d", r.Value.Topic, r.Value.Partition)
		if o, ok := last[k]; ok && r.Value.Offset <= o {
			t.Fatalf("%s: offset %d after %d", k, r.Value.Offset, o)
		}
		last[k] = r.Value.Offset
	}
	// Assignment: sorted list a0 a1 a2 b0 b1 over 2 subtasks.
	wantSub := map[string]int{"a/0": 0, "a/1": 1, "a/2": 0, "b/0": 1, "b/1": 0}
	for _, st := range src.Status() {
		k := fmt.Sprintf("%s/%d", st.Topic, st.Partition)
		if st.Subtask != wantSub[k] {
			t.Errorf("%s read by subtask %d, want %d", k, st.Subtask, wantSub[k])
		}
		if !st.CaughtUp || st.Position != 50 || st.End != 50 || st.Start != 0 {
			t.Errorf("%s status %+v, want caught up at 50 from 0", k, st)
		}
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sortStrings(c)
	return c
}

// K4: where partitions start without a restored position.
func TestStartOffsets(t *testing.T) {
	b := startBroker(t, nil)
	cl := client(t, b)
	base := time.Now().UnixMilli() - 60_000
	for _, tc := range []struct {
		name  string
		start StartOffset
		group string
		want  string
	}{
		{"earliest", StartEarliest(), "", "[0 1 2 3 4 5 6 7 8 9 live]"},
		{"latest", StartLatest(), "", "[live]"},
		{"timestamp", StartAtMillis(base + 4500), "", "[5 6 7 8 9 live]"},
		{"future-timestamp", StartAt(time.Now().Add(time.Hour)), "", "[live]"},
		{"committed", StartCommitted(StartEarliest()), "g", "[7 8 9 live]"},
		{"committed-fallback", StartCommitted(StartLatest()), "other", "[live]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "s-" + tc.name
			if err := b.CreateTopic(topic, 1, nil); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				produce(t, cl, rec(topic, 0, base+int64(i)*1000, fmt.Sprint(i)))
			}
			var commit kadm.Offsets
			commit.AddOffset(topic, 0, 7, -1)
			if err := kadm.NewClient(cl).CommitAllOffsets(testCtx(t), "g", commit); err != nil {
				t.Fatal(err)
			}
			src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{topic}, Start: tc.start, Group: tc.group}, String())
			rs := readers(t, src, 1, nil)
			pollUntil(t, "catch-up", rs, func() bool { return statusOf(src, topic, 0).CaughtUp })
			produce(t, cl, rec(topic, 0, time.Now().UnixMilli(), "live"))
			pollUntil(t, "the live record", rs, func() bool { return slices.Contains(rs[0].out.vals, "live") })
			if got := fmt.Sprint(rs[0].out.vals); got != tc.want {
				t.Fatalf("values %s, want %s", got, tc.want)
			}
		})
	}
}

type order struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

// K11: records that do not deserialize become dead letters naming the
// topic, partition and offset; the job goes on.
func TestDeadLetters(t *testing.T) {
	b := startBroker(t, map[string]int32{"j": 2})
	cl := client(t, b)
	produce(t, cl, rec("j", 0, 1, `{"id":"a","qty":1}`), rec("j", 1, 2, `{"id":`), rec("j", 1, 3, `{"id":"b","qty":2}`))
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"j"}}, JSON[order]())
	s := weir.FromSource(env, "kafka", src, watermark.ForMonotonous[order]())
	good := collectTo(s)
	bad := collectTo(weir.DeadLetters(s))
	_, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "records and dead letters", func() bool { return good.len() == 2 && bad.len() == 1 })
	stop()
	d := bad.records()[0].Value
	if d.Source != "kafka" || d.Split != 1 || d.Position != 0 || string(d.Raw) != `{"id":` ||
		!strings.Contains(d.Reason, "kafka topic j partition 1 offset 0") {
		t.Fatalf("dead letter %+v: want source kafka, partition 1, offset 0, the raw value and a reason naming them", d)
	}
	var ids []string
	for _, r := range good.records() {
		ids = append(ids, r.Value.ID)
	}
	sortStrings(ids)
	if fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("records %v, want a and b", ids)
	}
}

// K10: a snapshot taken between polls holds, per partition, the offset
// after the last record emitted, even in the middle of a fetched batch.
func TestSnapshotMidBatch(t *testing.T) {
	b := startBroker(t, map[string]int32{"m": 2})
	cl := client(t, b)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, rec("m", int32(i%2), int64(i), fmt.Sprintf("%d/%d", i%2, i/2)))
	}
	produce(t, cl, recs...)
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"m"}, RecordsPerPoll: 3}, String())
	rs := readers(t, src, 1, nil)
	pollUntil(t, "some records", rs, func() bool { return len(rs[0].out.vals) >= 7 })
	items, err := rs[0].r.(runtime.SplitSnapshotter).SnapshotSplits(1)
	if err != nil {
		t.Fatal(err)
	}
	emitted := map[int32]int64{}
	for _, v := range rs[0].out.vals {
		var p int32
		var o int64
		fmt.Sscanf(v, "%d/%d", &p, &o)
		emitted[p] = max(emitted[p], o+1)
	}
	for _, it := range items {
		var st splitState
		if err := json.Unmarshal(it, &st); err != nil {
			t.Fatal(err)
		}
		if st.Offset != emitted[st.Partition] {
			t.Fatalf("snapshot %s: want offset %d (after the last record emitted of partition %d)", it, emitted[st.Partition], st.Partition)
		}
	}
}

// K10, K12: a savepoint holds the positions; a restore at another
// parallelism reads exactly what came after them; completed checkpoints
// commit the positions to the group.
func TestSavepointRestoreRescale(t *testing.T) {
	b := startBroker(t, map[string]int32{"r": 3})
	cl := client(t, b)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, rec("r", int32(i%3), int64(i), fmt.Sprint("old-", i)))
	}
	produce(t, cl, recs...)
	sp := t.TempDir() + "/sp"
	opts := Options{Brokers: b.Addrs(), Topics: []string{"r"}, Group: "monitor"}
	build := func(par int, restore string) (*weir.Environment, *Source[string], *sink[string]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: quiet,
			Checkpoint: runtime.CheckpointConfig{RestoreFrom: restore}})
		src := NewSource(opts, String())
		return env, src, collectTo(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[string]()).UID("kafka"))
	}
	env, src, out := build(2, "")
	job, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "the history", func() bool { return out.len() == 60 && src.CaughtUp() })
	if _, err := job.TriggerSavepoint(testCtx(t), sp); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	weirtest.Eventually(t, "the group commit", func() bool {
		o, err := adm.FetchOffsets(testCtx(t), "monitor")
		if err != nil {
			return false
		}
		n := 0
		o.Each(func(r kadm.OffsetResponse) {
			if r.At == 20 {
				n++
			}
		})
		return n == 3
	})
	stop()
	// A partition the savepoint does not know: read from its start.
	if _, err := adm.CreatePartitions(testCtx(t), 1, "r"); err != nil {
		t.Fatal(err)
	}
	recs = recs[:0]
	for i := range 32 {
		recs = append(recs, rec("r", int32(i%4), int64(100+i), fmt.Sprint("new-", i)))
	}
	produce(t, client(t, b), recs...) // a client that knows the new partition
	for _, par := range []int{3, 1} {
		env, src, out := build(par, sp)
		_, stop := weirtest.Start(t, env)
		weirtest.Eventually(t, "the new records", func() bool { return out.len() >= 32 && src.CaughtUp() })
		stop()
		var got []string
		for _, r := range out.records() {
			got = append(got, r.Value)
		}
		sortStrings(got)
		if len(got) != 32 || !strings.HasPrefix(got[0], "new-") || !strings.HasPrefix(got[31], "new-") {
			t.Fatalf("restored at parallelism %d read %v, want exactly the 32 new records", par, got)
		}
	}
}

// Fetching follows partition leaders across brokers, also when leadership
// moves while the source reads.
func TestLeaderMoves(t *testing.T) {
	b, err := broker.Start(broker.Options{Brokers: 3, Topics: map[string]int32{"lm": 6}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cl := client(t, b)
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, rec("lm", int32(i%6), int64(i), fmt.Sprint(i)))
	}
	produce(t, cl, recs...)
	src := NewSource(Options{Brokers: b.Addrs(), Topics: []string{"lm"}, RecordsPerPoll: 5,
		BufferedFetches: 1, PartitionMaxBytes: 256}, String())
	rs := readers(t, src, 2, nil)
	moves := 0
	pollUntil(t, "every record", rs, func() bool {
		if moves < 5 && len(rs[0].out.vals)+len(rs[1].out.vals) > moves*100 {
			b.Cluster().ShufflePartitionLeaders()
			moves++
		}
		return src.CaughtUp()
	})
	seen := map[string]int{}
	for _, d := range rs {
		for _, v := range d.out.vals {
			seen[v]++
		}
	}
	if len(seen) != 600 {
		t.Fatalf("read %d distinct records, want 600", len(seen))
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", v, n)
		}
	}
}
