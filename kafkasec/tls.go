package kafkasec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// config builds the client's tls.Config, reading CAFile, CertFile and
// KeyFile. Errors name the files, never their content (S3).
//
// Each config has a session cache of its own (S7): a client opens a
// connection per broker and more over its life (the seed connection, one
// for produce, one for fetch, reconnections), and every one after the
// first to a broker resumes the session the broker handed out instead of
// a full handshake (no certificate chain sent and verified again). Go's
// client resumes only a session whose certificate has not expired and
// whose configuration still verifies it; a broker that does not issue
// tickets gets full handshakes, as before.
func (t *TLS) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify,
		ClientSessionCache: tls.NewLRUClientSessionCache(0)}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: tls.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafkasec: tls.caFile %s: no PEM certificate in it; want the CA certificate(s) in PEM (-----BEGIN CERTIFICATE-----)", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// tls's errors name what failed, not the key's bytes.
			return nil, fmt.Errorf("kafkasec: tls.certFile %s and tls.keyFile %s: want a PEM certificate and its PEM private key: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("kafkasec: tls.certFile and tls.keyFile go together (mutual TLS); give both or neither")
	}
	return cfg, nil
}

// Config returns the tls.Config t describes, for other TLS clients of the
// same shop (package format's schema registry client). It reads the files
// t names; errors name the files, never their content (S3). It does not
// log the insecureSkipVerify warning: the caller does.
func (t *TLS) Config() (*tls.Config, error) { return t.config() }
