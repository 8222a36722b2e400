package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
)

// Kafka data holding records but no completion marker is what a history
// production interrupted by kill -9 or Ctrl-C leaves: the next run refuses
// it, saying what to do, instead of taking it as the full history.
func TestIncompleteHistoryRefused(t *testing.T) {
	data := filepath.Join(t.TempDir(), "kafka")
	topics := map[string]int32{}
	for _, tp := range Topics {
		topics[tp.Name] = tp.Partitions
	}
	b, err := broker.Start(broker.Options{Topics: topics, DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	var out bytes.Buffer
	_, err = Run(context.Background(), &out, Options{Orders: 100, KafkaData: data})
	if !errors.Is(err, errIncompleteHistory) || !strings.Contains(err.Error(), "delete the directory or use a new --kafka-data") {
		t.Fatalf("run on an interrupted history: %v, want a refusal saying to delete the directory\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "not producing history again") {
		t.Fatalf("the interrupted history was taken as complete:\n%s", out.String())
	}
}

// A complete history gets the marker, and a later run on it reuses it.
func TestCompleteHistoryMarked(t *testing.T) {
	data := filepath.Join(t.TempDir(), "kafka")
	o := Options{Orders: 300, Days: 1, Customers: 3, Items: 5, Live: -1, HeldBack: -1, Malformed: -1, KafkaData: data}
	var out bytes.Buffer
	if _, err := Run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	if !historyComplete(data) {
		t.Fatalf("no %s in %s after a complete history", HistoryMarker, data)
	}
	out.Reset()
	s, err := Run(context.Background(), &out, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.History != 0 || !strings.Contains(out.String(), "not producing history again") {
		t.Fatalf("second run produced %d history records:\n%s", s.History, out.String())
	}
}

// --resume without a checkpoint says to run without it, before any work
// (no broker data is created).
func TestResumeWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	o := Options{Resume: true, CheckpointDir: filepath.Join(dir, "chk"), KafkaData: filepath.Join(dir, "kafka")}
	var out bytes.Buffer
	_, err := Run(context.Background(), &out, o)
	if err == nil || !strings.Contains(err.Error(), "run without --resume") {
		t.Fatalf("resume without a checkpoint: %v, want advice to run without --resume", err)
	}
	if _, err := os.Stat(o.KafkaData); err == nil || out.Len() != 0 {
		t.Fatalf("work was done before the error:\n%s", out.String())
	}
}

// The printed commands are complete: the Kafka data, the checkpoint
// directory and every option that shapes the history, shell-quoted.
func TestCommand(t *testing.T) {
	o := Options{KafkaData: "/tmp/my kafka", CheckpointDir: "/tmp/chk", Orders: 6000, Days: 1, Parallelism: 3,
		Seed: 5, Live: -1, Malformed: -1, StateBackend: "pebble", Resume: true, RestoreFrom: "/x", SavepointDir: "/sp"}
	got := Command(o, "--resume")
	want := "weir demo --kafka-data '/tmp/my kafka' --checkpoint-dir /tmp/chk --orders 6000 --days 1 --parallelism 3 --malformed 0 --seed 5 --live 0s --state-backend pebble --resume"
	if got != want {
		t.Fatalf("Command:\n got %s\nwant %s", got, want)
	}
	if got := Command(Options{Seed: 1}, "--restore", "/sp"); got != "weir demo --restore /sp" {
		t.Fatalf("Command of the defaults: %s", got)
	}
}
