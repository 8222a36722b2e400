package format

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
	"github.com/weirproject/weir/kafkasec"
)

// Registry is what the codecs need of a schema registry. Client is the
// implementation for a Confluent-compatible registry over HTTP; Memory
// holds schemas in the process (tests, and jobs whose schemas are fixed).
// Implementations are safe for concurrent use.
type Registry interface {
	// SchemaByID returns the schema registered under id. An id the
	// registry does not know is an error wrapping ErrUnknownSchema.
	SchemaByID(ctx context.Context, id int) (sr.Schema, error)
	// SchemaByVersion returns version of subject (-1: the latest).
	SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error)
	// Register registers s under subject (or finds it registered there)
	// and returns its id.
	Register(ctx context.Context, subject string, s sr.Schema) (int, error)
}

// ErrUnavailable wraps the last error of a fetch that was retried for
// RegistryConfig.RetryLimit without an answer.
var ErrUnavailable = errors.New("format: schema registry unavailable")

// RegistryConfig configures Client. Its zero value is refused (URL is
// required); every other field has a default.
type RegistryConfig struct {
	// URL is the registry's base URL, such as http://127.0.0.1:8081 (or
	// several, comma-separated, tried in order).
	URL string
	// Username and Password authenticate with HTTP basic auth ("": none).
	// Password prints as [redacted] (kafkasec.Secret).
	Username string
	Password kafkasec.Secret
	// TLS verifies the registry's certificate against CAFile (system
	// roots without), and presents CertFile/KeyFile (mutual TLS). Nil:
	// the defaults of net/http for https URLs.
	TLS *kafkasec.TLS
	// RequestTimeout bounds one HTTP request (0: 10s).
	RequestTimeout time.Duration
	// RetryLimit bounds how long a fetch is retried while the registry
	// does not answer (connection refused, timeouts, HTTP 5xx and 429),
	// with back-off from 100ms doubling to 5s; the caller waits meanwhile.
	// Past it the fetch fails with ErrUnavailable. 0 means 5 minutes.
	// Answers such as 404 are not retried.
	RetryLimit time.Duration
	// Logger receives a warning per retried fetch (nil: slog.Default()).
	// No secret is ever logged.
	Logger *slog.Logger
}

func (c RegistryConfig) validate() error {
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, errors.New("format: RegistryConfig.URL is empty; give the schema registry's URL, such as http://127.0.0.1:8081"))
	}
	for _, u := range splitURLs(c.URL) {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("format: registry URL %q: want http://host:port or https://host:port", u))
		}
	}
	if c.Password != "" && c.Username == "" {
		errs = append(errs, errors.New("format: registry password given without a user name; give both for basic auth"))
	}
	if c.RequestTimeout < 0 || c.RetryLimit < 0 {
		errs = append(errs, errors.New("format: RegistryConfig.RequestTimeout and RetryLimit: want 0 (the default) or a positive duration"))
	}
	if c.TLS != nil {
		if _, err := c.TLS.Config(); err != nil {
			errs = append(errs, fmt.Errorf("format: registry tls: %w", err))
		}
	}
	return errors.Join(errs...)
}

func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Client is a Registry over HTTP (franz-go's sr client) that caches what
// it fetched (R1: a schema id or a subject version is fetched once per
// Client, so decoding costs no request per record; the latest version of a
// subject is fetched once too, so a Client encodes with the schema that
// was latest when it first asked). Fetches that find the registry
// unreachable are retried (R2, RetryLimit). A Client is safe for
// concurrent use; concurrent fetches of one id are not merged.
type Client struct {
	cl       *sr.Client
	cfg      RegistryConfig
	log      *slog.Logger
	requests atomic.Int64

	mu struct {
		sync.Mutex
		ids      map[int]sr.Schema
		versions map[subjectVersion]sr.SubjectSchema
		ided     map[string]int // subject + "\x00" + schema text -> id
	}
}

type subjectVersion struct {
	subject string
	version int
}

// NewClient validates cfg and makes a Client. It sends no request: Check
// does.
func NewClient(cfg RegistryConfig) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.RetryLimit == 0 {
		cfg.RetryLimit = 5 * time.Minute
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tc, _ := cfg.TLS.Config() // checked by validate
		tr.TLSClientConfig = tc
		if cfg.TLS.InsecureSkipVerify {
			c.log.Warn("format: schema registry TLS certificates are NOT verified (insecureSkipVerify)", "url", cfg.URL)
		}
	}
	hc := &http.Client{Timeout: cfg.RequestTimeout, Transport: countingTransport{tr, &c.requests}}
	opts := []sr.ClientOpt{sr.URLs(splitURLs(cfg.URL)...), sr.HTTPClient(hc), sr.UserAgent("weir")}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, string(cfg.Password)))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("format: registry client: %w", err)
	}
	c.cl = cl
	c.mu.ids = map[int]sr.Schema{}
	c.mu.versions = map[subjectVersion]sr.SubjectSchema{}
	c.mu.ided = map[string]int{}
	return c, nil
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}

// Requests is the number of HTTP requests the Client has sent.
func (c *Client) Requests() int64 { return c.requests.Load() }

// Check asks the registry for its subjects once, without retrying: a
// registry that is down, refuses the credentials or is not a schema
// registry is an error that says so (R3: jobs check at build time and fail
// fast, rather than at their first record).
func (c *Client) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	if _, err := c.cl.Subjects(ctx); err != nil {
		return c.explain(err)
	}
	return nil
}

// explain words err for a person: the URL, and what to check.
func (c *Client) explain(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("format: schema registry %s refused the credentials (HTTP %d); check the registry's basicAuth user and password: %w", c.cfg.URL, re.StatusCode, err)
		}
		return fmt.Errorf("format: schema registry %s answered HTTP %d: %w", c.cfg.URL, re.StatusCode, err)
	}
	return fmt.Errorf("format: schema registry %s does not answer (is it running, and is the URL right?): %w", c.cfg.URL, err)
}

// retryable reports whether err means the registry did not answer (or
// answered that it cannot now), rather than a definite answer.
func retryable(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "unable to")
}

// retry calls f until it returns nil or an error that is not retryable,
// for at most RetryLimit, with back-off (R2).
func (c *Client) retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(c.cfg.RetryLimit)
	// 100ms doubled up to 5s (package internal/retry), on the system
	// clock: the waits are for a real registry to come back.
	b := retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}.Start()
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		wait := b.Next(0)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w: %s: retried for %v (RetryLimit): %w", ErrUnavailable, what, c.cfg.RetryLimit, c.explain(err))
		}
		c.log.Warn("format: schema registry fetch failed; retrying", "what", what, "attempt", attempt, "in", wait, "error", err)
		if err := retry.Sleep(ctx, clock.Real, wait); err != nil {
			return err
		}
	}
}

func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// SchemaByID implements Registry (R1, R2).
func (c *Client) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	c.mu.Lock()
	s, ok := c.mu.ids[id]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	err := c.retry(ctx, fmt.Sprintf("schema id %d", id), func(ctx context.Context) error {
		var err error
		s, err = c.cl.SchemaByID(ctx, id)
		return err
	})
	if err != nil {
		if notFound(err) {
			return s, Errorf(id, ErrUnknownSchema, "%s", c.cfg.URL)
		}
		return s, err
	}
	c.mu.Lock()
	c.mu.ids[id] = s
	c.mu.Unlock()
	return s, nil
}

// SchemaByVersion implements Registry (R1, R2).
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error) {
	key := subjectVersion{subject, version}
	c.mu.Lock()
	s, ok := c.mu.versions[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	what := fmt.Sprintf("subject %s version %d", subject, version)
	if version < 0 {
		what = fmt.Sprintf("subject %s latest version", subject)
	}
	err := c.retry(ctx, what, func(ctx context.Context) error {
		var err error
		s, err = c.cl.SchemaByVersion(ctx, subject, version)
		return err
	})
	if err != nil {
		if notFound(err) {
			return s, fmt.Errorf("format: %s: not in the registry %s (register it, or set autoRegister): %w", what, c.cfg.URL, err)
		}
		return s, err
	}
	c.mu.Lock()
	c.mu.versions[key] = s
	c.mu.ids[s.ID] = s.Schema
	c.mu.Unlock()
	return s, nil
}

// Register implements Registry (R1: registering one text under one
// subject twice sends one request).
func (c *Client) Register(ctx context.Context, subject string, s sr.Schema) (int, error) {
	key := subject + "\x00" + string(s.Type.String()) + "\x00" + s.Schema
	c.mu.Lock()
	id, ok := c.mu.ided[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	var ss sr.SubjectSchema
	err := c.retry(ctx, "register under subject "+subject, func(ctx context.Context) error {
		var err error
		ss, err = c.cl.CreateSchema(ctx, subject, s)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("format: registering a schema under subject %s: %w", subject, err)
	}
	c.mu.Lock()
	c.mu.ided[key] = ss.ID
	c.mu.ids[ss.ID] = s
	c.mu.Unlock()
	return ss.ID, nil
}

// Memory is a Registry held in the process: schemas added with Add or
// Register get ids 1, 2, ... in order. It serves tests and jobs whose
// writers' schemas are known in advance. Safe for concurrent use.
type Memory struct {
	mu       sync.Mutex
	ids      []sr.Schema // id i+1
	subjects map[string][]int
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{subjects: map[string][]int{}} }

// SchemaByID implements Registry.
func (m *Memory) SchemaByID(_ context.Context, id int) (sr.Schema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 1 || id > len(m.ids) {
		return sr.Schema{}, Errorf(id, ErrUnknownSchema, "in memory")
	}
	return m.ids[id-1], nil
}

// SchemaByVersion implements Registry.
func (m *Memory) SchemaByVersion(_ context.Context, subject string, version int) (sr.SubjectSchema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.subjects[subject]
	if version < 0 {
		version = len(vs)
	}
	if version < 1 || version > len(vs) {
		return sr.SubjectSchema{}, fmt.Errorf("format: subject %s version %d: not registered", subject, version)
	}
	id := vs[version-1]
	return sr.SubjectSchema{Subject: subject, Version: version, ID: id, Schema: m.ids[id-1]}, nil
}

// Register implements Registry: a schema already under subject (same type
// and text) keeps its id.
func (m *Memory) Register(_ context.Context, subject string, s sr.Schema) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.subjects[subject] {
		if o := m.ids[id-1]; o.Type == s.Type && o.Schema == s.Schema {
			return id, nil
		}
	}
	m.ids = append(m.ids, s)
	id := len(m.ids)
	m.subjects[subject] = append(m.subjects[subject], id)
	return id, nil
}
