package pipeline

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	gojson "github.com/goccy/go-json"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/httpsink"
	"github.com/weirproject/weir/connector/webhook"
	"github.com/weirproject/weir/internal/bytesize"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// HTTP sources and sinks of pipeline files: source.http (a webhook
// endpoint, package webhook) and sink.http (package httpsink). Parsing,
// checks and building live here; the parser (parse_source.go, parse_sink.go), the builder and group mode call
// them with one line each.

// HTTPSourceSpec is source.http: an endpoint taking POSTed JSON records.
type HTTPSourceSpec struct {
	Pos    Pos
	Listen string
	Path   string
	// Token is the bearer token's reference (${VAR}, expanded when the job
	// is built), TokenFile a file holding it; at most one.
	Token     string
	TokenFile string
	MaxBody   int64
	Queue     int
	// RetryAfter is the wait a 429 suggests (0: the default).
	RetryAfter time.Duration
}

// HTTPSinkSpec is sink.http: records POSTed to a URL.
type HTTPSinkSpec struct {
	URL            string
	Batch          int
	Format         string // array or lines ("": one record alone, or array for batches)
	IdempotencyKey string // header name; "none" sends none
	KeyPrefix      string
	// Headers keep their ${VAR} references; expanded when the job is built.
	Headers           map[string]string
	RequestsPerSecond float64
	RecordsPerSecond  float64
	Burst             int
	Timeout           time.Duration
	FlushInterval     time.Duration
	Retries           httpsink.Retry
	// DeadLetters names the output receiving the records the service
	// refused ("": dropped, counted).
	DeadLetters    string
	DeadLettersPos Pos
}

// httpSourceField is the http field of source.
func (d *dec) httpSourceField(s *SourceSpec, kinds *int) field {
	return field{name: "http", accepts: "a mapping", doc: "a webhook endpoint (connectors.md, \"Webhook source\")", fn: func(at string, k, v ast.Node) {
		*kinds++
		h := &HTTPSourceSpec{Pos: d.pos(k)}
		s.HTTP = h
		d.object(v, at,
			field{name: "listen", accepts: "host:port such as 127.0.0.1:8080", def: "`127.0.0.1:8080`", doc: "the address to listen on (loopback only by default)",
				fn: func(at string, _, v ast.Node) {
					if d.nonEmpty(v, at, "host:port such as 127.0.0.1:8080", &h.Listen) {
						if _, _, err := net.SplitHostPort(h.Listen); err != nil {
							d.errf(v, "%s: %q: want host:port such as 127.0.0.1:8080 (0.0.0.0:8080 for every interface)", at, h.Listen)
						}
					}
				}},
			field{name: "path", accepts: "a URL path such as /ingest", def: "`/ingest`", doc: "the URL path clients POST to",
				fn: func(at string, _, v ast.Node) {
					if d.nonEmpty(v, at, "a URL path such as /ingest", &h.Path) && !strings.HasPrefix(h.Path, "/") {
						d.errf(v, "%s: %q: want a URL path starting with /, such as /ingest", at, h.Path)
					}
				}},
			field{name: "token", accepts: "`${ENV}`", def: "none", doc: "the bearer token clients must send (401 without it)",
				fn: func(at string, _, v ast.Node) { h.Token = d.envReference(v, at, "tokenFile") }},
			field{name: "tokenFile", accepts: "a file holding the bearer token", def: "none", doc: "the token read from a file instead",
				fn: func(at string, _, v ast.Node) {
					d.nonEmpty(v, at, "a file holding the bearer token", &h.TokenFile)
				}},
			field{name: "maxBody", accepts: "a size such as 1MiB", doc: "the largest request body (413 above it)",
				fn: func(at string, _, v ast.Node) { h.MaxBody = d.byteSize(v, at) }},
			field{name: "queue", accepts: "an integer from 1 to 100000000", doc: "records held before requests are answered 429",
				fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 100_000_000, &h.Queue) }},
			field{name: "retryAfter", accepts: "a duration > 0", doc: "the `Retry-After` of a 429 answer",
				fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &h.RetryAfter) }},
		)
		if h.Token != "" && h.TokenFile != "" {
			d.errf(k, "%s: token and tokenFile both given; want one", at)
		}
	}}
}

// httpSinkField is the http field of a sink.
func (d *dec) httpSinkField(s *SinkSpec, what string, kinds *int) field {
	return field{name: "http", accepts: "a mapping", doc: "POST records to an HTTP service (connectors.md, \"HTTP sink\")",
		fn: func(at string, k, v ast.Node) {
			*kinds++
			h := &HTTPSinkSpec{}
			s.HTTP = h
			w := at
			d.object(v, w,
				field{name: "url", required: true, accepts: "an http:// or https:// URL", doc: "the URL records are POSTed to",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "an http:// or https:// URL", &h.URL) {
							if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
								d.errf(v, "%s: %q: want an http:// or https:// URL with a host", at, h.URL)
							}
						}
					}},
				field{name: "batch", accepts: "an integer from 1 to httpsink.MaxBatch", def: "1", doc: "records per request",
					fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, httpsink.MaxBatch, &h.Batch) }},
				field{name: "format", accepts: "`array`, `lines`", def: "`array`", doc: "a batch as a JSON array or as JSON lines",
					fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &h.Format, "array", "lines") }},
				field{name: "idempotencyKey", accepts: "a field path", def: "derived", doc: "the field whose value is the request's `Idempotency-Key` (else one stable across restores is derived)",
					fn: func(at string, _, v ast.Node) {
						if d.nonEmpty(v, at, "a header name such as Idempotency-Key, or none", &h.IdempotencyKey) &&
							h.IdempotencyKey != "none" && !headerName(h.IdempotencyKey) {
							d.errf(v, "%s: %q: want a header name such as Idempotency-Key, or none", at, h.IdempotencyKey)
						}
					}},
				field{name: "keyPrefix", accepts: "a prefix of the idempotency keys, unique to the job", def: "the job's name", doc: "prefix of the derived idempotency keys",
					fn: func(at string, _, v ast.Node) {
						d.nonEmpty(v, at, "a prefix of the idempotency keys, unique to the job", &h.KeyPrefix)
					}},
				field{name: "headers", accepts: "header: value (`${ENV}` expanded)", def: "none", doc: "headers sent with every request",
					fn: func(at string, _, v ast.Node) { h.Headers = d.headers(v, at) }},
				field{name: "rateLimit", accepts: "a mapping", def: "none", doc: "bound on the requests' and records' rate", fn: func(at string, _, v ast.Node) {
					d.object(v, at,
						field{name: "requestsPerSecond", accepts: "a number > 0", def: "none", doc: "the most requests per second",
							fn: func(at string, _, v ast.Node) { h.RequestsPerSecond = d.rate(v, at) }},
						field{name: "recordsPerSecond", accepts: "a number > 0", def: "none", doc: "the most records per second",
							fn: func(at string, _, v ast.Node) { h.RecordsPerSecond = d.rate(v, at) }},
						field{name: "burst", accepts: "an integer from 1 to 2^31-1", doc: "how far above the rate a burst may go",
							fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, math.MaxInt32, &h.Burst) }},
					)
				}},
				field{name: "timeout", accepts: "a duration > 0", doc: "bound on one request",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &h.Timeout) }},
				field{name: "flushInterval", accepts: "a duration > 0", def: "none", doc: "send what is buffered at least this often (else at checkpoints)",
					fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &h.FlushInterval) }},
				field{name: "retries", accepts: "a mapping", doc: "retries of 408, 429 and 5xx answers, with back-off and `Retry-After`",
					fn: func(at string, _, v ast.Node) {
						r := &h.Retries
						d.object(v, at,
							field{name: "attempts", accepts: "an integer from 1 to 1000", doc: "attempts per request",
								fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1000, &r.Attempts) }},
							field{name: "initial", accepts: "a duration > 0", doc: "the first back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.InitialDelay) }},
							field{name: "max", accepts: "a duration > 0", doc: "the longest back-off",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.MaxDelay) }},
							field{name: "maxRetryAfter", accepts: "a duration > 0", doc: "the longest `Retry-After` honoured",
								fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.MaxRetryAfter) }},
						)
					}},
				field{name: "deadLetters", accepts: "the name of an output", def: "`source.deadLetters`", doc: "output of the records other 4xx answers refuse",
					fn: func(at string, _, v ast.Node) {
						h.DeadLettersPos = d.pos(v)
						d.nonEmpty(v, at, "the name of an output", &h.DeadLetters)
					}},
			)
			if h.RecordsPerSecond > 0 && h.Burst > 0 && h.Burst < max(h.Batch, 1) {
				d.errf(k, "%s.rateLimit.burst %d is smaller than batch %d: a full batch could never pass the recordsPerSecond limit", w, h.Burst, h.Batch)
			}
		}}
}

// envReference reads a secret that must be one ${VAR} reference (a
// literal is refused: pipeline files get copied); the variable must be set
// and not empty. It returns the reference, expanded when the job is built.
func (d *dec) envReference(n ast.Node, what, fileKey string) string {
	raw, ok := scalarText(n)
	if _, isStr := n.(*ast.StringNode); !ok || !isStr || !envRef.MatchString(strings.TrimSpace(raw)) {
		d.errf(n, "%s: want ${ENV_VAR}, an environment variable holding the secret (a literal is refused: pipeline files get copied and committed), or %s", what, fileKey)
		return ""
	}
	raw = strings.TrimSpace(raw)
	v, err := expandEnv(raw)
	switch {
	case err != nil:
		d.errf(n, "%s: %v", what, err)
	case v == "":
		d.errf(n, "%s: %s is empty", what, raw)
	}
	return raw
}

// headers reads a map of header names to values; values may hold ${VAR}
// references, checked here and expanded when the job is built.
func (d *dec) headers(n ast.Node, what string) map[string]string {
	m, ok := d.anyValue(n, 0).(map[string]any)
	if !ok {
		d.errf(n, "%s: want a map of header names to values, such as {Authorization: 'Bearer ${API_TOKEN}'}", what)
		return nil
	}
	out := map[string]string{}
	for name, val := range m {
		sv, ok := val.(string)
		if !ok || !headerName(name) {
			d.errf(n, "%s.%s: want a header name and a string value (environment variables as ${VAR})", what, name)
			continue
		}
		if x, err := expandEnv(sv); err != nil {
			d.errf(n, "%s.%s: %v", what, name, err)
		} else if x == "" {
			d.errf(n, "%s.%s: the value is empty; set the environment variable it names", what, name)
		}
		out[name] = sv
	}
	return out
}

func headerName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// rate reads a positive number (per second).
func (d *dec) rate(n ast.Node, what string) float64 {
	s, ok := scalarText(n)
	f, err := strconv.ParseFloat(s, 64)
	if _, isStr := n.(*ast.StringNode); !ok || isStr || err != nil {
		d.errf(n, "%s: got %s, want a positive number per second, such as 10 or 0.5", what, describe(n))
		return 0
	}
	if !(f > 0) || math.IsInf(f, 0) {
		d.errf(n, "%s: %s: want a positive number per second, such as 10 or 0.5", what, s)
		return 0
	}
	return f
}

// byteSize reads a number of bytes or a size such as 1MiB.
func (d *dec) byteSize(n ast.Node, what string) int64 {
	const want = "want a positive number of bytes or a size such as 1MiB (KiB, MiB, GiB)"
	var s string
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		if !d.str(n, what, &s) {
			return 0
		}
	default:
		t, ok := scalarText(n)
		if !ok {
			d.errf(n, "%s: got %s; %s", what, describe(n), want)
			return 0
		}
		s = t
	}
	v, err := bytesize.Parse(s)
	if err != nil || v <= 0 {
		d.errf(n, "%s: %q: %s", what, s, want)
		return 0
	}
	return v
}

// httpSource adds source.http (W1-W8 of package webhook). Requests are
// answered once a checkpoint covers them when the job checkpoints
// (job.checkpoint.interval), else once their records are emitted.
func (b *builder) httpSource(name string, s *SourceSpec, strategy watermark.Strategy[Record], ts fieldPath) (weir.Stream[Record], error) {
	h := s.HTTP
	o := webhook.Options[Record]{Listen: h.Listen, Path: h.Path, MaxBody: h.MaxBody, Queue: h.Queue, RetryAfter: h.RetryAfter}
	switch {
	case h.Token != "":
		tok, err := expandEnv(h.Token)
		if err != nil || tok == "" {
			return weir.Stream[Record]{}, fmt.Errorf("%s: source.http.token: %s is not set or empty", h.Pos, h.Token)
		}
		o.Token = tok
	case h.TokenFile != "":
		data, err := os.ReadFile(h.TokenFile)
		tok := strings.TrimSpace(string(data))
		if err != nil || tok == "" {
			if err == nil {
				err = fmt.Errorf("%s is empty", h.TokenFile)
			}
			return weir.Stream[Record]{}, fmt.Errorf("%s: source.http.tokenFile: %v; want a file holding the bearer token", h.Pos, err)
		}
		o.Token = tok
	}
	if b.j.Spec.Job.CheckpointInterval <= 0 {
		o.Ack = webhook.AckOnEmit
	}
	if s.Timestamp != "" {
		o.Timestamp = func(r Record) (int64, bool) { return timestampOf(r, ts) }
	}
	src := webhook.New(o)
	if err := src.Validate(); err != nil {
		return weir.Stream[Record]{}, fmt.Errorf("%s: %w", h.Pos, err)
	}
	b.j.webhook = src
	return weir.FromSource(b.env, name, runtime.Source[Record](src), strategy), nil
}

// httpSink adds sink.http (S1-S8 of package httpsink) and routes its dead
// letters to the output its deadLetters names.
func (b *builder) httpSink(name string, s *SinkSpec, in weir.Stream[Record]) (string, error) {
	h := s.HTTP
	o := httpsink.Options[Record]{URL: h.URL, Batch: h.Batch, IdempotencyKeyHeader: h.IdempotencyKey, KeyPrefix: h.KeyPrefix,
		RequestsPerSecond: h.RequestsPerSecond, RecordsPerSecond: h.RecordsPerSecond, Burst: h.Burst,
		Timeout: h.Timeout, FlushInterval: h.FlushInterval, Retry: h.Retries,
		Encode: func(r Record) ([]byte, error) { return gojson.Marshal(r) }}
	switch h.Format {
	case "array":
		o.Format = httpsink.FormatArray
	case "lines":
		o.Format = httpsink.FormatLines
	}
	if o.IdempotencyKeyHeader == "none" {
		o.IdempotencyKeyHeader = "-"
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = b.jobName() + "/" + name
		if b.txnSuffix != "" {
			o.KeyPrefix += "/" + b.txnSuffix
		}
	}
	if len(h.Headers) > 0 {
		o.Header = http.Header{}
		for k, v := range h.Headers {
			x, err := expandEnv(v)
			if err != nil || x == "" {
				return "", fmt.Errorf("%s: sink.http.headers.%s: the environment variable it names is not set or empty", s.Pos, k)
			}
			o.Header.Set(k, x)
		}
	}
	if err := o.Validate(); err != nil {
		return "", fmt.Errorf("%s: %w", s.Pos, err)
	}
	dead := httpsink.Sink(in, name, o).UID(name)
	if h.DeadLetters != "" {
		b.output(h.DeadLetters, weir.Map(dead, name+"-dead-letters", func(d httpsink.DeadLetter[Record]) Record {
			return Record{"sink": name, "status": float64(d.Status), "reason": d.Reason, "key": d.Key, "value": d.Value}
		}))
	}
	return "HTTP " + h.URL + " (at least once; exactly once where the service honours idempotency keys)", nil
}

// WebhookURL returns the URL of the pipeline's source.http endpoint while
// the job runs ("" otherwise, or when the source is another kind).
func (j *Job) WebhookURL() string {
	if j.webhook == nil {
		return ""
	}
	return j.webhook.URL()
}
