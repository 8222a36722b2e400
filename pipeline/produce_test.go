package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/fsync"
)

// A kafka.embedded.produce load that a kill stopped part way leaves each
// partition with a prefix of its records and the marker file; the next
// start produces the rest: every line once, each partition in file order.
// Without the marker a topic that has records is left alone, and a load
// that finished removes its marker. The topic's lines come from two files
// (one load, in their order; the second file was skipped before).
func TestProduceFinishesAnInterruptedLoad(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keyed := rapid.Bool().Draw(rt, "keyed")
		lines := rapid.IntRange(1, 400).Draw(rt, "lines")
		dir, err := os.MkdirTemp(t.TempDir(), "load")
		if err != nil {
			rt.Fatal(err)
		}
		split := rapid.IntRange(0, lines).Draw(rt, "firstFileLines")
		var files [2][]byte
		for i := range lines {
			f := &files[0]
			if i >= split {
				f = &files[1]
			}
			*f = fmt.Appendf(*f, `{"id": %d, "customer": "c%d"}`+"\n", i, i%37)
		}
		var specs []ProduceSpec
		for i, b := range files {
			file := filepath.Join(dir, fmt.Sprintf("in%d.jsonl", i))
			if err := os.WriteFile(file, b, 0o644); err != nil {
				rt.Fatal(err)
			}
			spec := ProduceSpec{Topic: "t", File: file}
			if keyed {
				spec.Key = "customer"
			}
			specs = append(specs, spec)
		}
		data := filepath.Join(dir, "kafka")
		br, err := broker.Start(broker.Options{DataDir: data, Topics: map[string]int32{"t": 3}})
		if err != nil {
			rt.Fatal(err)
		}
		defer br.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		// The interrupted load: a prefix of each partition, the marker.
		var recs []*kgo.Record
		for _, spec := range specs {
			rs, err := readProduced(spec)
			if err != nil {
				rt.Fatal(err)
			}
			recs = append(recs, rs...)
		}
		if err := partitionProduced(specs[0], recs, 3); err != nil {
			rt.Fatal(err)
		}
		perPart := map[int32]int{}
		for _, r := range recs {
			perPart[r.Partition]++
		}
		cut := map[int32]int{}
		for p := range int32(3) {
			cut[p] = rapid.IntRange(0, perPart[p]).Draw(rt, "prefix"+strconv.Itoa(int(p)))
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			rt.Fatal(err)
		}
		defer cl.Close()
		taken := map[int32]int{}
		var prefix []*kgo.Record
		for _, r := range recs {
			if taken[r.Partition] < cut[r.Partition] {
				taken[r.Partition]++
				prefix = append(prefix, &kgo.Record{Topic: "t", Partition: r.Partition, Key: r.Key, Value: r.Value})
			}
		}
		if err := cl.ProduceSync(ctx, prefix...).FirstErr(); err != nil {
			rt.Fatal(err)
		}
		marker := filepath.Join(data, "weir-produce-t.loading")
		if err := fsync.WriteFile(marker, nil, 0o644); err != nil {
			rt.Fatal(err)
		}

		if err := produceFiles(ctx, br.Addrs(), data, specs, nil); err != nil {
			rt.Fatal(err)
		}
		if _, err := os.Stat(marker); err == nil {
			rt.Fatal("the marker is still there after the load finished")
		}
		// Again: the topic is whole and has records; nothing is added.
		if err := produceFiles(ctx, br.Addrs(), data, specs, nil); err != nil {
			rt.Fatal(err)
		}

		got := readTopic(rt, br.Addrs(), "t", lines)
		count := map[string]int{}
		for p, vals := range got {
			last := -1
			for _, v := range vals {
				count[v]++
				var id int
				fmt.Sscanf(v, `{"id": %d`, &id)
				if id <= last {
					rt.Fatalf("partition %d: line %d after line %d", p, id, last)
				}
				last = id
			}
		}
		for i := range lines {
			v := fmt.Sprintf(`{"id": %d, "customer": "c%d"}`, i, i%37)
			if count[v] != 1 {
				rt.Fatalf("line %d is in the topic %d times, want once", i, count[v])
			}
		}
	})
}

// readTopic reads want records of topic from its start, by partition,
// and checks that the topic holds no more.
func readTopic(t *rapid.T, addrs []string, topic string, want int) map[int32][]string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]string{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s, want %d", n, topic, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			n++
		})
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end != int64(want) {
		t.Fatalf("%s holds %d records, want %d", topic, end, want)
	}
	return out
}
