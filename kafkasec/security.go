package kafkasec

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The SASL mechanisms SASL.Mechanism accepts (Kafka's names).
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
	AWSMSKIAM   = "AWS_MSK_IAM"
)

// Mechanisms lists the accepted SASL mechanisms, for messages and flags.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer, AWSMSKIAM}

// Security configures TLS and SASL for a Kafka client. The zero value is a
// plaintext connection without authentication (S1). It is a value: copy
// it freely; the clients built from it share the caches of file secrets
// and OAuth tokens made by Opts.
type Security struct {
	// TLS, when not nil, connects over TLS (Kafka's SSL, or SASL_SSL
	// with SASL). nil means plaintext.
	TLS *TLS
	// SASL, when not nil, authenticates each connection. nil means none.
	SASL *SASL
	// Logger receives the warning that InsecureSkipVerify is on (S4).
	// nil means slog.Default().
	Logger *slog.Logger
}

// TLS configures the TLS connection to the brokers.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates. Empty means the system's roots (right for
	// Confluent Cloud, MSK, Redpanda Cloud).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its private
	// key, for mutual TLS (Aiven, MSK with TLS authentication). Both or
	// neither.
	CertFile, KeyFile string
	// ServerName overrides the name checked against the brokers'
	// certificates. Empty means each broker's host name.
	ServerName string
	// InsecureSkipVerify turns off the verification of the brokers'
	// certificates: anyone on the path can then read and change the
	// traffic. For tests only; Opts logs a warning when it is on (S4).
	InsecureSkipVerify bool
}

// SASL configures the authentication of each connection. Which fields a
// mechanism reads:
//
//	PLAIN, SCRAM-SHA-256, SCRAM-SHA-512: Username, and Password or PasswordFile
//	OAUTHBEARER: one of Token, TokenFile, or TokenURL with ClientID and
//	             ClientSecret or ClientSecretFile (Scope optional);
//	             Extensions optional (Confluent Cloud's logicalCluster,
//	             identityPoolId)
//	AWS_MSK_IAM: AccessKey and SecretKey (SessionToken optional); when
//	             AccessKey is empty, the AWS_ACCESS_KEY_ID,
//	             AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN environment
//	             variables at each authentication
//
// A field a mechanism does not read is an error, so that a typo does not
// pass silently.
type SASL struct {
	// Mechanism is one of Mechanisms. Required.
	Mechanism string

	Username string
	Password Secret
	// PasswordFile is read (whitespace trimmed) at each authentication
	// when it changed (S5).
	PasswordFile string

	// Token is a static OAuth bearer token.
	Token Secret
	// TokenFile holds the bearer token, re-read when it changes (S5):
	// a sidecar that rotates it needs no restart.
	TokenFile string
	// TokenURL is the OAuth 2.0 token endpoint for the client-credentials
	// grant (RFC 6749 section 4.4), with ClientID and ClientSecret (or
	// ClientSecretFile) sent as HTTP basic authentication.
	TokenURL         string
	ClientID         string
	ClientSecret     Secret
	ClientSecretFile string
	// Scope is sent with the client-credentials request when not empty.
	Scope string
	// Extensions are SASL extensions sent with the OAUTHBEARER token
	// (RFC 7628 section 3.1).
	Extensions map[string]string

	// AccessKey, SecretKey and SessionToken are AWS credentials for
	// AWS_MSK_IAM.
	AccessKey    string
	SecretKey    Secret
	SessionToken Secret

	watch *authWatch // made by Opts; see watch.go
}

// Secret is a string that prints as "[redacted]" in every fmt verb, in
// slog and in JSON (S3). Convert it with string(s) where the secret is
// really needed.
type Secret string

func (Secret) String() string   { return redacted }
func (Secret) GoString() string { return redacted }

// Format makes every verb (%v, %s, %q, %x, %d, ...) print "[redacted]".
func (s Secret) Format(f fmt.State, _ rune) { f.Write([]byte(redacted)) }

// LogValue keeps the secret out of slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText keeps the secret out of JSON and YAML output.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

const redacted = "[redacted]"

// Enabled reports whether s configures TLS or SASL.
func (s Security) Enabled() bool { return s.TLS != nil || s.SASL != nil }

// String describes s without its secrets (S3), such as
// "SASL_SSL SCRAM-SHA-512 user alice, CA ca.pem".
func (s Security) String() string {
	proto := "PLAINTEXT"
	switch {
	case s.TLS != nil && s.SASL != nil:
		proto = "SASL_SSL"
	case s.TLS != nil:
		proto = "SSL"
	case s.SASL != nil:
		proto = "SASL_PLAINTEXT"
	}
	parts := []string{proto}
	if a := s.SASL; a != nil {
		d := a.Mechanism
		switch {
		case a.Username != "":
			d += " user " + a.Username
		case a.TokenURL != "":
			d += " client " + a.ClientID + " at " + a.TokenURL
		case a.TokenFile != "":
			d += " token file " + a.TokenFile
		case a.AccessKey != "":
			d += " access key " + a.AccessKey
		}
		parts[0] += " " + d
	}
	if t := s.TLS; t != nil {
		var d []string
		if t.CAFile != "" {
			d = append(d, "CA "+t.CAFile)
		}
		if t.CertFile != "" {
			d = append(d, "client certificate "+t.CertFile)
		}
		if t.ServerName != "" {
			d = append(d, "server name "+t.ServerName)
		}
		if t.InsecureSkipVerify {
			d = append(d, "INSECURE: certificates not verified")
		}
		if len(d) > 0 {
			parts[0] += ", " + strings.Join(d, ", ")
		}
	}
	return parts[0]
}

// LogValue logs s as String does.
func (s Security) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Validate reports every problem of s in one error (S2), reading the files
// it names. Opts calls it.
func (s Security) Validate() error {
	var errs []error
	if t := s.TLS; t != nil {
		if _, err := t.config(); err != nil {
			errs = append(errs, err)
		}
	}
	if a := s.SASL; a != nil {
		errs = append(errs, a.validate()...)
	}
	return errors.Join(errs...)
}

// Opts returns the franz-go options that apply s (none for the zero
// value). It validates s first (S2) and warns through Logger when TLS
// verification is off (S4). Give the options to kgo.NewClient before any
// raw option that should override them.
func (s Security) Opts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if t := s.TLS; t != nil {
		cfg, err := t.config()
		if err != nil {
			return nil, err
		}
		if t.InsecureSkipVerify {
			l := s.Logger
			if l == nil {
				l = slog.Default()
			}
			l.Warn("kafka TLS certificate verification is OFF (insecureSkipVerify): anyone on the network path can read and change the traffic; use only in tests", "component", "kafkasec")
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if a := s.SASL; a != nil {
		m, err := a.mechanism()
		if err != nil {
			return nil, err
		}
		w := a.watchOf()
		opts = append(opts, kgo.SASL(watched{m, w}), kgo.WithHooks(w))
	}
	return opts, nil
}
