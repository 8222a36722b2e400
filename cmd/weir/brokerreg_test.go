package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// startBrokerChild runs `weir broker` with args as a child process and
// returns the registry URL it prints; stop sends SIGTERM and waits.
func startBrokerChild(t *testing.T, args ...string) (url string, stop func()) {
	t.Helper()
	_, url, stop = startBrokerChildAddrs(t, args...)
	return url, stop
}

// startBrokerChildAddrs is startBrokerChild that also returns the
// broker's bootstrap address.
func startBrokerChildAddrs(t *testing.T, args ...string) (addr, url string, stop func()) {
	t.Helper()
	cmd := weirCmd(t, append([]string{"broker", "--addr", "127.0.0.1:0", "--schema-registry", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := watchLines(out, "schema registry at ")
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("weir broker exited: %v\n%s", err, w.text())
		}
	}
	t.Cleanup(stop)
	select {
	case <-w.seen("schema registry at "):
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("weir broker printed no registry line:\n%s", w.text())
	}
	w.mu.Lock()
	m := regexp.MustCompile(`(?s)broker listening on (\S+) .*schema registry at (\S+) `).FindStringSubmatch(w.buf.String())
	w.mu.Unlock()
	if m == nil {
		t.Fatalf("no address or no URL in the start lines")
	}
	return m[1], m[2], stop
}

func registryClient(t *testing.T, url, caFile, user, pass string) *sr.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := sr.NewClient(sr.URLs(url), sr.DialTLSConfig(&tls.Config{RootCAs: pool}), sr.BasicAuth(user, pass))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestBrokerSchemaRegistrySurvivesRestart: `weir broker --data` with TLS
// and SASL serves the registry over HTTPS with basic auth (its own Kafka
// client authenticating to the broker); after a restart on the same data
// the ids and subjects are the same.
func TestBrokerSchemaRegistrySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	data, ca := filepath.Join(dir, "data"), filepath.Join(dir, "ca.pem")
	args := []string{"--data", data, "--tls-self-signed", ca, "--sasl-user", "SCRAM-SHA-512:alice:Pw-1", "--sasl-user", "PLAIN:bob:Pw-2"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	url, stop := startBrokerChild(t, args...)
	if url[:8] != "https://" {
		t.Fatalf("registry URL %s: want https with TLS", url)
	}
	var re *sr.ResponseError
	if _, err := registryClient(t, url, ca, "alice", "wrong").Subjects(ctx); !errors.As(err, &re) || re.StatusCode != 401 {
		t.Fatalf("wrong password: %v; want 401", err)
	}
	cl := registryClient(t, url, ca, "bob", "Pw-2")
	v1, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"n","type":"int","default":0}]}`})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	url, _ = startBrokerChild(t, args...)
	cl = registryClient(t, url, ca, "alice", "Pw-1")
	versions, err := cl.SubjectVersions(ctx, "orders-value")
	if err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("versions after restart = %v, %v; want [1 2]", versions, err)
	}
	for _, want := range []sr.SubjectSchema{v1, v2} {
		got, err := cl.SchemaByVersion(ctx, "orders-value", want.Version)
		if err != nil || got.ID != want.ID || got.Schema.Schema != want.Schema.Schema {
			t.Fatalf("version %d after restart = %+v, %v; want %+v", want.Version, got, err, want)
		}
	}
	v3, err := cl.CreateSchema(ctx, "other", sr.Schema{Schema: `"string"`})
	if err != nil || v3.ID != v2.ID+1 {
		t.Fatalf("a new schema after restart = %+v, %v; want id %d", v3, err, v2.ID+1)
	}
}

// TestBrokerSchemaRegistryPortInUse: a registry address in use fails the
// command before the broker starts, naming the flag and the way out.
func TestBrokerSchemaRegistryPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, stderr, code := runWeir(t, "broker", "--addr", "127.0.0.1:0", "--schema-registry", l.Addr().String())
	if code == 0 || !strings.Contains(stderr, "--schema-registry "+l.Addr().String()) || !strings.Contains(stderr, "--schema-registry off") {
		t.Fatalf("exit %d, stderr %q; want a failure naming --schema-registry", code, stderr)
	}
}

// TestBrokerSchemaRegistryOff: --schema-registry off starts the broker
// alone: no registry line.
func TestBrokerSchemaRegistryOff(t *testing.T) {
	cmd := weirCmd(t, "broker", "--addr", "127.0.0.1:0", "--schema-registry", "off")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := watchLines(out, "broker listening on ")
	select {
	case <-w.seen("broker listening on "):
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("no start line:\n%s", w.text())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("weir broker: %v", err)
	}
	if text := w.text(); strings.Contains(text, "schema registry") {
		t.Fatalf("--schema-registry off printed %q", text)
	}
}
