package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirproject/weir/broker"
)

// TestHandshakeListsMechanisms: a SaslHandshake answer lists the enabled
// mechanisms (the users'), as Kafka's does, over TLS and in plaintext;
// kafkajs refuses to authenticate without the list. Clients that ignore it
// (franz-go) still authenticate, and a wrong password is still refused.
func TestHandshakeListsMechanisms(t *testing.T) {
	ca, err := broker.SelfSignedCA("mechanisms test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.ServerTLS(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	users := []broker.User{{Mechanism: "SCRAM-SHA-512", Name: "alice", Password: "Pw-1"}, {Mechanism: "PLAIN", Name: "bob", Password: "Pw-2"}}
	for _, withTLS := range []bool{false, true} {
		o := broker.Options{Users: users, Topics: map[string]int32{"t": 1}}
		if withTLS {
			o.TLS = srv
		}
		b, err := broker.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		dial := func() net.Conn {
			c, err := net.DialTimeout("tcp", b.Addr(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if withTLS {
				c = tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			return c
		}

		// Two requests in one write, the handshake second: its answer
		// lists PLAIN and SCRAM-SHA-512; the ApiVersions answer before it
		// is untouched.
		c := dial()
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("mechanisms-test"))
		av := kmsg.NewPtrApiVersionsRequest()
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
		if _, err := c.Write(append(f.AppendRequest(nil, av, 7), f.AppendRequest(nil, hs, 8)...)); err != nil {
			t.Fatal(err)
		}
		avResp := readAnswer(t, c, 7, av)
		if avResp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 || len(avResp.(*kmsg.ApiVersionsResponse).ApiKeys) == 0 {
			t.Fatalf("TLS %v: ApiVersions answer = %+v", withTLS, avResp)
		}
		hsResp := readAnswer(t, c, 8, hs).(*kmsg.SASLHandshakeResponse)
		if hsResp.ErrorCode != 0 || !slices.Equal(hsResp.SupportedMechanisms, []string{"PLAIN", "SCRAM-SHA-512"}) {
			t.Fatalf("TLS %v: handshake answer = error %d, mechanisms %q; want 0, [PLAIN SCRAM-SHA-512]", withTLS, hsResp.ErrorCode, hsResp.SupportedMechanisms)
		}
		c.Close()

		// franz-go authenticates; a wrong password does not.
		for _, pass := range []string{"Pw-1", "wrong"} {
			opts := []kgo.Opt{kgo.SeedBrokers(b.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism()), kgo.RequestRetries(0)}
			if withTLS {
				opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cancel()
			cl.Close()
			if (err == nil) != (pass == "Pw-1") {
				t.Fatalf("TLS %v, password %q: metadata error %v", withTLS, pass, err)
			}
		}
	}
}

// readAnswer reads one answer frame with correlation id corr to req.
func readAnswer(t *testing.T, c net.Conn, corr int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		t.Fatalf("answer to correlation id %d, want %d", got, corr)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:4])-4)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}
