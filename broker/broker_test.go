package broker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func produce(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads every partition of topic from the start to its end
// offset and returns "partition/offset=value" strings.
func consumeAll(t *testing.T, addr, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, fmt.Sprintf("%d/%d=%s", r.Partition, r.Offset, r.Value))
		})
	}
	// Partitions arrive in whichever order their fetches answer: sort, so
	// that two reads of the same log compare equal.
	slices.Sort(out)
	return out
}

func TestInMemoryRoundTrip(t *testing.T) {
	b, err := Start(Options{Topics: map[string]int32{"t": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want a loopback address", b.Addr())
	}
	produce(t, b.Addr(), "t", 10)
	got := consumeAll(t, b.Addr(), "t")
	if len(got) != 10 {
		t.Fatalf("consumed %d records, want 10: %v", len(got), got)
	}
	b.Close()
	b.Close() // B3: idempotent

	// In memory: a new broker starts empty.
	b2, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.Cluster().TopicInfo("t") != nil {
		t.Fatal("an in-memory broker kept a topic across restarts")
	}
}

func TestPersistentRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Options{DataDir: dir, Topics: map[string]int32{"t": 2}})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, b.Addr(), "t", 20)
	before := consumeAll(t, b.Addr(), "t")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	var offs kadm.Offsets
	offs.AddOffset("t", 0, 7, -1)
	if err := adm.CommitAllOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	// B2 and B4: the same directory brings back records, offsets and
	// group commits; Topics does not recreate the existing topic.
	b, err = Start(Options{DataDir: dir, Topics: map[string]int32{"t": 5}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	after := consumeAll(t, b.Addr(), "t")
	if strings.Join(before, " ") != strings.Join(after, " ") {
		t.Fatalf("records changed across a restart:\nbefore %v\nafter  %v", before, after)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("t", 0); !ok || o.At != 7 {
		t.Fatalf("committed offset after restart = %+v (found %v), want 7", o, ok)
	}
	if n := len(b.Cluster().PartitionInfos("t")); n != 2 {
		t.Fatalf("topic t has %d partitions after restart, want the persisted 2", n)
	}
}

func TestFixedAddressAndPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := Start(Options{Addr: addr, Brokers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Addrs(); len(got) != 3 || got[0] != addr {
		t.Fatalf("Addrs() = %v, want 3 brokers, the first on %s", got, addr)
	}
	_, err = Start(Options{Addr: addr})
	if err == nil || !strings.Contains(err.Error(), "port is taken") {
		t.Fatalf("second broker on %s: err = %v, want a port-taken error", addr, err)
	}
	if _, err := Start(Options{Addr: "nonsense"}); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("bad address: err = %v, want a host:port hint", err)
	}
}

func TestRunUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Topics: map[string]int32{"t": 1}}, func(b *Broker) { addrc <- b.Addr() })
	}()
	addr := <-addrc
	produce(t, addr, "t", 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("broker still accepts connections on %s after Run returned", addr)
	}
}

func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A second broker on the same directory must not touch it: it
	// would take the first broker's open transactions for ones left
	// open by a crash.
	if b2, err := Start(Options{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "in use by another broker") {
		if err == nil {
			b2.Close()
		}
		t.Fatalf("second broker on %s: err = %v, want an in-use error", dir, err)
	}
	b.Close()
	b, err = Start(Options{DataDir: dir})
	if err != nil {
		t.Fatalf("start after the first broker closed: %v", err)
	}
	b.Close()
}
