package kafkasec

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// authWatch remembers whether the last SASL exchange of the clients built
// from one SASL ended with the broker closing the connection. A real
// Kafka answers a wrong password with SASL_AUTHENTICATION_FAILED, but some
// brokers (kfake, hence `weir broker`) close the connection instead, and
// franz-go then returns a bare EOF: Explain uses the watch to tell that
// EOF for what it is.
type authWatch struct {
	closedDuringAuth atomic.Bool
}

var watchMu sync.Mutex

// watch returns a's watch, made on first use. A SASL is shared by pointer
// among copies of a Security, so Opts and Explain of copies agree.
func (a *SASL) watchOf() *authWatch {
	watchMu.Lock()
	defer watchMu.Unlock()
	if a.watch == nil {
		a.watch = new(authWatch)
	}
	return a.watch
}

// OnBrokerRead implements kgo.HookBrokerRead: a failed read of a
// SaslAuthenticate response is a refused authentication.
func (w *authWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && key == kmsg.SASLAuthenticate.Int16() {
		w.closedDuringAuth.Store(true)
	}
}

// watched wraps a mechanism so that a completed authentication clears the
// watch.
type watched struct {
	sasl.Mechanism
	w *authWatch
}

func (m watched) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	s, first, err := m.Mechanism.Authenticate(ctx, host)
	if err != nil {
		return nil, nil, err
	}
	return watchedSession{s, m.w}, first, nil
}

type watchedSession struct {
	sasl.Session
	w *authWatch
}

func (s watchedSession) Challenge(resp []byte) (bool, []byte, error) {
	done, out, err := s.Session.Challenge(resp)
	if done && err == nil {
		s.w.closedDuringAuth.Store(false)
	}
	return done, out, err
}
