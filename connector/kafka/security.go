package kafka

import "github.com/weirproject/weir/kafkasec"

// Security is TLS and SASL to the brokers: the one configuration of every
// weir Kafka client, defined in package kafkasec (where its guarantees are
// listed) and named here for the connector's users. Options.Security and
// SinkOptions.Security take it; the zero value is plaintext.
type Security = kafkasec.Security
