// Package broker runs weir's embedded Kafka-protocol broker: franz-go's
// kfake, listening on loopback TCP, in memory or persistent in a data
// directory. Tests, the demo and `weir broker` use it; clients (weir's Kafka
// connector, kcat, any Kafka client) talk to it over the Kafka protocol and
// cannot tell it from a real cluster except by its limits.
//
// # Guarantees
//
//	B1. Start returns only once every broker listens: Addr can be dialled at
//	    once.
//	B2. With Options.DataDir set, topics, records, committed offsets and
//	    transactions survive Close and a restart on the same directory.
//	    Without it everything lives in memory and is gone after Close.
//	    After a kill -9 (the process dies, the machine does not), a restart
//	    on the same directory, with or without SyncWrites, has:
//	      - every acknowledged write: records, commit and abort markers,
//	        committed offsets (transactional ones once their transaction
//	        committed), topics, producer ids and epochs;
//	      - every committed transaction visible to read_committed, and
//	        its outcome: its commit sent again by producer id and epoch
//	        (a retry, and how weir's exactly-once sink commits the
//	        transactions of a checkpoint it restores) succeeds when it was
//	        the producer's last transaction, as in Kafka (kfake's log
//	        loses it; Start restores it, pidslog.go);
//	      - every transaction that was open at the kill aborted before
//	        Start returns, flushed (pre-committed) ones included: an ABORT
//	        marker is written, its records and offset commits are never
//	        visible to read_committed, its producer, if it wrote records,
//	        is fenced (its next produce or EndTxn, a commit by producer id
//	        and epoch included, fails with an epoch error), and a new
//	        producer with the same transactional id then commits
//	        transactions that read_committed sees;
//	    but not what kfake saves only on Close: the consumer groups'
//	    members (consumers rejoin; committed offsets stay), idempotent
//	    producers' sequence numbers (a batch retried across the kill may be
//	    written twice; transactions are not affected, their retries fall
//	    in an aborted transaction), and log start offsets set by
//	    DeleteRecords (deleted records still in the segment files may
//	    reappear). After a power loss or an OS crash the same holds with
//	    SyncWrites, which fsyncs each write before acknowledging it;
//	    without it the last acknowledged writes can be lost, a commit
//	    marker included (its transaction is then aborted). A data
//	    directory serves one broker at a time: Start fails while another
//	    broker has it open (on Unix).
//	B3. Close is idempotent and safe to call concurrently with clients:
//	    their requests then fail with connection errors.
//	B4. Topics in Options.Topics exist before Start returns (on a restart
//	    from a data directory, topics already there are kept as they are).
//	B5. With Options.Users, a connection that does not authenticate with
//	    one of them (PLAIN or SCRAM, a wrong password included) gets no
//	    answer but SASL_AUTHENTICATION_FAILED or a closed connection; with
//	    Options.TLS, every listener speaks TLS only. OAUTHBEARER and
//	    AWS_MSK_IAM are not served (kfake enforces PLAIN and SCRAM). A
//	    SaslHandshake answer lists the users' mechanisms, as Kafka's
//	    lists its enabled ones (mechanisms.go).
//
// # Limits (kfake's)
//
// No replication, no quotas, one request-handling goroutine per cluster,
// LogAppendTime is not applied, topic auto-creation is off unless
// AutoCreateTopics. Compaction runs on Cluster().Compact() or when a topic
// sets log.cleaner.backoff.ms. Close consumer-group clients before the
// broker, or each of their closes waits for a time-out (about 5 s).
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configure Start. The zero value runs one in-memory broker on a
// random loopback port.
type Options struct {
	// Addr is host:port for the first broker to listen on. Empty means
	// 127.0.0.1 with a random port; port 0 means a random port. Other
	// brokers (Brokers > 1) listen on random ports of the same host.
	Addr string
	// DataDir, when set, persists the cluster there (created if needed)
	// and reloads it on Start. Empty means in memory.
	DataDir string
	// SyncWrites fsyncs every produced batch (slower; survives power
	// loss). Without it writes reach the OS page cache, as with Kafka's
	// default flush policy.
	SyncWrites bool
	// Brokers is the number of brokers. 0 means 1. Partitions get
	// leaders spread over the brokers.
	Brokers int
	// Topics are created at start if missing: name -> partitions (0 or
	// less: DefaultPartitions).
	Topics map[string]int32
	// DefaultPartitions is the partition count of auto-created topics and
	// of Topics entries without one. 0 means 1.
	DefaultPartitions int
	// AutoCreateTopics lets producers and metadata requests create topics.
	AutoCreateTopics bool
	// Configs are broker-level configs (log.retention.ms,
	// message.max.bytes, transaction.max.timeout.ms, ...).
	Configs map[string]string
	// Logger receives the broker's logs at LogLevel. nil means no logs.
	Logger *slog.Logger
	// LogLevel filters what reaches Logger. The zero value is
	// slog.LevelInfo.
	LogLevel slog.Level
	// ClusterID names the cluster in metadata. Empty means "weir".
	ClusterID string
	// Users, when not empty, turns SASL on: every connection must
	// authenticate as one of them (B5). Empty means no authentication.
	Users []User
	// TLS, when not nil, serves TLS on every listener with this
	// configuration (B5): plaintext clients are refused. See CA for a
	// self-signed one. nil means plaintext.
	TLS *tls.Config
}

// User is a SASL user of the broker: Mechanism is PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512 (a user may be listed once per mechanism). Users are
// superusers: the broker enforces no ACLs.
type User struct {
	Mechanism, Name, Password string
}

// saslMechanisms are the mechanisms the broker enforces (kfake's).
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

func checkUsers(users []User) error {
	for _, u := range users {
		if !slices.Contains(saslMechanisms, u.Mechanism) {
			return fmt.Errorf("broker: user %q: mechanism %q; want one of %s", u.Name, u.Mechanism, strings.Join(saslMechanisms, ", "))
		}
		if u.Name == "" || u.Password == "" {
			return fmt.Errorf("broker: a %s user needs a name and a password", u.Mechanism)
		}
	}
	return nil
}

// Broker is a running embedded cluster.
type Broker struct {
	c     *kfake.Cluster
	addrs []string
	once  sync.Once
	// running marks and locks the data directory while the broker
	// runs (nil in memory); Close removes it.
	running  *os.File
	recovery Recovery
}

// Recovery is what Start repaired in a data directory that the last broker
// on it left without Close (a kill -9): for the commands to report.
type Recovery struct {
	// Unclean: the last broker on the directory did not Close.
	Unclean bool
	// AbortedPartitions counts the partitions of transactions left open
	// that Start aborted (B2).
	AbortedPartitions int
	// RestoredCommits counts the committed transactions whose outcome
	// Start restored in kfake's producer-id log (pidslog.go).
	RestoredCommits int
}

// Recovery reports what Start repaired (the zero value for a clean start
// or a broker in memory).
func (b *Broker) Recovery() Recovery { return b.recovery }

// String says in one line what the recovery did, or "" when there was
// none: "recovered from an unclean shutdown: aborted the transactions left
// open on 2 partition(s); committed transactions restored: 3".
func (r Recovery) String() string {
	if !r.Unclean && r.RestoredCommits == 0 {
		return ""
	}
	s := "recovered from an unclean shutdown: "
	if r.AbortedPartitions > 0 {
		s += fmt.Sprintf("aborted the transactions left open on %d partition(s)", r.AbortedPartitions)
	} else {
		s += "no transaction was left open"
	}
	if r.RestoredCommits > 0 {
		s += fmt.Sprintf("; committed transactions restored: %d", r.RestoredCommits)
	}
	return s
}

// Start starts the cluster described by opts (B1, B4); Recovery reports
// what it repaired in a data directory left by a kill (B2).
func Start(opts Options) (*Broker, error) {
	n := opts.Brokers
	if n <= 0 {
		n = 1
	}
	host, port := "127.0.0.1", 0
	if opts.Addr != "" {
		h, p, err := net.SplitHostPort(opts.Addr)
		if err != nil {
			return nil, fmt.Errorf("broker: address %q: want host:port, such as 127.0.0.1:9092: %w", opts.Addr, err)
		}
		if h != "" {
			host = h
		}
		if p != "" {
			if port, err = strconv.Atoi(p); err != nil || port < 0 || port > 65535 {
				return nil, fmt.Errorf("broker: address %q: port %q is not a number in 0..65535", opts.Addr, p)
			}
		}
	}
	if err := checkUsers(opts.Users); err != nil {
		return nil, err
	}
	ports := make([]int, n)
	ports[0] = port
	parts := opts.DefaultPartitions
	if parts <= 0 {
		parts = 1
	}
	id := opts.ClusterID
	if id == "" {
		id = "weir"
	}
	// Options common to the cluster and to the recovery run before it.
	var kopts []kfake.Opt
	if opts.SyncWrites {
		kopts = append(kopts, kfake.SyncWrites())
	}
	if opts.AutoCreateTopics {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	if len(opts.Configs) > 0 {
		kopts = append(kopts, kfake.BrokerConfigs(opts.Configs))
	}
	if opts.Logger != nil {
		kopts = append(kopts, kfake.WithLogger(slogLogger{l: opts.Logger, min: opts.LogLevel}))
	}
	kopts = append(kopts, kfake.ClusterID(id), kfake.DefaultNumPartitions(parts))
	var running *os.File
	var rec Recovery
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("broker: data directory: %w", err)
		}
		kopts = append(kopts, kfake.DataDir(opts.DataDir))
		f, unclean, err := markRunning(opts.DataDir)
		if err != nil {
			return nil, err
		}
		running = f
		// Before kfake reads the directory: the outcome of transactions
		// ended before a kill (see pidslog.go).
		rec.Unclean = unclean
		if n, err := repairPIDsLog(opts.DataDir); err != nil {
			running.Close()
			return nil, fmt.Errorf("broker: data directory %s: %w", opts.DataDir, err)
		} else if rec.RestoredCommits = n; n > 0 && opts.Logger != nil {
			opts.Logger.Warn(fmt.Sprintf("restored the outcome of %d committed transaction(s) that an unclean shutdown left out of %s", n, pidsLogName), "component", "broker", "dir", opts.DataDir)
		}
		if unclean {
			// The last broker on this directory did not Close:
			// abort the transactions it left open (see recover.go).
			n, err := abortOpenTxns(kopts, len(ports))
			if err != nil {
				running.Close()
				return nil, fmt.Errorf("broker: data directory %s: abort the transactions left open by an unclean shutdown (retry; if it keeps failing, move the directory aside and report it): %w", opts.DataDir, err)
			}
			rec.AbortedPartitions = n
			if n > 0 && opts.Logger != nil {
				opts.Logger.Warn(fmt.Sprintf("aborted %d transaction partition(s) left open by an unclean shutdown", n), "component", "broker", "dir", opts.DataDir)
			}
		}
	}
	// SASL and TLS only on the served listeners: the recovery run above
	// listens on private ports and its client is plaintext.
	if len(opts.Users) > 0 {
		kopts = append(kopts, kfake.EnableSASL())
		for _, u := range opts.Users {
			kopts = append(kopts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
	}
	mechs := enabledMechanisms(opts.Users)
	if opts.TLS != nil && len(mechs) == 0 {
		kopts = append(kopts, kfake.TLS(opts.TLS))
	}
	kopts = append(kopts,
		kfake.Ports(ports...),
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			// kfake always asks for 127.0.0.1:port; listen on the host
			// the user chose instead.
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			l, err := net.Listen(network, net.JoinHostPort(host, p))
			if err != nil || len(mechs) == 0 {
				return l, err
			}
			// With SASL, handshake answers list the mechanisms (and
			// the listener does the TLS): mechanisms.go.
			return &mechanismsListener{Listener: l, tls: opts.TLS, mechs: mechs}, nil
		}),
	)
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		if running != nil {
			running.Close() // the mark stays: kfake may have loaded the directory
		}
		if isAddrInUse(err) {
			return nil, fmt.Errorf("broker: cannot listen on %s: the port is taken (another broker running?); choose another with --addr or stop the other process: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
		}
		if opts.DataDir != "" {
			return nil, fmt.Errorf("broker: start with data directory %s (if it holds another cluster's data or is damaged, use an empty directory): %w", opts.DataDir, err)
		}
		return nil, fmt.Errorf("broker: start: %w", err)
	}
	b := &Broker{c: c, addrs: c.ListenAddrs(), running: running, recovery: rec}
	if len(opts.Users) > 0 && (opts.TLS == nil || opts.TLS.ClientAuth < tls.VerifyClientCertIfGiven) {
		if err := advertiseHandshakeV0(c, opts.Users[0], opts.TLS != nil); err != nil {
			b.Close()
			return nil, fmt.Errorf("broker: SASL: %w", err)
		}
	}
	// Create the requested topics that do not exist yet (a restart from a
	// data directory keeps existing ones as they are).
	names := make([]string, 0, len(opts.Topics))
	for t := range opts.Topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		if c.TopicInfo(t) != nil {
			continue
		}
		p := opts.Topics[t]
		if p <= 0 {
			p = int32(parts)
		}
		if err := c.CreateTopic(t, p, nil); err != nil {
			b.Close()
			return nil, fmt.Errorf("broker: create topic %q: %w", t, err)
		}
	}
	return b, nil
}

func isAddrInUse(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "address already in use")
}

// Addr returns the bootstrap address: every broker's host:port, separated
// by commas (the form Kafka clients accept as bootstrap servers).
func (b *Broker) Addr() string { return strings.Join(b.addrs, ",") }

// Addrs returns every broker's host:port.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Cluster returns the underlying kfake cluster, for tests that compact
// topics, apply retention, move leaders or inject faults. Code that should
// also run against a real cluster must not use it.
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// CreateTopic creates a topic with the given partitions and topic configs
// (cleanup.policy, retention.ms, ...). It fails if the topic exists.
func (b *Broker) CreateTopic(name string, partitions int32, configs map[string]string) error {
	if err := b.c.CreateTopic(name, partitions, configs); err != nil {
		return fmt.Errorf("broker: create topic %q: %w", name, err)
	}
	return nil
}

// Close stops the cluster (B3). With a data directory everything is
// flushed first.
func (b *Broker) Close() error {
	b.once.Do(func() {
		b.c.Close()
		if b.running != nil {
			// A clean stop: the next Start needs no recovery.
			os.Remove(b.running.Name())
			b.running.Close()
		}
	})
	return nil
}

// Run starts a broker with opts and serves until ctx is done, then closes
// it. ready, if not nil, is called with the broker once it listens.
func Run(ctx context.Context, opts Options, ready func(*Broker)) error {
	b, err := Start(opts)
	if err != nil {
		return err
	}
	defer b.Close()
	if ready != nil {
		ready(b)
	}
	<-ctx.Done()
	return nil
}

// slogLogger adapts slog to kfake's Logger.
type slogLogger struct {
	l   *slog.Logger
	min slog.Level
}

func (s slogLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	var lv slog.Level
	switch level {
	case kfake.LogLevelError:
		lv = slog.LevelError
	case kfake.LogLevelWarn:
		lv = slog.LevelWarn
	case kfake.LogLevelInfo:
		lv = slog.LevelInfo
	case kfake.LogLevelDebug:
		lv = slog.LevelDebug
	default:
		return
	}
	if lv < s.min {
		return
	}
	s.l.Log(context.Background(), lv, fmt.Sprintf(msg, args...), "component", "broker")
}
