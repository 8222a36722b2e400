package kafkasec

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// validate returns the problems of a, each naming the field (S2).
func (a *SASL) validate() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafkasec: sasl."+format, args...))
	}
	// set lists the fields given, to refuse those the mechanism ignores.
	set := map[string]bool{
		"username": a.Username != "", "password": a.Password != "", "passwordFile": a.PasswordFile != "",
		"token": a.Token != "", "tokenFile": a.TokenFile != "", "tokenURL": a.TokenURL != "",
		"clientID": a.ClientID != "", "clientSecret": a.ClientSecret != "", "clientSecretFile": a.ClientSecretFile != "",
		"scope": a.Scope != "", "extensions": len(a.Extensions) > 0,
		"accessKey": a.AccessKey != "", "secretKey": a.SecretKey != "", "sessionToken": a.SessionToken != "",
	}
	var allowed []string
	switch a.Mechanism {
	case Plain, ScramSHA256, ScramSHA512:
		allowed = []string{"username", "password", "passwordFile"}
		if a.Username == "" {
			bad("username: empty; %s needs the user name", a.Mechanism)
		}
		errs = append(errs, oneSecret("password", a.Password, "passwordFile", a.PasswordFile, a.Mechanism)...)
	case OAuthBearer:
		allowed = []string{"token", "tokenFile", "tokenURL", "clientID", "clientSecret", "clientSecretFile", "scope", "extensions"}
		n := 0
		for _, k := range []string{"token", "tokenFile", "tokenURL"} {
			if set[k] {
				n++
			}
		}
		if n != 1 {
			bad("%s: want exactly one of token, tokenFile, or tokenURL with clientID and clientSecret (got %d)", a.Mechanism, n)
		}
		if a.TokenFile != "" {
			if _, err := os.Stat(a.TokenFile); err != nil {
				bad("tokenFile: %v", err)
			}
		}
		if a.TokenURL != "" {
			u, err := url.Parse(a.TokenURL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad("tokenURL: %q: want an http(s) URL such as https://login.example.com/oauth2/token", a.TokenURL)
			}
			if a.ClientID == "" {
				bad("clientID: empty; the client-credentials grant at tokenURL needs the client id")
			}
			errs = append(errs, oneSecret("clientSecret", a.ClientSecret, "clientSecretFile", a.ClientSecretFile, "tokenURL")...)
		} else {
			for _, k := range []string{"clientID", "clientSecret", "clientSecretFile", "scope"} {
				if set[k] {
					bad("%s: only with tokenURL (the client-credentials grant)", k)
				}
			}
		}
	case AWSMSKIAM:
		allowed = []string{"accessKey", "secretKey", "sessionToken"}
		if (a.AccessKey == "") != (a.SecretKey == "") {
			bad("accessKey and secretKey go together; give both, or neither to use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		if a.AccessKey == "" && a.SessionToken != "" {
			bad("sessionToken: only with accessKey and secretKey")
		}
	case "":
		bad("mechanism: empty; want one of %s", strings.Join(Mechanisms, ", "))
		return errs
	default:
		bad("mechanism: %q: want one of %s", a.Mechanism, strings.Join(Mechanisms, ", "))
		return errs
	}
	var extra []string
	for k, v := range set {
		if v && !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		bad("%s: not used by %s, which reads %s", k, a.Mechanism, strings.Join(allowed, ", "))
	}
	return errs
}

// oneSecret checks that exactly one of a literal secret and a secret file
// is given, and that the file can be read.
func oneSecret(name string, v Secret, fileName, file, who string) []error {
	switch {
	case v != "" && file != "":
		return []error{fmt.Errorf("kafkasec: sasl.%s and sasl.%s both given; want one", name, fileName)}
	case v == "" && file == "":
		return []error{fmt.Errorf("kafkasec: sasl.%s: %s needs %s (from an environment variable) or %s", name, who, name, fileName)}
	case file != "":
		if _, err := readSecretFile(file); err != nil {
			return []error{fmt.Errorf("kafkasec: sasl.%s: %w", fileName, err)}
		}
	}
	return nil
}

// mechanism builds the franz-go SASL mechanism of a (a validated).
func (a *SASL) mechanism() (sasl.Mechanism, error) {
	switch a.Mechanism {
	case Plain, ScramSHA256, ScramSHA512:
		pass := newSecretSource(a.Password, a.PasswordFile)
		user := a.Username
		switch a.Mechanism {
		case Plain:
			return plain.Plain(func(context.Context) (plain.Auth, error) {
				p, err := pass.get()
				return plain.Auth{User: user, Pass: p}, err
			}), nil
		case ScramSHA256:
			return scram.Sha256(func(context.Context) (scram.Auth, error) {
				p, err := pass.get()
				return scram.Auth{User: user, Pass: p}, err
			}), nil
		default:
			return scram.Sha512(func(context.Context) (scram.Auth, error) {
				p, err := pass.get()
				return scram.Auth{User: user, Pass: p}, err
			}), nil
		}
	case OAuthBearer:
		tokens, err := a.tokenSource()
		if err != nil {
			return nil, err
		}
		ext := a.Extensions
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := tokens.token(ctx)
			return oauth.Auth{Token: tok, Extensions: ext}, err
		}), nil
	case AWSMSKIAM:
		ak, sk, st := a.AccessKey, string(a.SecretKey), string(a.SessionToken)
		return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
			if ak != "" {
				return aws.Auth{AccessKey: ak, SecretKey: sk, SessionToken: st, UserAgent: "weir"}, nil
			}
			env := aws.Auth{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
				SessionToken: os.Getenv("AWS_SESSION_TOKEN"), UserAgent: "weir"}
			if env.AccessKey == "" || env.SecretKey == "" {
				return aws.Auth{}, errors.New("kafkasec: AWS_MSK_IAM: no credentials: set sasl.accessKey and sasl.secretKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
			}
			return env, nil
		}), nil
	}
	return nil, fmt.Errorf("kafkasec: sasl.mechanism: %q: want one of %s", a.Mechanism, strings.Join(Mechanisms, ", "))
}

// secretSource is a secret given literally or by a file; the file is
// re-read when its modification time or size changes (S5).
type secretSource struct {
	literal string
	file    string
	mu      struct {
		sync.Mutex
		stamp fileStamp
		value string
	}
}

type fileStamp struct {
	mod  int64
	size int64
}

func newSecretSource(v Secret, file string) *secretSource {
	return &secretSource{literal: string(v), file: file}
}

func (s *secretSource) get() (string, error) {
	if s.file == "" {
		return s.literal, nil
	}
	fi, err := os.Stat(s.file)
	if err != nil {
		return "", fmt.Errorf("kafkasec: secret file: %w", err)
	}
	st := fileStamp{fi.ModTime().UnixNano(), fi.Size()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.value != "" && s.mu.stamp == st {
		return s.mu.value, nil
	}
	v, err := readSecretFile(s.file)
	if err != nil {
		return "", err
	}
	s.mu.value, s.mu.stamp = v, st
	return v, nil
}

// readSecretFile reads a secret file, trimming surrounding white space
// (a trailing newline from echo). Errors name the file only (S3).
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("kafkasec: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("kafkasec: secret file %s is empty", path)
	}
	return v, nil
}
