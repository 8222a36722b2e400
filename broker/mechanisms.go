package broker

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// listMechanisms wraps the served listener so that every successful
// SaslHandshake answer lists the enabled mechanisms (those of
// Options.Users), as Kafka's does. kfake fills the list only when it
// refuses the mechanism asked for, and clients that check the list
// (kafkajs: "SASL SCRAM-SHA-512 mechanism is not supported by the
// server") then refuse to authenticate at all.
//
// kfake has no hook on its answers, so the bytes are rewritten on the
// connection: the wrapper watches the request frames read (size, api key,
// version, correlation id) for SaslHandshake's key, and rewrites the answer
// frame written with that correlation id. With Options.TLS the wrapper
// does the TLS itself (kfake would wrap it underneath, where the frames
// are ciphertext); kfake uses its TLS configuration for nothing else.
type mechanismsListener struct {
	net.Listener
	tls   *tls.Config // nil: plaintext
	mechs []string
}

// enabledMechanisms lists the users' mechanisms in Kafka's order.
func enabledMechanisms(users []User) []string {
	var out []string
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if slices.ContainsFunc(users, func(u User) bool { return u.Mechanism == m }) {
			out = append(out, m)
		}
	}
	return out
}

func (l *mechanismsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.tls != nil {
		c = tls.Server(c, l.tls)
	}
	return &mechanismsConn{Conn: c, mechs: l.mechs, pending: map[int32]bool{}}, nil
}

// mechanismsConn is one client connection. Read runs on kfake's reading
// goroutine and Write on its writing goroutine: pending, the correlation
// ids of SaslHandshake requests read and not yet answered, is shared under
// mu; each side's frame state is its own.
type mechanismsConn struct {
	net.Conn
	mechs []string

	mu      sync.Mutex
	pending map[int32]bool

	// Read side: the header of the request frame being read (size,
	// key, version, correlation id: 12 bytes), or the bytes of its body
	// still to come.
	rhdr  []byte
	rleft int

	// Write side: the answer frame's bytes held back (its size and
	// correlation id, and all of it when it answers a handshake), or
	// the bytes of a passed-through frame still to come.
	wbuf  []byte
	wleft int
}

func (c *mechanismsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	b := p[:n]
	for len(b) > 0 {
		if c.rleft > 0 {
			k := min(c.rleft, len(b))
			c.rleft -= k
			b = b[k:]
			continue
		}
		k := min(12-len(c.rhdr), len(b))
		c.rhdr = append(c.rhdr, b[:k]...)
		b = b[k:]
		if len(c.rhdr) < 12 {
			break
		}
		size := int(int32(binary.BigEndian.Uint32(c.rhdr)))
		if int16(binary.BigEndian.Uint16(c.rhdr[4:])) == kmsg.SASLHandshake.Int16() {
			c.mu.Lock()
			c.pending[int32(binary.BigEndian.Uint32(c.rhdr[8:]))] = true
			c.mu.Unlock()
		}
		c.rleft = max(size-8, 0)
		c.rhdr = c.rhdr[:0]
	}
	return n, err
}

func (c *mechanismsConn) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if c.wleft > 0 {
			k := min(c.wleft, len(p))
			if _, err := c.Conn.Write(p[:k]); err != nil {
				return 0, err
			}
			c.wleft -= k
			p = p[k:]
			continue
		}
		if len(c.wbuf) == 0 && len(p) >= 8 {
			// A frame starts here with its header whole: unless it
			// answers a handshake, pass it through without a copy.
			size := int(int32(binary.BigEndian.Uint32(p)))
			c.mu.Lock()
			handshake := c.pending[int32(binary.BigEndian.Uint32(p[4:]))]
			c.mu.Unlock()
			if !handshake {
				k := min(4+size, len(p))
				if _, err := c.Conn.Write(p[:k]); err != nil {
					return 0, err
				}
				c.wleft = 4 + size - k
				p = p[k:]
				continue
			}
		}
		c.wbuf = append(c.wbuf, p...)
		p = nil
		if len(c.wbuf) < 8 {
			break
		}
		size := int(int32(binary.BigEndian.Uint32(c.wbuf)))
		corr := int32(binary.BigEndian.Uint32(c.wbuf[4:]))
		c.mu.Lock()
		handshake := c.pending[corr]
		c.mu.Unlock()
		if !handshake {
			// Pass the frame through; what follows it is the next frame.
			k := min(4+size, len(c.wbuf))
			if _, err := c.Conn.Write(c.wbuf[:k]); err != nil {
				return 0, err
			}
			c.wleft = 4 + size - k
			p, c.wbuf = c.wbuf[k:], nil
			continue
		}
		if len(c.wbuf) < 4+size {
			break // the rest of the answer is yet to be written
		}
		c.mu.Lock()
		delete(c.pending, corr)
		c.mu.Unlock()
		frame := withMechanisms(c.wbuf[:4+size], c.mechs)
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
		p, c.wbuf = c.wbuf[4+size:], nil
	}
	return n, nil
}

// withMechanisms returns the SaslHandshake answer frame (v0 or v1: size,
// correlation id, error code, mechanisms) with mechs as its list when it
// succeeded with an empty one; any other frame as it is.
func withMechanisms(frame []byte, mechs []string) []byte {
	if len(frame) != 4+4+2+4 || binary.BigEndian.Uint16(frame[8:]) != 0 || int32(binary.BigEndian.Uint32(frame[10:])) > 0 {
		return frame
	}
	out := append([]byte(nil), frame[:10]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(mechs)))
	for _, m := range mechs {
		out = binary.BigEndian.AppendUint16(out, uint16(len(m)))
		out = append(out, m...)
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}
