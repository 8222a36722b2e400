package kafkasec

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// firstMessage returns the client's first SASL message of a's mechanism.
func firstMessage(t *testing.T, a *SASL, host string) ([]byte, error) {
	t.Helper()
	if errs := a.validate(); len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	m, err := a.mechanism()
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := m.Authenticate(context.Background(), host)
	return msg, err
}

// jwt makes an unsigned JWT with claim exp (the signature is not checked
// by a client; the broker checks it).
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"weir","exp":%d}`, exp.Unix()))) + ".sig"
}

// rfc7628 is the client's initial response of RFC 7628 section 3.1
// without authzid: gs2-header "n,," then kvsep, auth=Bearer token, the
// extensions each with kvsep, and a final kvsep.
func rfc7628(token string, ext ...string) []byte {
	s := "n,,\x01auth=Bearer " + token + "\x01"
	for _, e := range ext {
		s += e + "\x01"
	}
	return []byte(s + "\x01")
}

func TestOAuthBearerStaticTokenMessage(t *testing.T) {
	msg, err := firstMessage(t, &SASL{Mechanism: OAuthBearer, Token: "opaque-token-1", Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}, "b:9092")
	if err != nil {
		t.Fatal(err)
	}
	if want := rfc7628("opaque-token-1", "identityPoolId=pool-2", "logicalCluster=lkc-1"); !bytes.Equal(msg, want) {
		t.Fatalf("message %q, want %q", msg, want)
	}
}

func TestOAuthBearerTokenFileReplacedIsUsedNext(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("token-A\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &SASL{Mechanism: OAuthBearer, TokenFile: f}
	m, err := a.mechanism()
	if err != nil {
		t.Fatal(err)
	}
	auth := func() []byte {
		_, msg, err := m.Authenticate(context.Background(), "b:9092")
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if got := auth(); !bytes.Equal(got, rfc7628("token-A")) {
		t.Fatalf("first: %q", got)
	}
	// Replace the file as a rotating sidecar does: write aside, rename.
	tmp := f + ".new"
	if err := os.WriteFile(tmp, []byte("token-B-longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	if got := auth(); !bytes.Equal(got, rfc7628("token-B-longer")) {
		t.Fatalf("after the file was replaced: %q, want the new token", got)
	}
}

func TestOAuthBearerExpiredTokenIsRefused(t *testing.T) {
	past := jwt(time.Now().Add(-time.Minute))
	_, err := firstMessage(t, &SASL{Mechanism: OAuthBearer, Token: Secret(past)}, "b:9092")
	if !errors.Is(err, ErrTokenExpired) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("want ErrTokenExpired, got %v", err)
	}
	if strings.Contains(err.Error(), past) {
		t.Fatalf("the error shows the token: %v", err)
	}
	if _, err := firstMessage(t, &SASL{Mechanism: OAuthBearer, Token: Secret(jwt(time.Now().Add(time.Hour)))}, "b:9092"); err != nil {
		t.Fatalf("a token valid for an hour: %v", err)
	}
}

// tokenServer is an RFC 6749 section 4.4 token endpoint: it checks the
// request and answers tokens tok-1, tok-2, ... valid for expiresIn.
type tokenServer struct {
	*httptest.Server
	fetches   atomic.Int32
	expiresIn int
	bad       atomic.Value // string: a problem with a request
}

func newTokenServer(t *testing.T, id, secret string, expiresIn int) *tokenServer {
	ts := &tokenServer{expiresIn: expiresIn}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		u, p, ok := r.BasicAuth()
		// Section 2.3.1: id and secret form-encoded inside basic auth.
		uu, _ := url.QueryUnescape(u)
		pp, _ := url.QueryUnescape(p)
		if !ok || uu != id || pp != secret {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"client authentication failed"}`)
			return
		}
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost ||
			r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
			r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "kafka" {
			ts.bad.Store(fmt.Sprintf("bad request: %s %q %v", r.Method, r.Header.Get("Content-Type"), r.PostForm))
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_request"}`)
			return
		}
		n := ts.fetches.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "Bearer", "expires_in": ts.expiresIn})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestOAuthBearerClientCredentialsRefetchesAfterExpiry(t *testing.T) {
	ts := newTokenServer(t, "weir client", "cl1ent/secret", 300)
	start := time.Now()
	now := start
	clock = func() time.Time { return now }
	t.Cleanup(func() { clock = time.Now })
	a := &SASL{Mechanism: OAuthBearer, TokenURL: ts.URL + "/oauth2/token", ClientID: "weir client", ClientSecret: "cl1ent/secret", Scope: "kafka"}
	m, err := a.mechanism()
	if err != nil {
		t.Fatal(err)
	}
	auth := func() []byte {
		t.Helper()
		_, msg, err := m.Authenticate(context.Background(), "b:9092")
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if got := auth(); !bytes.Equal(got, rfc7628("tok-1")) {
		t.Fatalf("first: %q", got)
	}
	now = start.Add(200 * time.Second) // still valid: cached
	if got := auth(); !bytes.Equal(got, rfc7628("tok-1")) || ts.fetches.Load() != 1 {
		t.Fatalf("within expires_in: %q after %d fetches, want tok-1 after 1", got, ts.fetches.Load())
	}
	now = start.Add(290 * time.Second) // within the refresh margin: refetched
	if got := auth(); !bytes.Equal(got, rfc7628("tok-2")) || ts.fetches.Load() != 2 {
		t.Fatalf("near expiry: %q after %d fetches, want tok-2 after 2", got, ts.fetches.Load())
	}
	if b := ts.bad.Load(); b != nil {
		t.Fatal(b)
	}
	// The endpoint goes away after the token expired: a clear error.
	now = start.Add(time.Hour)
	ts.Close()
	_, _, err = m.Authenticate(context.Background(), "b:9092")
	if !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired and no endpoint: want ErrTokenExpired, got %v", err)
	}
}

func TestOAuthBearerClientCredentialsRefusedClient(t *testing.T) {
	ts := newTokenServer(t, "weir", "right", 300)
	a := &SASL{Mechanism: OAuthBearer, TokenURL: ts.URL, ClientID: "weir", ClientSecret: "wrong-secret-value", Scope: "kafka"}
	_, err := firstMessage(t, a, "b:9092")
	if err == nil || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("want invalid_client without the secret, got %v", err)
	}
}

// TestMSKIAMMessage checks the AWS_MSK_IAM payload against the MSK IAM
// specification (aws-msk-iam-auth): a JSON object of version 2020_10_22,
// host, user-agent, action kafka-cluster:Connect and a SigV4 presigned
// query (algorithm, credential, date, expires, signedheaders, signature),
// whose signature is recomputed here independently.
func TestMSKIAMMessage(t *testing.T) {
	const host = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
	msg, err := firstMessage(t, &SASL{Mechanism: AWSMSKIAM, AccessKey: "AKIDEXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session-tok"}, host+":9098")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(msg, []byte("wJalrXUtnFEMI")) {
		t.Fatal("the secret key is in the message")
	}
	var m map[string]string
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("not a JSON object of strings: %v: %s", err, msg)
	}
	date := m["x-amz-date"]
	if len(date) != 16 {
		t.Fatalf("x-amz-date %q", date)
	}
	want := map[string]string{
		"version": "2020_10_22", "host": host, "user-agent": "weir", "action": "kafka-cluster:Connect",
		"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": "AKIDEXAMPLE/" + date[:8] + "/eu-west-1/kafka-cluster/aws4_request",
		"x-amz-expires": "900", "x-amz-signedheaders": "host", "x-amz-security-token": "session-tok",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	// SigV4: canonical request of GET / with the query (sorted, without
	// the signature), header host, empty payload.
	q := url.Values{}
	for _, k := range []string{"Action", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
		q.Set(k, m[strings.ToLower(k)])
	}
	emptyHash := sha256.Sum256(nil)
	canonical := "GET\n/\n" + strings.ReplaceAll(q.Encode(), "+", "%20") + "\nhost:" + host + "\n\nhost\n" + hex.EncodeToString(emptyHash[:])
	ch := sha256.Sum256([]byte(canonical))
	scope := date[:8] + "/eu-west-1/kafka-cluster/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(ch[:])
	mac := func(k []byte, s string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(s)); return h.Sum(nil) }
	k := mac(mac(mac(mac([]byte("AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), date[:8]), "eu-west-1"), "kafka-cluster"), "aws4_request")
	if sig := hex.EncodeToString(mac(k, sts)); m["x-amz-signature"] != sig {
		t.Fatalf("x-amz-signature %q, want %q (SigV4 recomputed)", m["x-amz-signature"], sig)
	}
}

func TestValidateNamesTheFieldAndNeverTheSecret(t *testing.T) {
	for _, c := range []struct {
		sec  Security
		want string
	}{
		{Security{SASL: &SASL{Mechanism: "GSSAPI"}}, `sasl.mechanism: "GSSAPI": want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM`},
		{Security{SASL: &SASL{Mechanism: ScramSHA512, Username: "u"}}, "sasl.password: SCRAM-SHA-512 needs password (from an environment variable) or passwordFile"},
		{Security{SASL: &SASL{Mechanism: Plain, Username: "u", Password: "hunter2-secret", Token: "tok-secret"}}, "sasl.token: not used by PLAIN"},
		{Security{SASL: &SASL{Mechanism: OAuthBearer}}, "want exactly one of token, tokenFile, or tokenURL"},
		{Security{SASL: &SASL{Mechanism: OAuthBearer, TokenURL: "ftp://x", ClientID: "c", ClientSecret: "hunter2-secret"}}, "tokenURL: \"ftp://x\": want an http(s) URL"},
		{Security{SASL: &SASL{Mechanism: Plain, Username: "u", PasswordFile: "/nonexistent/pw"}}, "sasl.passwordFile"},
		{Security{TLS: &TLS{CertFile: "c.pem"}}, "tls.certFile and tls.keyFile go together"},
		{Security{TLS: &TLS{CAFile: "/nonexistent/ca.pem"}}, "tls.caFile"},
	} {
		err := c.sec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "kafkasec: ") {
			t.Errorf("%v: got %v, want %q", c.sec, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "tok-secret") {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
	if opts, err := (Security{}).Opts(); err != nil || len(opts) != 0 {
		t.Fatalf("zero Security: %d options, %v; want none (S1)", len(opts), err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	sec := Security{TLS: &TLS{}, SASL: &SASL{Mechanism: ScramSHA256, Username: "alice", Password: "hunter2-secret"}}
	var logs bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&logs, nil))
	l.Info("config", "security", sec, "sasl", sec.SASL, "password", sec.SASL.Password)
	j, _ := json.Marshal(sec)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q %x", sec, sec.SASL, sec.SASL, sec.SASL.Password, sec.SASL.Password, sec.SASL.Password), sec.String(), logs.String(), string(j)} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, hex.EncodeToString([]byte("hunter2"))) {
			t.Fatalf("the password is printed: %s", s)
		}
	}
	if got := sec.String(); got != "SASL_SSL SCRAM-SHA-256 user alice" {
		t.Fatalf("String() = %q", got)
	}
}

func TestInsecureSkipVerifyIsLogged(t *testing.T) {
	var logs bytes.Buffer
	sec := Security{TLS: &TLS{InsecureSkipVerify: true}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := sec.Opts(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "insecureSkipVerify") {
		t.Fatalf("want a warning, got %q", logs.String())
	}
}
