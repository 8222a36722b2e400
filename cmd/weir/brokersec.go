package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/weirproject/weir/broker"
)

// brokerSecurity holds `weir broker`'s security flags: SASL users and TLS.
type brokerSecurity struct {
	users      []string // --sasl-user MECHANISM:USER:PASSWORD
	usersFile  string   // --sasl-users FILE
	cert, key  string   // --tls-cert, --tls-key
	selfSigned string   // --tls-self-signed CAFILE
	clientCA   string   // --tls-client-ca FILE (mutual TLS)
}

var brokerMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

func (s *brokerSecurity) flags(f *pflag.FlagSet) {
	f.StringArrayVar(&s.users, "sasl-user", nil, "require SASL; a user MECHANISM:USER:PASSWORD, MECHANISM one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (repeatable; the password shows in ps: prefer --sasl-users)")
	f.StringVar(&s.usersFile, "sasl-users", "", "require SASL; users from FILE, one 'MECHANISM USER PASSWORD' a line (# comments)")
	f.StringVar(&s.cert, "tls-cert", "", "serve TLS with this PEM certificate (with --tls-key)")
	f.StringVar(&s.key, "tls-key", "", "the PEM private key of --tls-cert")
	f.StringVar(&s.selfSigned, "tls-self-signed", "", "serve TLS with a CA and certificate made at start (for tests); write the CA's certificate to this file for clients")
	f.StringVar(&s.clientCA, "tls-client-ca", "", "require client certificates signed by the CA(s) in this PEM file (mutual TLS; with --tls-cert)")
}

// check validates the flags and fills o.Users (reading --sasl-users).
func (s *brokerSecurity) check(k *checks, o *broker.Options) {
	for _, u := range s.users {
		parts := strings.SplitN(u, ":", 3)
		if len(parts) != 3 || !slices.Contains(brokerMechanisms, parts[0]) || parts[1] == "" || parts[2] == "" {
			// The value may hold a password: name the user only.
			k.fail("--sasl-user: want MECHANISM:USER:PASSWORD with MECHANISM one of %s (got one for %q)", strings.Join(brokerMechanisms, ", "), userOf(parts))
			continue
		}
		o.Users = append(o.Users, broker.User{Mechanism: parts[0], Name: parts[1], Password: parts[2]})
	}
	if s.usersFile != "" {
		users, err := readBrokerUsers(s.usersFile)
		if err != nil {
			k.fail("--sasl-users: %v", err)
		}
		o.Users = append(o.Users, users...)
	}
	switch {
	case (s.cert == "") != (s.key == ""):
		k.fail("--tls-cert and --tls-key go together; give both, or --tls-self-signed CAFILE")
	case s.cert != "" && s.selfSigned != "":
		k.fail("--tls-cert and --tls-self-signed both given; want one")
	case s.clientCA != "" && s.cert == "":
		k.fail("--tls-client-ca needs --tls-cert and --tls-key")
	}
}

func userOf(parts []string) string {
	if len(parts) >= 2 {
		return parts[1]
	}
	return ""
}

// readBrokerUsers reads 'MECHANISM USER PASSWORD' lines; errors name the
// line, never the password.
func readBrokerUsers(path string) ([]broker.User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var users []broker.User
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 || !slices.Contains(brokerMechanisms, fs[0]) {
			return nil, fmt.Errorf("%s:%d: want 'MECHANISM USER PASSWORD' with MECHANISM one of %s", path, n, strings.Join(brokerMechanisms, ", "))
		}
		users = append(users, broker.User{Mechanism: fs[0], Name: fs[1], Password: fs[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%s: no users", path)
	}
	return users, nil
}

// apply sets o.TLS from the flags, making the self-signed CA if asked.
func (s *brokerSecurity) apply(o *broker.Options) error {
	switch {
	case s.cert != "":
		cfg, err := broker.ServerTLSFromFiles(s.cert, s.key, s.clientCA)
		if err != nil {
			return err
		}
		o.TLS = cfg
	case s.selfSigned != "":
		ca, err := broker.SelfSignedCA("weir broker CA")
		if err != nil {
			return err
		}
		var hosts []string
		if h, _, ok := strings.Cut(o.Addr, ":"); ok && h != "" {
			hosts = append(hosts, h)
		}
		cfg, err := ca.ServerTLS(hosts, false)
		if err != nil {
			return err
		}
		if err := ca.WriteCAFile(s.selfSigned); err != nil {
			return err
		}
		o.TLS = cfg
	}
	return nil
}

// describe is what the start line adds: the protocol and users' names.
func (s *brokerSecurity) describe(o broker.Options) string {
	var out []string
	if o.TLS != nil {
		d := "TLS"
		if s.selfSigned != "" {
			d += ", self-signed CA in " + s.selfSigned
		}
		if s.clientCA != "" {
			d += ", client certificates required"
		}
		out = append(out, d)
	}
	if len(o.Users) > 0 {
		var names []string
		for _, u := range o.Users {
			names = append(names, u.Mechanism+" "+u.Name)
		}
		out = append(out, "SASL users "+strings.Join(names, ", "))
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}
