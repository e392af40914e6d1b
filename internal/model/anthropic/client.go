// Package anthropic is the model client for an Anthropic-shaped Messages endpoint
// (POST {base}/v1/messages, anthropic-version 2023-06-01) with API-key (x-api-key) or bearer
// authentication. Create makes one non-streaming call; Stream sets "stream": true and turns
// the server-sent events into model.Delta callbacks and the final model.Response.
//
// Every failure the endpoint or the network causes is a *model.Error classified for the
// caller's retry decision (429 rate_limited; 529 or overloaded_error overloaded; 5xx, 408,
// timeouts, dropped connections, truncated or malformed streams and mid-stream api_error
// events server; other 4xx invalid). The client never retries by itself: the durable workflow
// owns retries and their backoff, and sees retry-after in model.Error.RetryAfter. A cancelled
// caller context is returned as that context's error, not as a model error.
//
// It is written by hand on net/http rather than on github.com/anthropics/anthropic-sdk-go:
// the SDK retries by itself (a second, hidden retry loop under the workflow's), its request
// parameters are union types that would need a conversion layer as large as this package's
// encoder, its errors would need classifying again anyway, and DESIGN.md §8 keeps the SDK out
// of the binary (tests only). The tests use the SDK as an independent reader of the wire
// format the test server speaks.
//
// Content blocks other than text, thinking and tool_use (redacted_thinking, server tool
// blocks, citations) have no place in model.Block and are dropped from responses.
//
// Where the calls go is a Provider (provider.go): the Anthropic API or an Anthropic-shaped
// gateway by default, or Claude on Amazon Bedrock, Google Vertex AI or Microsoft Foundry
// (provider_bedrock.go, provider_vertex.go, provider_foundry.go). A provider rewrites the body
// and URL, authenticates, and turns its platform's stream framing into server-sent events; the
// encoder, the stream reader and the error classification are the same for all.
//
// It imports the model package, the standard library and, for Bedrock, the AWS SDK's signer
// and event stream decoder.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/model"
)

// Defaults of a Client.
const (
	DefaultBaseURL = "https://api.anthropic.com"
	// APIVersion is sent as the anthropic-version header.
	APIVersion = "2023-06-01"
	// DefaultMaxTokens applies when a request does not set MaxTokens; every current model
	// accepts it.
	DefaultMaxTokens = 4096
	// DefaultTimeout bounds one call, the value the API documentation recommends.
	DefaultTimeout = 10 * time.Minute
)

// maxErrorBody bounds how much of an error response is read for its message.
const maxErrorBody = 64 << 10

// Client calls the Messages endpoint. It is stateless and safe for concurrent use.
type Client struct {
	endpoint  string
	apiKey    string
	bearer    string
	provider  Provider
	headers   http.Header
	http      *http.Client
	timeout   time.Duration
	maxTokens int
}

var _ model.Client = (*Client)(nil)

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the endpoint's base URL; "/v1/messages" is appended to it.
func WithBaseURL(base string) Option { return func(c *Client) { c.endpoint = base } }

// WithAPIKey authenticates with the x-api-key header.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithBearerToken authenticates with "Authorization: Bearer TOKEN" (gateways, proxies).
func WithBearerToken(token string) Option { return func(c *Client) { c.bearer = token } }

// WithProvider sends the calls through another inference platform (Bedrock, Vertex AI,
// Foundry) instead of an Anthropic-shaped endpoint; WithBaseURL, WithAPIKey and
// WithBearerToken configure only the default Anthropic provider and are refused with it.
func WithProvider(p Provider) Option { return func(c *Client) { c.provider = p } }

// WithHTTPClient sets the HTTP client (transport, proxies, TLS). Its own Timeout, if any,
// also cuts streams, so prefer WithTimeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each call: a non-streaming call as a whole, a streaming call by its
// longest silence (the wait for the first event included), since an answer of a model's whole
// output limit may stream for longer than any fixed bound; 0 means no bound of its own.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithMaxTokens sets max_tokens for requests that leave MaxTokens at 0.
func WithMaxTokens(n int) Option { return func(c *Client) { c.maxTokens = n } }

// WithHeader adds a header to every call, e.g. anthropic-beta.
func WithHeader(key, value string) Option {
	return func(c *Client) { c.headers.Add(key, value) }
}

// New returns a client. Without WithAPIKey or WithBearerToken it sends no credentials, which
// suits local gateways that add their own.
func New(opts ...Option) (*Client, error) {
	c := &Client{
		endpoint:  DefaultBaseURL,
		headers:   http.Header{},
		http:      http.DefaultClient,
		timeout:   DefaultTimeout,
		maxTokens: DefaultMaxTokens,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.provider != nil && (c.endpoint != DefaultBaseURL || c.apiKey != "" || c.bearer != "") {
		return nil, errors.New("anthropic: a base URL, API key or bearer token is for the Anthropic provider; give it to the provider itself")
	}
	base, err := url.Parse(c.endpoint)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q must be an absolute http or https URL", c.endpoint)
	}
	if c.maxTokens < 1 {
		return nil, fmt.Errorf("anthropic: max tokens must be at least 1, got %d", c.maxTokens)
	}
	if c.timeout < 0 {
		return nil, fmt.Errorf("anthropic: timeout must not be negative, got %s", c.timeout)
	}
	if c.http == nil {
		return nil, errors.New("anthropic: HTTP client must not be nil")
	}
	c.endpoint = strings.TrimSuffix(base.String(), "/") + "/v1/messages"
	if c.provider == nil {
		c.provider = anthropicProvider{endpoint: c.endpoint, apiKey: c.apiKey, bearer: c.bearer}
	}
	return c, nil
}

// Create makes a non-streaming call.
func (c *Client) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return c.call(ctx, req, false, readMessage)
}

// Stream makes a streaming call, calling onDelta (which may be nil) as blocks arrive.
func (c *Client) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	return c.call(ctx, req, true, func(body io.Reader) (model.Response, error) {
		return readStream(body, onDelta)
	})
}

// errTimedOut is the cause of the client's own deadline, to tell it from the caller's.
var errTimedOut = errors.New("anthropic call timed out")

// call sends one request and reads its answer with read.
func (c *Client) call(ctx context.Context, req model.Request, stream bool, read func(io.Reader) (model.Response, error)) (model.Response, error) {
	body, err := encodeRequest(req, c.maxTokens, stream)
	if err != nil {
		return model.Response{}, fmt.Errorf("anthropic: encode request: %w", err)
	}
	callCtx := ctx
	var idle *idleTimer
	if c.timeout > 0 && stream {
		var cancel context.CancelCauseFunc
		callCtx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		idle = newIdleTimer(c.timeout, func() { cancel(errTimedOut) })
		defer idle.stop()
	} else if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeoutCause(ctx, c.timeout, errTimedOut)
		defer cancel()
	}
	resp, err := c.send(callCtx, req.Model, body, stream, requestBetas(req))
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return model.Response{}, statusError(resp, time.Now())
		}
		var r io.Reader = resp.Body
		if idle != nil {
			r = idle.reader(resp.Body)
		}
		var out model.Response
		if out, err = read(r); err == nil {
			return out, nil
		}
	}
	return model.Response{}, c.failure(ctx, callCtx, err, stream)
}

// idleTimer fires when a stream has been silent for its duration; every read that brings
// bytes starts the wait again.
type idleTimer struct {
	d time.Duration
	t *time.Timer
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	return &idleTimer{d: d, t: time.AfterFunc(d, fire)}
}

func (i *idleTimer) stop() { i.t.Stop() }

func (i *idleTimer) reader(r io.Reader) io.Reader { return idleReader{r: r, t: i} }

type idleReader struct {
	r io.Reader
	t *idleTimer
}

func (ir idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.t.t.Reset(ir.t.d)
	}
	return n, err
}

// send builds the call's common headers, lets the provider turn them and the body into its
// platform's request, and hands the response to the provider before the client reads it.
func (c *Client) send(ctx context.Context, modelName string, body []byte, stream bool, betas []string) (*http.Response, error) {
	header := http.Header{}
	for k, v := range c.headers {
		header[k] = slices.Clone(v)
	}
	for _, b := range betas {
		if !slices.Contains(header.Values("anthropic-beta"), b) {
			header.Add("anthropic-beta", b)
		}
	}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	if stream {
		header.Set("Accept", "text/event-stream")
	}
	header.Set("anthropic-version", APIVersion)
	req, err := c.provider.Request(ctx, Call{Model: modelName, Stream: stream, Body: body, Header: header})
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	return c.provider.Response(resp, stream)
}

// failure turns an error met while sending or reading into what the caller should see.
func (c *Client) failure(ctx, callCtx context.Context, err error, stream bool) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %w", ctx.Err())
	}
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	if errors.Is(context.Cause(callCtx), errTimedOut) {
		if stream {
			return &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("the stream was silent for %s", c.timeout)}
		}
		return &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("no complete answer within %s", c.timeout)}
	}
	return &model.Error{Kind: model.ErrServer, Message: err.Error()}
}
