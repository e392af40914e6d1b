package upstream

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultAPIKey is the key a Server accepts unless WithAPIKey says otherwise.
const DefaultAPIKey = "test-key"

// apiVersions are the anthropic-version values accepted (api/versioning): the one the API
// documents and our own client sends, and the one the official Go SDK v2 sends.
var apiVersions = []string{"2023-06-01", "2026-10-21"}

// maxBodyBytes is the request size limit of the Messages endpoint (api/errors, "Request size
// limits": 32 MB); a larger body answers 413 request_too_large.
const maxBodyBytes = 32 << 20

type config struct {
	apiKey        string
	script        Script
	contextWindow int
	now           func() time.Time
}

// Option configures a Server.
type Option func(*config)

// WithAPIKey sets the key accepted as x-api-key or as Authorization: Bearer (default
// DefaultAPIKey).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithScript sets what the model generates (default: the text "ok", end_turn).
func WithScript(f Script) Option { return func(c *config) { c.script = f } }

// WithContextWindow overrides every model's context window (tests of compaction use small
// windows).
func WithContextWindow(n int) Option { return func(c *config) { c.contextWindow = n } }

// WithClock sets the clock prompt-cache entries expire by (default time.Now); Advance moves
// it further.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Server is a local Messages API. Its methods are safe for concurrent use.
type Server struct {
	t      testing.TB
	cfg    config
	http   *httptest.Server
	signer signer

	mu        sync.Mutex
	exchanges []Exchange
	cache     promptCache
	thinkless map[string]bool // tool_use ids answered in a reply without thinking
	omitted   map[string]bool // signatures of the thinking blocks sent with their text omitted
	skew      time.Duration   // added to the clock by Advance
}

// Start starts a Server on a loopback port; it is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := config{
		apiKey: DefaultAPIKey,
		script: func(*Request) Reply { return Reply{Content: []Block{{Type: "text", Text: "ok"}}} },
		now:    time.Now,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	s := &Server{t: t, cfg: cfg, signer: newSigner(), thinkless: map[string]bool{}, omitted: map[string]bool{}}
	s.http = httptest.NewServer(s)
	t.Cleanup(s.http.Close)
	return s
}

// URL is the base URL: the API is POST {URL}/v1/messages.
func (s *Server) URL() string { return s.http.URL }

// Exchanges returns every request so far and what it was answered, in order.
func (s *Server) Exchanges() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exchanges)
}

// Advance moves the server's clock forward, to expire prompt-cache entries.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew += d
}

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.now().Add(s.skew)
}

// Sign returns the signature this server gives a thinking block with this text, for tests
// that build a conversation by hand.
func (s *Server) Sign(thinking string) string { return s.signer.sign(thinking) }

// Seal returns the data this server gives a redacted_thinking block with this payload.
func (s *Server) Seal(payload string) string { return s.signer.seal(payload) }

func (s *Server) newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// ServeHTTP answers one request: every check in the order the API makes them (route,
// authentication, version, size, body, model, content), then the Script, then the answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{Header: r.Header.Clone()}
	ex := Exchange{Request: req}
	// The exchange is recorded before the first byte of the answer goes out, not when the
	// handler returns: the client may finish reading (and a test read Exchanges) before then.
	// Every field of ex is set by then.
	recorded := false
	record := func() {
		if recorded {
			return
		}
		recorded = true
		s.mu.Lock()
		s.exchanges = append(s.exchanges, ex)
		s.mu.Unlock()
	}
	defer record()
	w = &recordingWriter{ResponseWriter: w, before: record}
	body, apiErr := s.readRequest(r, req)
	req.Raw = body
	if apiErr != nil {
		s.refuse(w, &ex, apiErr, 0)
		return
	}
	var media mediaCount
	if err := parseRequest(body, req, &media); err != nil {
		s.refuse(w, &ex, err, 0)
		return
	}
	m, ok := resolveModel(req.Model, s.cfg.contextWindow)
	if !ok {
		s.refuse(w, &ex, &apiError{status: 404, typ: "not_found_error", msg: "model: " + req.Model}, 0)
		return
	}
	thinking, err := s.check(req, m, &media)
	if err != nil {
		s.refuse(w, &ex, err, 0)
		return
	}

	units := promptUnits(req)
	var promptTokens int64
	if len(units) > 0 {
		promptTokens = units[len(units)-1].end
	}
	window := int64(m.ContextWindow)
	if promptTokens > window {
		// build-with-claude/context-windows; the message is the API's, as clients match it.
		s.refuse(w, &ex, invalid("prompt is too long: %d tokens > %d maximum", promptTokens, window), 0)
		return
	}
	now := s.now()
	s.mu.Lock()
	plan := s.cache.plan(units, m.MinCacheableTokens, now)
	s.mu.Unlock()

	reply := s.cfg.script(req)
	if reply.Status != 0 {
		s.refuse(w, &ex, scriptedError(reply), reply.RetryAfter)
		return
	}
	a, buildErr := s.buildAnswer(reply, req, thinking, m, promptTokens, window)
	if buildErr != nil {
		s.t.Errorf("upstream: %v", buildErr)
		s.refuse(w, &ex, &apiError{status: 500, typ: "api_error", msg: "upstream test server: " + buildErr.Error()}, 0)
		return
	}
	s.mu.Lock()
	s.cache.commit(plan, units, now)
	s.mu.Unlock()

	usage := plan.usage
	usage.OutputTokens = a.outputTokens
	ex.Status, ex.Usage, ex.StopReason, ex.Content = http.StatusOK, usage, a.stopReason, a.content
	s.respond(w, &ex, reply, a)
}

// recordingWriter calls before once, ahead of the answer's first header or byte.
type recordingWriter struct {
	http.ResponseWriter
	before func()
}

func (w *recordingWriter) WriteHeader(status int) {
	w.before()
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.before()
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Flush() {
	w.before()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// respond writes the answer: a Message in JSON, or its events when the request streams.
func (s *Server) respond(w http.ResponseWriter, ex *Exchange, reply Reply, a answer) {
	req := ex.Request
	msg := newWireMessage(s.newID("msg_"), req.Model)
	msg.Usage = toWireUsage(ex.Usage, req.Speed)
	w.Header().Set("request-id", s.newID("req_"))
	if req.Stream {
		var streamErr *apiError
		if reply.StreamError != "" {
			streamErr = &apiError{typ: reply.StreamError, msg: reply.ErrorMessage}
			if streamErr.msg == "" {
				streamErr.msg = "Overloaded"
			}
			ex.ErrorMessage, ex.StopReason = streamErr.msg, ""
		}
		writeStream(w, msg, a, streamErr)
		return
	}
	for _, b := range a.content {
		msg.Content = append(msg.Content, wireBlock(b))
	}
	msg.StopReason = &a.stopReason
	if len(a.stopDetails) > 0 {
		msg.StopDetails = a.stopDetails
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(msg)
}

// readRequest checks the route, the credentials and the version, and reads the body.
func (s *Server) readRequest(r *http.Request, req *Request) ([]byte, *apiError) {
	if r.URL.Path != "/v1/messages" {
		return nil, &apiError{status: 404, typ: "not_found_error", msg: "Not Found"}
	}
	if r.Method != http.MethodPost {
		return nil, &apiError{status: 405, typ: "invalid_request_error", msg: "Method Not Allowed"}
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = token
		}
	}
	switch {
	case key == "":
		return nil, &apiError{status: 401, typ: "authentication_error", msg: "x-api-key header is required"}
	case key != s.cfg.apiKey:
		return nil, &apiError{status: 401, typ: "authentication_error", msg: "invalid x-api-key"}
	}
	switch v := r.Header.Get("anthropic-version"); {
	case v == "":
		return nil, invalid("anthropic-version: header is required")
	case !slices.Contains(apiVersions, v):
		return nil, invalid("anthropic-version: invalid version %q", v)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, invalid("Content-Type must be application/json, got %q", ct)
	}
	tooLarge := &apiError{status: 413, typ: "request_too_large", msg: fmt.Sprintf("Request exceeds the maximum allowed number of bytes: %d", maxBodyBytes)}
	if r.ContentLength > maxBodyBytes {
		return nil, tooLarge // refused unread, as a front end does
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, invalid("could not read the request body: %v", err)
	}
	if len(body) > maxBodyBytes {
		return body, tooLarge
	}
	return body, nil
}

// check applies the rules that need the model or span the request.
func (s *Server) check(req *Request, m modelSpec, media *mediaCount) (thinkingConfig, *apiError) {
	if req.MaxTokens > m.MaxOutputTokens {
		return thinkingConfig{}, invalid("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s",
			req.MaxTokens, m.MaxOutputTokens, m.ID)
	}
	if err := checkManyImages(media); err != nil {
		return thinkingConfig{}, err
	}
	if err := checkToolChoice(req); err != nil {
		return thinkingConfig{}, err
	}
	if err := checkSystemRole(req, m.MidConversationSystem); err != nil {
		return thinkingConfig{}, err
	}
	if err := checkToolUse(req); err != nil {
		return thinkingConfig{}, err
	}
	thinking, err := checkThinking(req, m)
	if err != nil {
		return thinking, err
	}
	if err := checkEffort(req, m); err != nil {
		return thinking, err
	}
	if err := checkSpeed(req, m); err != nil {
		return thinking, err
	}
	if err := s.checkThinkingBlocks(req, thinking); err != nil {
		return thinking, err
	}
	return thinking, nil
}

// errorTypes are the error types of the documented HTTP statuses (api/errors).
var errorTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	402: "billing_error",
	403: "permission_error",
	404: "not_found_error",
	409: "conflict_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	504: "timeout_error",
	529: "overloaded_error",
}

func scriptedError(r Reply) *apiError {
	typ, ok := errorTypes[r.Status]
	if !ok {
		typ = "api_error"
		if r.Status < 500 {
			typ = "invalid_request_error"
		}
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = http.StatusText(r.Status)
		if r.Status == 529 {
			msg = "Overloaded"
		}
	}
	return &apiError{status: r.Status, typ: typ, msg: msg}
}

// refuse answers an error in the documented shape: {"type": "error", "error": {"type",
// "message"}, "request_id"}, with the request-id header too.
func (s *Server) refuse(w http.ResponseWriter, ex *Exchange, e *apiError, retryAfter int) {
	ex.Status, ex.ErrorMessage = e.status, e.msg
	id := s.newID("req_")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", id)
	if retryAfter > 0 {
		w.Header().Set("retry-after", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": e.typ, "message": e.msg},
		"request_id": id,
	})
}

var _ error = (*apiError)(nil)
