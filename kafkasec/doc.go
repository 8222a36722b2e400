// Package kafkasec is the one security configuration of every weir Kafka
// client: TLS to the brokers and SASL authentication (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM). A Security
// value turns into franz-go client options (Security.Opts); the Kafka
// source and sinks (connector/kafka), the agent's Kafka action-state store
// (agent/kafkastore), the clustered job (cluster) and the pipeline runner
// (pipeline) all take one and apply it to each client they create, before
// their raw kgo options.
//
// The package sits in the foundation layer (docs/architecture.md) so that
// connectors and agents, which may not import each other, share it.
//
// # Guarantees
//
//	S1. The zero Security is a plaintext, unauthenticated connection:
//	    Opts returns no options.
//	S2. Validate (called by Opts) reports every problem in one error,
//	    prefixed "kafkasec:", naming the field and what it accepts; it
//	    reads the files a configuration names (CA, certificate, key,
//	    password and token files) so that a missing or unreadable file
//	    fails before any connection is made.
//	S3. Secrets (passwords, tokens, client secrets, AWS secret keys,
//	    private keys) never appear in an error, a log line, String or
//	    LogValue of this package: those print "[redacted]" or the file's
//	    name. A SASL failure reported by a broker is wrapped as
//	    ErrAuthentication with the mechanism and user, never the
//	    password.
//	S4. InsecureSkipVerify is only ever on when set explicitly, and Opts
//	    logs a warning each time it builds a client configuration with it.
//	S5. File-based secrets are read at each authentication when the file
//	    changed (modification time or size): a rotated password or token
//	    file is used by the next connection without a restart.
//	S6. OAUTHBEARER client credentials (RFC 6749 section 4.4) are fetched
//	    from TokenURL, cached until shortly before expires_in, and fetched
//	    again after; a token known to be expired (a JWT whose exp has
//	    passed, or a fetched token past its expiry) is refused with
//	    ErrTokenExpired before it is sent.
//	S7. The TLS configuration Opts builds keeps a session cache shared by
//	    the client's connections: a connection to a broker the client
//	    has already reached resumes its TLS session (an abbreviated
//	    handshake) when the broker issues session tickets.
//
// # Not done
//
// Kerberos (GSSAPI) is not supported. AWS credentials for AWS_MSK_IAM come
// from the configuration or from the AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN environment variables, not
// from the AWS SDK's full chain (profiles, instance metadata); the region
// comes from the broker host name or AWS_REGION.
package kafkasec
