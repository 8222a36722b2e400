package cluster

import "testing"

// The group membership's client id carries the member's name and its
// Advertise URL there and back; a client that is not a weir member is
// told apart.
func TestGroupClientID(t *testing.T) {
	for _, c := range []struct{ member, url string }{
		{"a", ""}, {"host-12", "http://10.0.0.5:8081/"}, {"with space", "https://x.example/ui/"}, {"url=odd", "http://h:1/"},
	} {
		id := groupClientID(c.member, c.url)
		m, u, ok := parseGroupClientID(id)
		if !ok || m != c.member || u != c.url {
			t.Errorf("%q: parsed as %q %q %v, want %q %q", id, m, u, ok, c.member, c.url)
		}
	}
	if _, _, ok := parseGroupClientID("kgo"); ok {
		t.Error(`client id "kgo" parsed as a weir member`)
	}
}
