package kafkasec_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
)

const testPassword = "s3cret-Pa55-w0rd" // looked for in every error below

// securedBroker starts a broker that serves TLS with a fresh CA and
// requires SCRAM-SHA-512 and PLAIN user alice; it returns the broker and
// the path of the CA's certificate.
func securedBroker(t *testing.T) (*broker.Broker, string) {
	t.Helper()
	ca, err := broker.SelfSignedCA("test CA")
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
	b, err := broker.Start(broker.Options{
		Users: []broker.User{{Mechanism: "SCRAM-SHA-512", Name: "alice", Password: testPassword}, {Mechanism: "SCRAM-SHA-256", Name: "alice", Password: testPassword}, {Mechanism: "PLAIN", Name: "alice", Password: testPassword}},
		TLS:   srv, Topics: map[string]int32{"t": 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, caFile
}

// roundTrip produces one record to topic t with sec and reads it back.
func roundTrip(t *testing.T, addr string, sec kafkasec.Security) error {
	t.Helper()
	opts, err := sec.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"),
		kgo.ConsumeTopics("t"), kgo.RequestRetries(1), kgo.RetryTimeout(3*time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		return sec.Explain(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		return sec.Explain(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return sec.Explain(err)
	}
	if fs.NumRecords() == 0 {
		return errors.New("no record read back")
	}
	return nil
}

func TestSecuredBrokerAcceptsEachMechanism(t *testing.T) {
	b, caFile := securedBroker(t)
	for _, m := range []string{kafkasec.ScramSHA512, kafkasec.ScramSHA256, kafkasec.Plain} {
		sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile}, SASL: &kafkasec.SASL{Mechanism: m, Username: "alice", Password: testPassword}}
		if err := roundTrip(t, b.Addr(), sec); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
}

func TestWrongPasswordIsRefused(t *testing.T) {
	b, caFile := securedBroker(t)
	for _, m := range []string{kafkasec.ScramSHA512, kafkasec.Plain} {
		wrong := "wrong-" + testPassword
		sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile}, SASL: &kafkasec.SASL{Mechanism: m, Username: "alice", Password: kafkasec.Secret(wrong)}}
		err := roundTrip(t, b.Addr(), sec)
		if err == nil {
			t.Fatalf("%s: a wrong password was accepted", m)
		}
		if !errors.Is(err, kafkasec.ErrAuthentication) || !strings.Contains(err.Error(), "SASL authentication failed") {
			t.Fatalf("%s: want ErrAuthentication naming SASL authentication failed, got %v", m, err)
		}
		if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), testPassword) {
			t.Fatalf("%s: the error shows the password: %v", m, err)
		}
		t.Logf("%s: %v", m, err)
	}
}

func TestPlaintextClientToTLSListenerIsRefused(t *testing.T) {
	b, _ := securedBroker(t)
	sec := kafkasec.Security{SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "alice", Password: testPassword}}
	err := roundTrip(t, b.Addr(), sec)
	if err == nil {
		t.Fatal("a plaintext client was served by a TLS listener")
	}
	if !strings.Contains(err.Error(), "if its listener is TLS") {
		t.Fatalf("want the error to say the listener may be TLS, got %v", err)
	}
	t.Log(err)
}

func TestWrongCAIsRefused(t *testing.T) {
	b, _ := securedBroker(t)
	other, err := broker.SelfSignedCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(t.TempDir(), "other.pem")
	if err := other.WriteCAFile(otherFile); err != nil {
		t.Fatal(err)
	}
	sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: otherFile}, SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "alice", Password: testPassword}}
	err = roundTrip(t, b.Addr(), sec)
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) || !strings.Contains(err.Error(), "x509") || !strings.Contains(err.Error(), "tls.caFile") {
		t.Fatalf("want an x509 unknown-authority error naming tls.caFile, got %v", err)
	}
	t.Log(err)
}

func TestPasswordFileIsReReadWhenItChanges(t *testing.T) {
	b, caFile := securedBroker(t)
	pf := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pf, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile}, SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA256, Username: "alice", PasswordFile: pf}}
	if err := roundTrip(t, b.Addr(), sec); !errors.Is(err, kafkasec.ErrAuthentication) {
		t.Fatalf("wrong password in the file: want ErrAuthentication, got %v", err)
	}
	if err := os.WriteFile(pf, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(t, b.Addr(), sec); err != nil {
		t.Fatalf("after the file was fixed: %v", err)
	}
}

// TestMutualTLS: a broker that requires client certificates accepts a
// client with one its CA issued and refuses one without.
func TestMutualTLS(t *testing.T) {
	ca, err := broker.SelfSignedCA("mtls CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	if err := ca.WriteCAFile(caFile); err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue("weir client", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := ca.ServerTLS(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{TLS: srv, Topics: map[string]int32{"t": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := roundTrip(t, b.Addr(), kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}}); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	err = roundTrip(t, b.Addr(), kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile}})
	if err == nil || !strings.Contains(err.Error(), "set tls.certFile and tls.keyFile") {
		t.Fatalf("without a client certificate: want an error naming tls.certFile, got %v", err)
	}
}

// TestTLSSessionsResumed: a client's connections after its first to a
// broker resume the TLS session (S7) and still authenticate.
func TestTLSSessionsResumed(t *testing.T) {
	b, caFile := securedBroker(t)
	sec := kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile},
		SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA512, Username: "alice", Password: testPassword}}
	opts, err := sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var full, resumed int
	hook := connectHook(func(conn net.Conn) {
		tc, ok := conn.(*tls.Conn)
		if !ok {
			t.Errorf("connection %T, want *tls.Conn", conn)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if tc.ConnectionState().DidResume {
			resumed++
		} else {
			full++
		}
	})
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("t"), kgo.WithHooks(hook))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The seed connection answers the metadata request; the produce
	// goes over a connection to broker 0, a second one to the same
	// address.
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(sec.Explain(err))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(sec.Explain(err))
	}
	mu.Lock()
	defer mu.Unlock()
	if full != 1 || resumed < 1 {
		t.Fatalf("%d full handshakes and %d resumed; want 1 full and the others resumed", full, resumed)
	}
}

// connectHook is a kgo.HookBrokerConnect calling f with each new
// connection.
type connectHook func(net.Conn)

func (f connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if err == nil {
		f(conn)
	}
}
