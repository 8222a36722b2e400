package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/schemaregistry"
)

// brokerRegistry is `weir broker`'s embedded Schema Registry
// (--schema-registry), served beside the broker and stored in its
// _schemas topic.
type brokerRegistry struct {
	addr string // host:port, or "off"
}

const defaultRegistryAddr = "127.0.0.1:8081"

func (r *brokerRegistry) flags(f *pflag.FlagSet) {
	f.StringVar(&r.addr, "schema-registry", defaultRegistryAddr, "serve the embedded Schema Registry (Confluent's REST API, schemas in the _schemas topic) at host:port (port 0: any free port), or off")
}

func (r *brokerRegistry) check(k *checks) {
	if r.addr != "off" {
		if _, _, err := net.SplitHostPort(r.addr); err != nil {
			k.fail("--schema-registry %q: want host:port, such as %s, or off", r.addr, defaultRegistryAddr)
		}
	}
}

func (r *brokerRegistry) on() bool { return r.addr != "off" }

// listen binds the registry's address before the broker starts, so that
// a port in use fails the command before any work.
func (r *brokerRegistry) listen(o broker.Options) (net.Listener, error) {
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		return nil, fmt.Errorf("--schema-registry %s: %w (choose another with --schema-registry HOST:PORT, or --schema-registry off)", r.addr, err)
	}
	if o.TLS != nil {
		// The broker's certificate, and its client-certificate
		// requirement, for HTTPS too.
		l = tls.NewListener(l, o.TLS.Clone())
	}
	return l, nil
}

// serve starts the registry on b and serves it on l; stop closes both.
// The registry's Kafka client is a superuser of the broker: the first
// SASL user (SCRAM-SHA-512 first), trusting the broker's certificate.
// HTTP clients authenticate with the SASL users' names and passwords
// (basic auth) when the broker requires SASL.
func (r *brokerRegistry) serve(ctx context.Context, errOut io.Writer, l net.Listener, b *broker.Broker, o broker.Options, sec *brokerSecurity) (url string, stop func(), err error) {
	cfg := schemaregistry.Config{Brokers: b.Addrs(), Security: sec.clientSecurity(o),
		Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if len(o.Users) > 0 {
		cfg.Users = map[string]string{}
		for _, u := range o.Users {
			if _, ok := cfg.Users[u.Name]; !ok {
				cfg.Users[u.Name] = u.Password
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	reg, err := schemaregistry.Start(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("--schema-registry: %w", err)
	}
	srv := &http.Server{Handler: reg.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(errOut, "weir broker: schema registry:", err)
		}
	}()
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + l.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
		reg.Close()
	}, nil
}

// describe is the registry's start line.
func (r *brokerRegistry) describe(url string, o broker.Options) string {
	d := fmt.Sprintf("schema registry at %s (topic %s", url, schemaregistry.DefaultTopic)
	if len(o.Users) > 0 {
		d += "; basic auth with the SASL users"
	}
	return d + ")"
}

// clientSecurity is how an in-process client reaches the broker: the
// first SASL user, preferring SCRAM-SHA-512, then SCRAM-SHA-256, then
// PLAIN; over TLS, trusting the self-signed CA or the served certificate
// itself, presenting the served certificate when client certificates are
// required (it must then be signed by --tls-client-ca and allow client
// authentication).
func (s *brokerSecurity) clientSecurity(o broker.Options) kafkasec.Security {
	var sec kafkasec.Security
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} {
		for _, u := range o.Users {
			if u.Mechanism == mech && sec.SASL == nil {
				sec.SASL = &kafkasec.SASL{Mechanism: mech, Username: u.Name, Password: kafkasec.Secret(u.Password)}
			}
		}
	}
	switch {
	case o.TLS == nil:
	case s.selfSigned != "":
		sec.TLS = &kafkasec.TLS{CAFile: s.selfSigned}
	case s.cert != "":
		sec.TLS = &kafkasec.TLS{CAFile: s.cert}
		if s.clientCA != "" {
			sec.TLS.CertFile, sec.TLS.KeyFile = s.cert, s.key
		}
	}
	return sec
}
