package kafkasec

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrTokenExpired is returned (wrapped) when an OAUTHBEARER token is known
// to be expired before it is sent (S6): a JWT whose exp claim has passed,
// or a fetched token that outlived expires_in and could not be refetched.
var ErrTokenExpired = errors.New("kafkasec: OAUTHBEARER token expired")

// tokenSource yields the bearer token for one authentication.
type tokenSource interface {
	token(ctx context.Context) (string, error)
}

// tokenSource builds the source of a's OAUTHBEARER tokens (a validated).
func (a *SASL) tokenSource() (tokenSource, error) {
	switch {
	case a.Token != "":
		return &staticToken{src: newSecretSource(a.Token, ""), now: func() time.Time { return clock() }}, nil
	case a.TokenFile != "":
		return &staticToken{src: newSecretSource("", a.TokenFile), now: func() time.Time { return clock() }}, nil
	default:
		return &clientCredentials{url: a.TokenURL, id: a.ClientID, secret: newSecretSource(a.ClientSecret, a.ClientSecretFile),
			scope: a.Scope, client: http.DefaultClient, now: func() time.Time { return clock() }}, nil
	}
}

// staticToken is a token given literally or in a file (re-read when the
// file changes, S5). A JWT whose exp has passed is refused (S6).
type staticToken struct {
	src *secretSource
	now func() time.Time
}

func (s *staticToken) token(context.Context) (string, error) {
	tok, err := s.src.get()
	if err != nil {
		return "", err
	}
	if exp, ok := jwtExpiry(tok); ok && !s.now().Before(exp) {
		where := "sasl.token"
		if s.src.file != "" {
			where = "sasl.tokenFile " + s.src.file
		}
		return "", fmt.Errorf("%w at %s (%s): give a fresh token", ErrTokenExpired, exp.UTC().Format(time.RFC3339), where)
	}
	return tok, nil
}

// jwtExpiry returns the exp claim of tok if it is a JWT (three base64url
// parts whose second is a JSON object with a numeric exp). An opaque token
// has no expiry known here.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}

// refreshMargin is how long before its expiry a fetched token is replaced:
// a connection authenticated just before expiry would otherwise be cut at
// once by the broker.
const refreshMargin = 30 * time.Second

// clientCredentials fetches tokens with the OAuth 2.0 client-credentials
// grant (RFC 6749 section 4.4) and caches each until refreshMargin before
// its expires_in (S6). Concurrent authentications share one fetch.
type clientCredentials struct {
	url, id, scope string
	secret         *secretSource
	client         *http.Client
	now            func() time.Time

	mu struct {
		sync.Mutex
		token  string
		expiry time.Time // zero: no expires_in given, kept until refused
	}
}

func (c *clientCredentials) token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.mu.token != "" && (c.mu.expiry.IsZero() || now.Before(c.mu.expiry.Add(-refreshMargin))) {
		return c.mu.token, nil
	}
	tok, expiresIn, err := c.fetch(ctx)
	if err != nil {
		if c.mu.token != "" && !c.mu.expiry.IsZero() && now.Before(c.mu.expiry) {
			return c.mu.token, nil // still valid: the next authentication tries again
		}
		if c.mu.token != "" {
			return "", fmt.Errorf("%w at %s and fetching a new one failed: %w", ErrTokenExpired, c.mu.expiry.UTC().Format(time.RFC3339), err)
		}
		return "", err
	}
	c.mu.token = tok
	c.mu.expiry = time.Time{}
	if expiresIn > 0 {
		c.mu.expiry = now.Add(time.Duration(expiresIn) * time.Second)
	}
	if exp, ok := jwtExpiry(tok); ok && !now.Before(exp) {
		c.mu.token = ""
		return "", fmt.Errorf("%w: the token endpoint %s returned a token whose exp (%s) has passed; check the clocks", ErrTokenExpired, c.url, exp.UTC().Format(time.RFC3339))
	}
	return tok, nil
}

// fetch makes one token request: POST application/x-www-form-urlencoded
// grant_type=client_credentials (and scope), client authentication by
// HTTP basic (RFC 6749 sections 2.3.1, 4.4.2), and reads the JSON answer
// (section 5.1) or error (section 5.2).
func (c *clientCredentials) fetch(ctx context.Context) (string, int64, error) {
	secret, err := c.secret.get()
	if err != nil {
		return "", 0, err
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if c.scope != "" {
		form.Set("scope", c.scope)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("kafkasec: token request to %s: %w", c.url, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// Section 2.3.1: the id and secret are form-encoded before basic auth.
	req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(secret))
	resp, err := c.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("kafkasec: token request to %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("kafkasec: token request to %s: %w", c.url, err)
	}
	var r struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		Error       string          `json:"error"`
		Description string          `json:"error_description"`
	}
	jsonErr := json.Unmarshal(body, &r)
	if resp.StatusCode != http.StatusOK {
		if jsonErr == nil && r.Error != "" {
			msg := r.Error
			if r.Description != "" {
				msg += ": " + r.Description
			}
			return "", 0, fmt.Errorf("kafkasec: token endpoint %s refused client %q: %s (HTTP %d)", c.url, c.id, msg, resp.StatusCode)
		}
		return "", 0, fmt.Errorf("kafkasec: token endpoint %s: HTTP %d", c.url, resp.StatusCode)
	}
	if jsonErr != nil || r.AccessToken == "" {
		return "", 0, fmt.Errorf("kafkasec: token endpoint %s: the answer has no access_token (want JSON as in RFC 6749 section 5.1)", c.url)
	}
	if r.TokenType != "" && !strings.EqualFold(r.TokenType, "bearer") {
		return "", 0, fmt.Errorf("kafkasec: token endpoint %s: token_type %q; want Bearer", c.url, r.TokenType)
	}
	var exp int64
	if len(r.ExpiresIn) > 0 {
		// Some servers send the number as a string.
		s := strings.Trim(string(r.ExpiresIn), `"`)
		if _, err := fmt.Sscan(s, &exp); err != nil {
			return "", 0, fmt.Errorf("kafkasec: token endpoint %s: expires_in %s is not a number of seconds", c.url, r.ExpiresIn)
		}
	}
	return r.AccessToken, exp, nil
}

// clock is time.Now; tests replace it to move past a token's expiry.
var clock = time.Now
