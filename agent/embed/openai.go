package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/weirproject/weir/agent/internal/openaiopts"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/internal/retry"
)

// DefaultBatchSize is the most inputs OpenAIClient sends in one request
// when OpenAIConfig.BatchSize is 0 (the OpenAI API accepts up to 2048).
const DefaultBatchSize = 256

// OpenAIConfig configures a client of an OpenAI-compatible embeddings
// endpoint (OpenAI, Azure-style gateways, vLLM, Ollama, LM Studio, ...).
// The zero value, with Model set, talks to api.openai.com with
// $OPENAI_API_KEY.
type OpenAIConfig struct {
	// BaseURL of the API, e.g. "https://api.openai.com/v1". "" means
	// $OPENAI_BASE_URL, else model.DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token, or in the header APIKeyHeader
	// names. "" means $OPENAI_API_KEY. It is never logged nor shown by
	// String or errors.
	APIKey string
	// APIKeyHeader, when set, is the header the key is sent in instead of
	// Authorization (Azure OpenAI: "api-key").
	APIKeyHeader string
	// Query parameters added to every request (Azure: "api-version").
	Query map[string]string
	// Model is the embedding model, e.g. "text-embedding-3-small";
	// required.
	Model string
	// Dimensions asks the server for vectors of this many dimensions
	// (text-embedding-3 and later); 0 leaves it to the model.
	Dimensions int
	// BatchSize bounds the inputs of one request; 0 means
	// DefaultBatchSize.
	BatchSize int
	// HTTPClient makes the requests; nil means the SDK's default.
	HTTPClient *http.Client
	// Timeout bounds each attempt; 0 means 1 minute.
	Timeout time.Duration
	// Retry is how failed requests are retried (see model.RetryPolicy).
	Retry model.RetryPolicy
	// Headers are added to every request.
	Headers map[string]string
}

// OpenAIClient is a Model speaking the embeddings API through the official
// SDK (github.com/openai/openai-go/v3). Retries are weir's
// (model.RetryPolicy), the SDK's are disabled.
type OpenAIClient struct {
	client  openai.Client
	model   string
	dims    int
	batch   int
	baseURL string
	retry   model.RetryPolicy
}

// OpenAI returns a client for cfg. It fails when cfg has no model name or
// a negative Dimensions or BatchSize.
func OpenAI(cfg OpenAIConfig) (*OpenAIClient, error) {
	switch {
	case cfg.Model == "":
		return nil, fmt.Errorf("embed: no embedding model name; set OpenAIConfig.Model (e.g. text-embedding-3-small)")
	case cfg.Dimensions < 0:
		return nil, fmt.Errorf("embed: OpenAIConfig.Dimensions is %d; use a positive number, or 0 for the model's own", cfg.Dimensions)
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("embed: OpenAIConfig.BatchSize is %d; use a positive number, or 0 for %d", cfg.BatchSize, DefaultBatchSize)
	}
	opts, base := openaiopts.Options(openaiopts.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, APIKeyHeader: cfg.APIKeyHeader,
		Timeout: cfg.Timeout, DefaultTimeout: time.Minute, HTTPClient: cfg.HTTPClient, Headers: cfg.Headers, Query: cfg.Query})
	batch := cfg.BatchSize
	if batch == 0 {
		batch = DefaultBatchSize
	}
	return &OpenAIClient{client: openai.NewClient(opts...), model: cfg.Model, dims: cfg.Dimensions, batch: batch,
		baseURL: base, retry: cfg.Retry}, nil
}

// String names the endpoint and model (never the key).
func (c *OpenAIClient) String() string {
	return fmt.Sprintf("openai-compatible embedding model %q at %s", c.model, c.baseURL)
}

// Embed implements Model (I1, I2): one request per BatchSize texts, each
// retried by the config's policy (I3). An empty text is refused before any
// request (the API rejects it).
func (c *OpenAIClient) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if t == "" {
			return nil, &model.PermanentError{Err: fmt.Errorf("embed: text %d is empty; the embeddings API accepts only non-empty inputs", i)}
		}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.batch {
		chunk := texts[start:min(start+c.batch, len(texts))]
		var vs [][]float32
		// model.RetryPolicy retries calls returning a *model.Response; the
		// vectors travel beside it.
		_, err := c.retry.Do(ctx, func(ctx context.Context) (*model.Response, error) {
			var err error
			vs, err = c.call(ctx, chunk)
			return nil, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// call makes one request for texts and returns the vectors in input order.
func (c *OpenAIClient) call(ctx context.Context, texts []string) ([][]float32, error) {
	p := openai.EmbeddingNewParams{
		Model:          c.model,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if c.dims > 0 {
		p.Dimensions = param.NewOpt(int64(c.dims))
	}
	res, err := c.client.Embeddings.New(ctx, p)
	if err != nil {
		return nil, c.convertError(ctx, err)
	}
	if len(res.Data) != len(texts) {
		return nil, &model.PermanentError{Err: fmt.Errorf("embed: %s returned %d embeddings for %d inputs", c.baseURL, len(res.Data), len(texts))}
	}
	out := make([][]float32, len(texts))
	dim := -1
	for _, e := range res.Data {
		i := int(e.Index)
		if i < 0 || i >= len(out) || out[i] != nil {
			return nil, &model.PermanentError{Err: fmt.Errorf("embed: %s returned an embedding with index %d for %d inputs (missing, repeated or out of range)", c.baseURL, e.Index, len(texts))}
		}
		if dim >= 0 && len(e.Embedding) != dim || len(e.Embedding) == 0 {
			return nil, &model.PermanentError{Err: fmt.Errorf("embed: %s returned embeddings of %d and %d dimensions in one reply", c.baseURL, dim, len(e.Embedding))}
		}
		dim = len(e.Embedding)
		v := make([]float32, dim)
		for j, x := range e.Embedding {
			v[j] = float32(x)
		}
		out[i] = v
	}
	return out, nil
}

func (c *OpenAIClient) convertError(ctx context.Context, err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		e := &model.APIError{StatusCode: oe.StatusCode, Type: oe.Type, Code: oe.Code, Message: oe.Message,
			Model: c.model, Endpoint: c.baseURL}
		if oe.Response != nil {
			e.RetryAfter = retry.RetryAfter(oe.Response.Header)
		}
		return e
	}
	if ctx.Err() != nil {
		return fmt.Errorf("embed: call to %s: %w", c.baseURL, ctx.Err())
	}
	return fmt.Errorf("embed: request to %s failed: %w", c.baseURL, err)
}
