package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrAuthentication marks a broker's refusal of the SASL credentials.
var ErrAuthentication = errors.New("kafkasec: SASL authentication failed")

// Explain wraps err, an error of a client built with s's options, with
// what it most likely means for s and what to change: a refused SASL
// authentication (ErrAuthentication, naming the mechanism and user, never
// the secret, S3), an untrusted broker certificate, a TLS client meeting
// a plaintext listener or the reverse. Other errors are returned as they
// are. errors.Is and errors.As still see err.
func (s Security) Explain(err error) error {
	if err == nil {
		return nil
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		recordHdr tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("%w for %s: check the user and secret (and the mechanism the broker enables): %w", ErrAuthentication, who(s), err)
	case s.SASL != nil && s.SASL.watchOf().closedDuringAuth.Load() && closed(err):
		return fmt.Errorf("%w for %s: the broker closed the connection during the SASL exchange; check the user and secret (and the mechanism the broker enables): %w", ErrAuthentication, who(s), err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("%w: the broker does not enable %s; ask which mechanisms it has (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, ...): %w", ErrAuthentication, mech(s), err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("kafkasec: the broker's TLS certificate is signed by an authority this client does not trust: give its CA in tls.caFile (now %s): %w", caName(s), err)
	case errors.As(err, &hostname):
		return fmt.Errorf("kafkasec: the broker's TLS certificate is not for the host dialled: use the broker's advertised name, or tls.serverName: %w", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("kafkasec: the broker's TLS certificate is not valid (expired, or not for a server): %w", err)
	case strings.Contains(err.Error(), "tls: certificate required") || strings.Contains(err.Error(), "tls: bad certificate") ||
		strings.Contains(err.Error(), "tls: unknown certificate authority"):
		return fmt.Errorf("kafkasec: the broker wants a client certificate it trusts (mutual TLS): set tls.certFile and tls.keyFile to one its CA issued: %w", err)
	case errors.As(err, &recordHdr):
		return fmt.Errorf("kafkasec: the broker does not speak TLS on this port: remove tls, or use its TLS listener: %w", err)
	case s.TLS == nil && closed(err):
		return fmt.Errorf("kafkasec: the broker closed the connection: if its listener is TLS (SSL or SASL_SSL), set tls (and sasl); %w", err)
	}
	return err
}

// closed reports whether err is the broker closing the connection.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broker closed the connection")
}

func who(s Security) string {
	a := s.SASL
	if a == nil {
		return "(no SASL configured)"
	}
	if a.Username != "" {
		return a.Mechanism + " user " + a.Username
	}
	return a.Mechanism
}

func mech(s Security) string {
	if s.SASL == nil {
		return "SASL"
	}
	return s.SASL.Mechanism
}

func caName(s Security) string {
	if s.TLS == nil || s.TLS.CAFile == "" {
		return "the system's roots"
	}
	return s.TLS.CAFile
}

// Diagnose connects once to brokers with s (one metadata request, no
// retries) and returns why it fails, explained (Explain), or nil if it
// works. Call it when a client's operation ran out of time: a refused
// authentication or a TLS mismatch makes franz-go retry until the
// deadline, hiding the reason behind "context deadline exceeded".
func (s Security) Diagnose(ctx context.Context, brokers []string) error {
	opts, err := s.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.RequestRetries(1), kgo.RetryTimeout(5*time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return s.Explain(err)
}
