package remote

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Retry bounds how a Client retries. The zero value is DefaultRetry.
type Retry struct {
	// Max is the number of retries after the first attempt.
	Max int
	// WaitMin and WaitMax bound one wait; a Retry-After longer than WaitMax is cut to it, so
	// a provider cannot park a worker for an hour.
	WaitMin, WaitMax time.Duration
}

// DefaultRetry is four retries, 250ms to 5s apart: at most about 15 seconds of waiting.
var DefaultRetry = Retry{Max: 4, WaitMin: 250 * time.Millisecond, WaitMax: 5 * time.Second}

// NewClient returns an HTTP client over base (nil: a fresh transport that ignores the
// process's HTTP_PROXY, since the credentials and commands must not pass through a proxy
// meant for the model's API) that retries as described in the package comment. A request
// whose context is marked with NoRetry is sent once.
//
// The client sets no total timeout: a command may stream for an hour, and callers bound each
// call with their context.
func NewClient(base http.RoundTripper, r Retry, logger *slog.Logger) *http.Client {
	if r == (Retry{}) {
		r = DefaultRetry
	}
	if base == nil {
		base = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 0, ForceAttemptHTTP2: true}
	}
	if logger == nil {
		logger = slog.Default()
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: base}
	rc.RetryMax = r.Max
	rc.RetryWaitMin = r.WaitMin
	rc.RetryWaitMax = r.WaitMax
	rc.Logger = quietLogger{logger}
	rc.CheckRetry = checkRetry
	rc.Backoff = cappedBackoff(retryablehttp.DefaultBackoff, r.WaitMax)
	// Give the caller the provider's last answer (its status and message) instead of
	// "giving up after N attempts".
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &http.Client{Transport: methodTagger{next: &retryablehttp.RoundTripper{Client: rc}}}
}

func cappedBackoff(b retryablehttp.Backoff, max time.Duration) retryablehttp.Backoff {
	return func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
		return min(b(lo, hi, attempt, resp), max)
	}
}

type ctxKey int

const (
	methodKey ctxKey = iota
	noRetryKey
)

// NoRetry marks ctx so that requests made with it are sent once, whatever the answer: for a
// call whose repetition the provider could not tell from the first (a command).
func NoRetry(ctx context.Context) context.Context { return context.WithValue(ctx, noRetryKey, true) }

// methodTagger records the request's method in its context: retryablehttp's CheckRetry sees
// the context but not the request when a transport error left no response.
type methodTagger struct{ next http.RoundTripper }

func (t methodTagger) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.next.RoundTrip(req.WithContext(context.WithValue(req.Context(), methodKey, req.Method)))
}

// idempotent are the methods whose repetition does what one call does (RFC 9110 §9.2.2).
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// checkRetry retries what the provider refused before acting on it: 429 and 503 (an
// overloaded service that did not take the request) for every method; 500, 502, 504 and
// transport errors (a gateway cannot tell whether the upstream acted) only for idempotent
// methods. A canceled context is never retried.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if no, _ := ctx.Value(noRetryKey).(bool); no {
		return false, err
	}
	method, _ := ctx.Value(methodKey).(string)
	if err != nil {
		return idempotent(method), err
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true, nil
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		return idempotent(method), nil
	}
	return false, nil
}

// quietLogger sends retryablehttp's per-request lines to debug and its retries to warn.
type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Error(msg string, kv ...any) { q.l.Warn("sandbox provider: "+msg, kv...) }
func (q quietLogger) Warn(msg string, kv ...any)  { q.l.Warn("sandbox provider: "+msg, kv...) }
func (q quietLogger) Info(msg string, kv ...any)  { q.l.Debug("sandbox provider: "+msg, kv...) }
func (q quietLogger) Debug(msg string, kv ...any) { q.l.Debug("sandbox provider: "+msg, kv...) }
