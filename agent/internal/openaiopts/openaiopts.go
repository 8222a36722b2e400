// Package openaiopts builds the request options of the OpenAI SDK clients
// of weir (the chat client of package agent/model and the embeddings
// client of package agent/embed), so that both resolve the base URL and
// the key, and disable the SDK's own retries, the same way.
package openaiopts

import (
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// DefaultBaseURL is OpenAI's API, used when neither the configuration nor
// $OPENAI_BASE_URL names one.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config is what both clients' configurations have in common.
type Config struct {
	// BaseURL; "" means $OPENAI_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// APIKey; "" means $OPENAI_API_KEY.
	APIKey string
	// APIKeyHeader, when set, carries the key instead of Authorization.
	APIKeyHeader string
	// Timeout of one request; 0 or less means DefaultTimeout.
	Timeout        time.Duration
	DefaultTimeout time.Duration
	HTTPClient     *http.Client
	Headers        map[string]string
	Query          map[string]string
}

// Options returns the SDK request options for cfg and the base URL they
// use (without a trailing slash). The SDK's retries are disabled: weir's
// clients retry on their own.
func Options(cfg Config) ([]option.RequestOption, string) {
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = cfg.DefaultTimeout
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(timeout),
	}
	if cfg.APIKeyHeader == "" {
		opts = append(opts, option.WithAPIKey(key))
	} else {
		// Empty keys send no Authorization header, also when the
		// environment has OPENAI_API_KEY (the SDK reads it by default).
		opts = append(opts, option.WithAPIKey(""), option.WithAdminAPIKey(""), option.WithHeader(cfg.APIKeyHeader, key))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	for k, v := range cfg.Query {
		opts = append(opts, option.WithQuery(k, v))
	}
	return opts, strings.TrimRight(base, "/")
}
