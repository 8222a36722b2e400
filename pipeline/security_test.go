package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/pipeline"
)

const secPassword = "Pipe-s3cret-0f-weir" // must never be printed

// saslSSLBroker starts a broker serving TLS with a fresh CA and requiring
// SCRAM-SHA-512 user weir; it returns the broker, the CA file, and a
// Security that connects to it.
func saslSSLBroker(t *testing.T, topics map[string]int32) (*broker.Broker, string, kafkasec.Security) {
	t.Helper()
	ca, err := broker.SelfSignedCA("pipeline test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := ca.WriteCAFile(caFile); err != nil {
		t.Fatal(err)
	}
	srv, err := ca.ServerTLS(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{TLS: srv, Topics: topics, Configs: map[string]string{"group.min.session.timeout.ms": "500"},
		Users: []broker.User{{Mechanism: "SCRAM-SHA-512", Name: "weir", Password: secPassword}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile},
		SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "weir", Password: secPassword}}
	return b, caFile, sec
}

func secureClient(t *testing.T, sec kafkasec.Security, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	so, err := sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(append(so, kgo.SeedBrokers(addr)), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

const secureYAML = `name: secure-count
job:
  checkpoint: {interval: 100ms, dir: %s}
kafka:
  brokers: ["%s"]
  tls:
    caFile: %s
  sasl:
    mechanism: SCRAM-SHA-512
    username: weir
    password: ${WEIR_TEST_KAFKA_PASSWORD}
source:
  kafka: {topics: [in], bounded: true}
  timestamp: t
steps:
  - keyBy: user
  - window:
      tumbling: 1h
      aggregate: {n: count}
sink:
  kafka: {topic: out, delivery: exactly-once, key: user}
`

// TestPipelineOverSASLSSLExactlyOnce runs a Kafka-to-Kafka exactly-once
// keyed count over SASL_SSL (SCRAM-SHA-512 over TLS) against the embedded
// broker that really requires both, and reads the committed counts back
// over the same security. The password is in neither the log nor the
// description.
func TestPipelineOverSASLSSLExactlyOnce(t *testing.T) {
	b, caFile, sec := saslSSLBroker(t, map[string]int32{"in": 2, "out": 1})
	const users, perUser = 5, 40
	prod := secureClient(t, sec, b.Addr(), kgo.DefaultProduceTopic("in"))
	var recs []*kgo.Record
	for i := range users * perUser {
		v, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("u%d", i%users), "t": 1_767_225_600_000 + i})
		recs = append(recs, &kgo.Record{Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEIR_TEST_KAFKA_PASSWORD", secPassword)
	spec, err := pipeline.Parse("secure.yaml", []byte(fmt.Sprintf(secureYAML, t.TempDir(), b.Addr(), caFile)))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if s.Outputs["sink"] != users {
		t.Fatalf("%d outputs, want %d\n%s", s.Outputs["sink"], users, log.String())
	}
	desc := pipeline.Describe(spec)
	for _, out := range []string{log.String(), desc, fmt.Sprintf("%v %+v", s, spec.Kafka)} {
		if strings.Contains(out, secPassword) {
			t.Fatalf("the password is printed: %s", out)
		}
	}
	if !strings.Contains(log.String(), "over SASL_SSL SCRAM-SHA-512 user weir") || !strings.Contains(desc, "SASL_SSL") {
		t.Errorf("the log and description should name the security: %q / %q", log.String(), desc)
	}
	// Read the committed output back over SASL_SSL.
	checkCounts(t, sec, b.Addr(), users, perUser)
}

// checkCounts reads topic out read-committed over sec and checks that it
// holds users counts, each perUser, and nothing more.
func checkCounts(t *testing.T, sec kafkasec.Security, addr string, users, perUser int) {
	t.Helper()
	cons := secureClient(t, sec, addr, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	counts := map[string]float64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	records := 0
	for len(counts) < users {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading out: %v (have %v)", err, counts)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var v map[string]any
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatal(err)
			}
			records++
			counts[string(r.Key)] = v["n"].(float64)
		})
	}
	for u, n := range counts {
		if n != float64(perUser) {
			t.Errorf("user %s: count %v, want %d", u, n, perUser)
		}
	}
	if records != users {
		t.Errorf("%d records in out, want %d (each count once)", records, users)
	}
}

// TestClusterOverSASLSSL runs the same pipeline in group mode (weir run
// --group): the group membership, the tasks topic, the exchange topic,
// the source and the exactly-once sink all connect over SASL_SSL.
func TestClusterOverSASLSSL(t *testing.T) {
	b, caFile, sec := saslSSLBroker(t, map[string]int32{"in": 2, "out": 1})
	const users, perUser = 4, 30
	prod := secureClient(t, sec, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range users * perUser {
		v, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("g%d", i%users), "t": 1_767_225_600_000 + i})
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEIR_TEST_KAFKA_PASSWORD", secPassword)
	spec, err := pipeline.Parse("secure.yaml", []byte(fmt.Sprintf(secureYAML, t.TempDir(), b.Addr(), caFile)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	s, err := pipeline.RunCluster(ctx, spec, pipeline.ClusterOptions{Group: "secure", KeyedTasks: 2, Member: "m0",
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: quietLog}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if strings.Contains(log.String(), secPassword) {
		t.Fatalf("the password is in the log:\n%s", log.String())
	}
	if len(s.Tasks) != 4 { // source-0, source-1, keyed-0, keyed-1
		t.Errorf("tasks %v, want 2 source and 2 keyed tasks", s.Tasks)
	}
	checkCounts(t, sec, b.Addr(), users, perUser)
}

// TestPipelineWrongPasswordFailsClearly: the broker refuses the password;
// the run fails before any work with an error at the kafka key naming SASL
// authentication failed, and neither password appears anywhere.
func TestPipelineWrongPasswordFailsClearly(t *testing.T) {
	b, caFile, _ := saslSSLBroker(t, map[string]int32{"in": 1, "out": 1})
	const wrong = "Wr0ng-pass-" + secPassword
	t.Setenv("WEIR_TEST_KAFKA_PASSWORD", wrong)
	spec, err := pipeline.Parse("secure.yaml", []byte(fmt.Sprintf(secureYAML, t.TempDir(), b.Addr(), caFile)))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	_, err = pipeline.Run(context.Background(), spec, pipeline.Options{}, &log)
	if !errors.Is(err, kafkasec.ErrAuthentication) || !strings.Contains(err.Error(), "SASL authentication failed for SCRAM-SHA-512 user weir") ||
		!strings.HasPrefix(err.Error(), "secure.yaml:4:1: kafka:") {
		t.Fatalf("want a positioned SASL authentication failure, got %v", err)
	}
	t.Log(err)
	if strings.Contains(err.Error()+log.String(), "Wr0ng-pass") || strings.Contains(err.Error()+log.String(), secPassword) {
		t.Fatalf("the password is printed: %v\n%s", err, log.String())
	}
}

// TestKcatProducesOverSASLSSL: an independent client, kcat (librdkafka),
// produces over SASL_SSL (SCRAM-SHA-512, verifying the broker's
// certificate against the CA file) into the broker, and the weir pipeline
// reads and counts what it wrote.
func TestKcatProducesOverSASLSSL(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); the interoperability check with librdkafka is skipped")
	}
	b, caFile, _ := saslSSLBroker(t, map[string]int32{"in": 1, "out": 1})
	const users, perUser = 4, 25
	var in bytes.Buffer
	for i := range users * perUser {
		fmt.Fprintf(&in, `{"user":"k%d","t":%d}`+"\n", i%users, 1_767_225_600_000+i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", b.Addr(), "-t", "in",
		"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=weir",
		"-X", "sasl.password="+secPassword, "-X", "ssl.ca.location="+caFile)
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	t.Setenv("WEIR_TEST_KAFKA_PASSWORD", secPassword)
	spec, err := pipeline.Parse("secure.yaml", []byte(fmt.Sprintf(secureYAML, t.TempDir(), b.Addr(), caFile)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(ctx, spec, pipeline.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != users {
		t.Fatalf("%d counts out of kcat's records, want %d", s.Outputs["sink"], users)
	}
	// And kcat reads weir's committed output back over SASL_SSL.
	out, err := exec.CommandContext(ctx, kcat, "-C", "-e", "-q", "-b", b.Addr(), "-t", "out", "-X", "isolation.level=read_committed",
		"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=weir",
		"-X", "sasl.password="+secPassword, "-X", "ssl.ca.location="+caFile, "-f", "%k %s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), fmt.Sprintf(`"n":%d`, perUser)); n != users {
		t.Fatalf("kcat read %d counts of %d, want %d:\n%s", n, perUser, users, out)
	}
}

func TestSecurityKeysParse(t *testing.T) {
	t.Setenv("WEIR_TEST_SECRET", "Lit3ral-value-x")
	for _, c := range []struct{ kafka, want string }{
		// Accepted forms.
		{"tls: true\n  sasl: {mechanism: PLAIN, username: key, password: \"${WEIR_TEST_SECRET}\"}", ""},
		{"tls: {caFile: ca.pem, certFile: c.pem, keyFile: k.pem, serverName: kafka.local}", ""},
		{"sasl: {mechanism: OAUTHBEARER, tokenURL: https://idp/token, clientID: weir, clientSecretFile: cs.txt, scope: kafka, extensions: {logicalCluster: lkc-1}}", ""},
		{"sasl: {mechanism: AWS_MSK_IAM}", ""},
		// Refused, with what is accepted.
		{"sasl: {mechanism: SCRAM-SHA-256, username: u, password: Lit3ral-value-x}",
			"k.yaml:3:59: kafka.sasl.password: a literal secret is refused (pipeline files get copied and committed); write ${ENV_VAR}, an environment variable holding it or kafka.sasl.passwordFile (a file holding it)"},
		{"sasl: {mechanism: GSSAPI}", `kafka.sasl.mechanism: "GSSAPI": want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM`},
		{"sasl: {mechanism: PLAIN, user: u}", "kafka.sasl: unknown key \"user\""},
		{"tls: {caFile: ca.pem, certFile: c.pem}", "kafka.tls: certFile and keyFile go together"},
		{"tls: {cafile: ca.pem}", "unknown key \"cafile\""},
	} {
		src := "kafka:\n  brokers: [\"h:9092\"]\n  " + c.kafka + "\nsource: {kafka: {topics: [in]}}\nsink: {stdout: {}}\n"
		spec, err := pipeline.Parse("k.yaml", []byte(src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.kafka, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.kafka, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "Lit3ral-value") {
			t.Errorf("%s: the error shows the secret: %v", c.kafka, err)
		}
		if spec != nil && strings.Contains(pipeline.Describe(spec)+fmt.Sprintf("%+v", *spec.Kafka), "Lit3ral-value") {
			t.Errorf("%s: the description shows the secret", c.kafka)
		}
	}
}
