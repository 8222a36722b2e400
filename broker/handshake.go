package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// advertiseHandshakeV0 makes the cluster's ApiVersions answers list
// SaslHandshake from version 0, as every Kafka broker does. kfake lists
// 1..1 (it serves only v1, with SaslAuthenticate), and librdkafka (kcat,
// Confluent's clients) then refuses SASL altogether ("SASL Handshake not
// supported by broker"), although it sends v1 when SaslAuthenticate is
// listed. A client that does send v0 gets kfake's unsupported-version
// answer.
//
// The answer is kfake's own, read once through a client that
// authenticates as user u, with the one range changed; requests above
// version 4 (whose answers name the node) are left to kfake.
func advertiseHandshakeV0(c *kfake.Cluster, u User, withTLS bool) error {
	var mech sasl.Mechanism
	switch u.Mechanism {
	case "PLAIN":
		mech = plain.Auth{User: u.Name, Pass: u.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		mech = scram.Auth{User: u.Name, Pass: u.Password}.AsSha256Mechanism()
	default:
		mech = scram.Auth{User: u.Name, Pass: u.Password}.AsSha512Mechanism()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()[0]), kgo.SASL(mech), kgo.RequestRetries(2)}
	if withTLS {
		// Our own listener on loopback: the certificate is ours.
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "weir", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("read the ApiVersions answer: %w", err)
	}
	for i := range resp.ApiKeys {
		if resp.ApiKeys[i].ApiKey == kmsg.SASLHandshake.Int16() {
			resp.ApiKeys[i].MinVersion = 0
		}
	}
	c.ControlKey(kmsg.ApiVersions.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r.GetVersion() > 4 {
			return nil, nil, false
		}
		out := *resp
		out.Version = r.GetVersion()
		out.ApiKeys = append([]kmsg.ApiVersionsResponseApiKey(nil), resp.ApiKeys...)
		return &out, nil, true
	})
	return nil
}
