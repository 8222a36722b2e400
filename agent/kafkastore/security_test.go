package kafkastore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
)

// TestOverSASLSSL: the store writes and restores its action states through
// a broker that requires TLS and SCRAM-SHA-256; with a wrong password Open
// fails naming SASL authentication, not the password.
func TestOverSASLSSL(t *testing.T) {
	const password = "store-s3cret-pw"
	ca, err := broker.SelfSignedCA("store CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	must(t, ca.WriteCAFile(caFile))
	srv, err := ca.ServerTLS(nil, false)
	must(t, err)
	b, err := broker.Start(broker.Options{TLS: srv, Users: []broker.User{{Mechanism: kafkasec.ScramSHA256, Name: "agent", Password: password}}})
	must(t, err)
	t.Cleanup(func() { b.Close() })
	sec := func(pw string) kafkasec.Security {
		return kafkasec.Security{TLS: &kafkasec.TLS{CAFile: caFile},
			SASL: &kafkasec.SASL{Mechanism: kafkasec.ScramSHA256, Username: "agent", Password: kafkasec.Secret(pw)}}
	}
	topic := newTopic()
	opts := options(b, topic, 2)
	opts.Security = sec(password)
	s := open(t, opts, all)
	m0 := markerOf(t, s)
	st := storetest.State("k1", 1, 0, 0, 7, true)
	must(t, s.Put(st))
	must(t, s.Close())

	s2 := open(t, opts, all)
	defer s2.Close()
	must(t, s2.Restore([][]byte{m0}))
	got, err := s2.Get(st.ID)
	must(t, err)
	if !storetest.Equal(got, st) {
		t.Fatalf("after the restore over SASL_SSL Get = %+v, want %+v", got, st)
	}

	bad := options(b, topic, 2)
	bad.Security = sec("wrong-" + password)
	bad.RequestTimeout = 5e9
	_, err = Open(bad, all, maxP)
	if !errors.Is(err, kafkasec.ErrAuthentication) || strings.Contains(fmt.Sprint(err), password) {
		t.Fatalf("wrong password: want ErrAuthentication without the password, got %v", err)
	}
}
