package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Recovery after an unclean shutdown (issue 12).
//
// kfake writes every batch to its segment files as it arrives, but keeps
// the transaction coordinator's state (which producer has a transaction
// open on which partitions) in memory only. When it loads a data
// directory whose last run did not Close, it finds the transactions left
// open from the segment files (data batches of a producer with no control
// batch after them) and treats them as aborted, but only in memory: it
// writes no abort marker. Consumers need that marker. A read_committed
// client (franz-go's, Java's) skips every batch of an aborted producer from
// the transaction's first offset up to that producer's next ABORT marker;
// without one, every later transaction of the same producer id (a
// transactional id keeps its producer id across restarts) is skipped too,
// commits included. After a second restart the in-memory abort is gone as
// well, and the abandoned records become visible as committed.
//
// The repair: Start marks the data directory while a broker runs on it
// (runningFile, locked for the broker's lifetime). When the mark is there
// at Start, the previous broker died without Close, and before anybody
// can connect Start runs kfake on the directory on private random loopback
// ports, reads every partition's log (read_uncommitted, batch headers
// only), and writes an ABORT marker, through the Kafka protocol's
// WriteTxnMarkers request, for each producer whose last transactional
// batch in a partition is not a control batch. It then closes that
// cluster (which saves its state, the fenced producer epochs included)
// and starts the real one. The markers are ordinary log entries, so every
// later start, clean or not, sees these transactions as aborted.

// runningFile is the name, in a data directory, of the file that marks a
// broker running on it. Close removes it; a kill -9 leaves it behind.
const runningFile = "weir-broker.running"

// markRunning locks dir for this broker and marks it running. unclean
// reports that the mark was already there: the last broker on dir did not
// Close. The returned file holds the lock until it is closed.
func markRunning(dir string) (f *os.File, unclean bool, err error) {
	path := filepath.Join(dir, runningFile)
	_, err = os.Stat(path)
	unclean = err == nil
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("broker: data directory %s: create %s: %w", dir, runningFile, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, false, fmt.Errorf("broker: data directory %s is in use by another broker process; stop it or use another directory", dir)
		}
		return nil, false, fmt.Errorf("broker: data directory %s: lock %s: %w", dir, runningFile, err)
	}
	// The mark must be durable before kfake writes anything, or a power
	// loss could keep the writes and lose the mark.
	if err := syncMark(f, dir); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("broker: data directory %s: sync %s: %w", dir, runningFile, err)
	}
	return f, unclean, nil
}

func syncMark(f *os.File, dir string) error {
	if err := f.Sync(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openTxn is a transaction left open in one partition.
type openTxn struct {
	topic     string
	partition int32
	leader    int32
	pid       int64
	epoch     int16
}

// abortOpenTxns runs kfake with kopts on private loopback ports, writes an
// ABORT marker for every transaction left open in its log, and closes it.
// It returns the number of (transaction, partition) pairs aborted.
func abortOpenTxns(kopts []kfake.Opt, brokers int) (int, error) {
	kopts = append(append([]kfake.Opt(nil), kopts...),
		kfake.Ports(make([]int, brokers)...),
		kfake.ListenFn(func(network, _ string) (_ net.Listener, err error) {
			return net.Listen(network, "127.0.0.1:0")
		}))
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return 0, fmt.Errorf("list topics: %w", err)
	}
	if err := topics.Error(); err != nil {
		return 0, fmt.Errorf("list topics: %w", err)
	}
	var open []openTxn
	for _, t := range topics.Names() {
		d := topics[t]
		for _, p := range d.Partitions.Numbers() {
			info := c.PartitionInfo(t, p)
			if info == nil {
				continue
			}
			found, err := scanOpenTxns(ctx, cl, d, d.Partitions[p].Leader, p, info.LogStartOffset, info.HighWatermark)
			if err != nil {
				return 0, fmt.Errorf("read %s/%d: %w", t, p, err)
			}
			open = append(open, found...)
		}
	}
	for _, o := range open {
		if err := writeAbortMarker(ctx, cl, o); err != nil {
			return 0, fmt.Errorf("abort the transaction of producer %d on %s/%d: %w", o.pid, o.topic, o.partition, err)
		}
	}
	return len(open), nil
}

// scanOpenTxns reads partition p of topic d from start to end and returns
// the transactions still open at its end: for each producer whose last
// transactional batch is a data batch, not a control batch (a COMMIT or
// ABORT marker), that producer and the batch's epoch.
func scanOpenTxns(ctx context.Context, cl *kgo.Client, d kadm.TopicDetail, leader, p int32, start, end int64) ([]openTxn, error) {
	open := map[int64]int16{}
	for off := start; off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 0
		req.MaxBytes = 16 << 20
		req.IsolationLevel = 0 // read_uncommitted: the open transactions' batches too
		req.SessionEpoch = -1  // no fetch session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = d.Topic, d.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 16<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetch at offset %d: response without the partition", off)
		}
		rpart := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rpart.ErrorCode); err != nil {
			return nil, fmt.Errorf("fetch at offset %d: %w", off, err)
		}
		next := off
		for raw := rpart.RecordBatches; len(raw) >= 12; {
			n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
			if n < 12 || n > len(raw) {
				break // a partial batch at the end of the response
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(raw[:n]); err != nil {
				return nil, fmt.Errorf("fetch at offset %d: batch: %w", off, err)
			}
			raw = raw[n:]
			const transactional, control = 0x10, 0x20
			switch {
			case b.Attributes&control != 0:
				delete(open, b.ProducerID)
			case b.Attributes&transactional != 0:
				open[b.ProducerID] = b.ProducerEpoch
			}
			next = max(next, b.FirstOffset+int64(b.LastOffsetDelta)+1)
		}
		if next == off {
			return nil, fmt.Errorf("fetch at offset %d returned no batch below the high watermark %d", off, end)
		}
		off = next
	}
	out := make([]openTxn, 0, len(open))
	for pid, epoch := range open {
		out = append(out, openTxn{topic: d.Topic, partition: p, leader: leader, pid: pid, epoch: epoch})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// writeAbortMarker writes an ABORT marker for o. Its epoch is one above
// the transaction's, as when a coordinator aborts a transaction to fence
// its producer (kfake bumps the producer's epoch the same way when it
// finds the transaction open).
func writeAbortMarker(ctx context.Context, cl *kgo.Client, o openTxn) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID = o.pid
	m.ProducerEpoch = o.epoch
	if o.epoch < math.MaxInt16 {
		m.ProducerEpoch++
	}
	m.Committed = false
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic = o.topic
	mt.Partitions = []int32{o.partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	kresp, err := cl.Broker(int(o.leader)).Request(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
