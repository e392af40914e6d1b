package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/netguard"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Defaults of FetchConfig and Options.
const (
	DefaultFetchTimeout = 30 * time.Second
	DefaultMaxBodyBytes = 10 << 20
	DefaultMaxRedirects = 5
	// DefaultMaxContentTokens caps a page's text when the agent sets no max_content_tokens:
	// 100,000 characters, the most a sandbox tool hands the model (tools.MaxResultChars).
	DefaultMaxContentTokens = 25_000
	// charsPerToken approximates tokens from characters, as the fake model counts usage.
	charsPerToken = 4
	// maxURLLen refuses URLs no page needs and that only bloat logs.
	maxURLLen = 4096
)

const fetchTool = wire.ToolNameWebFetch

// FetchConfig configures a Fetcher; zero values are the defaults.
type FetchConfig struct {
	// Timeout bounds a whole fetch: connecting, redirects and reading the body.
	Timeout time.Duration
	// MaxBodyBytes is how much of a response body is read; the rest is cut, and the result
	// says so.
	MaxBodyBytes int64
	// MaxRedirects is how many redirects one fetch follows; negative follows none.
	MaxRedirects int
	// AllowPrivateNetworks lets web_fetch connect to loopback, private, link-local and the
	// other non-public addresses (MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS): for a
	// deployment whose agents are meant to read its intranet.
	AllowPrivateNetworks bool
	// UserAgent is sent with every request (default: managed-agents-web-fetch/1).
	UserAgent string
	// Resolver resolves host names (default net.DefaultResolver); Dial connects to a checked
	// address (default a net.Dialer that checks the address once more). Tests inject both.
	Resolver Resolver
	Dial     DialFunc
}

// Resolver and DialFunc are the address guard's (internal/netguard), which web_fetch dials
// through.
type (
	Resolver = netguard.Resolver
	DialFunc = netguard.DialFunc
)

// Fetcher runs web_fetch. It is safe for concurrent use and keeps idle connections between
// calls.
type Fetcher struct {
	cfg       FetchConfig
	guard     netguard.Config
	transport *http.Transport
	convert   htmlConverter
}

// NewFetcher builds a Fetcher.
func NewFetcher(cfg FetchConfig) *Fetcher {
	return newFetcher(cfg, nil)
}

// newFetcher is NewFetcher that also connects to the allow addresses: the tests' server on
// 127.0.0.1, while every other local address stays refused.
func newFetcher(cfg FetchConfig, allow []netip.Prefix) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultFetchTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case cfg.MaxRedirects == 0:
		cfg.MaxRedirects = DefaultMaxRedirects
	case cfg.MaxRedirects < 0:
		cfg.MaxRedirects = 0
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "managed-agents-web-fetch/1"
	}
	g := netguard.Config{
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Allow:                allow,
		Resolver:             cfg.Resolver,
		Dial:                 cfg.Dial,
		DialTimeout:          cfg.Timeout,
	}
	// The guard's transport ignores the environment's proxy: a proxy would connect on our
	// behalf, past the address check. Each fetch's context bounds it by Timeout (a header
	// timeout of the same length would race that and say less).
	return &Fetcher{cfg: cfg, guard: g, transport: g.Transport(), convert: newHTMLConverter()}
}

// Close drops the idle connections.
func (f *Fetcher) Close() { f.transport.CloseIdleConnections() }

// urlRefusedError is a URL web_fetch will not fetch: a domain rule or a literal address.
type urlRefusedError struct {
	url    string
	reason string
}

func (e *urlRefusedError) Error() string { return e.url + ": " + e.reason }

// tooManyRedirectsError stops a chain of redirects.
type tooManyRedirectsError struct{ max int }

func (e *tooManyRedirectsError) Error() string {
	return fmt.Sprintf("stopped after %d redirects", e.max)
}

// checkURL refuses what must not be fetched before any connection: a scheme other than http
// and https, a host outside the agent's domain rules, and a literal address that is not
// public (the dial would refuse it too; this says so plainly).
func (f *Fetcher) checkURL(u *url.URL, policy domainPolicy) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &urlRefusedError{url: u.String(), reason: fmt.Sprintf("only http and https URLs are fetched, not %s", u.Scheme)}
	}
	if u.Hostname() == "" {
		return &urlRefusedError{url: u.String(), reason: "the URL has no host"}
	}
	if reason := policy.refusal(u); reason != "" {
		return &urlRefusedError{url: u.String(), reason: reason}
	}
	if err := f.guard.CheckLiteral(u.Hostname()); err != nil {
		return &urlRefusedError{url: u.String(), reason: err.Error() + "; this server does not fetch from private or local networks"}
	}
	return nil
}

// Fetch runs one web_fetch call: input is {"url": "..."}. It fetches the URL with GET,
// following redirects that pass the same checks, and returns one document block with the
// page's text: HTML converted to Markdown, plain text and JSON as they are. Every failure is
// an IsError result.
func (f *Fetcher) Fetch(ctx context.Context, input json.RawMessage, opts Options) Result {
	var in struct {
		URL string `json:"url"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errorResult(fetchTool, "invalid_input", "%v", err)
	}
	raw := strings.TrimSpace(in.URL)
	if raw == "" {
		return errorResult(fetchTool, "invalid_input", "url is required")
	}
	if len(raw) > maxURLLen {
		return errorResult(fetchTool, "url_too_long", "the URL has %d characters; at most %d are fetched", len(raw), maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errorResult(fetchTool, "invalid_input", "%q is not a URL: %v", raw, err)
	}
	policy := newDomainPolicy(opts)
	if err := f.checkURL(u, policy); err != nil {
		return errorResult(fetchTool, "url_not_allowed", "%v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return errorResult(fetchTool, "invalid_input", "%q: %v", raw, err)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5")
	client := &http.Client{
		Transport: f.transport,
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if len(via) > f.cfg.MaxRedirects {
				return &tooManyRedirectsError{max: f.cfg.MaxRedirects}
			}
			return f.checkURL(next.URL, policy)
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return f.requestError(ctx, u, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorResult(fetchTool, "url_not_accessible", "%s returned HTTP %s", final, resp.Status)
	}

	body, cut, err := readCapped(resp.Body, f.cfg.MaxBodyBytes)
	if err != nil {
		return f.requestError(ctx, final, err)
	}
	maxTokens := opts.MaxContentTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxContentTokens
	}
	var notes []string
	if cut {
		notes = append(notes, fmt.Sprintf("[the response was larger than %d bytes; only the first %d were read]", f.cfg.MaxBodyBytes, f.cfg.MaxBodyBytes))
	}
	kind, mediaType := classify(resp.Header.Get("Content-Type"), body)
	var title, text string
	switch kind {
	case kindHTML:
		limit := htmlLimit(maxTokens * charsPerToken)
		var htmlCut bool
		title, text, htmlCut, err = f.convert.toMarkdown(ctx, body, resp.Header.Get("Content-Type"), final, limit)
		if err != nil {
			if ctx.Err() != nil {
				return f.requestError(ctx, final, err)
			}
			return errorResult(fetchTool, "url_not_accessible", "%s: could not convert the page to text: %v", final, err)
		}
		if htmlCut {
			notes = append(notes, fmt.Sprintf("[the page was cut: of its %d bytes of HTML, at most the first %d were converted to text]", len(body), limit))
		}
	case kindText:
		text = decodeText(body, resp.Header.Get("Content-Type"))
	default:
		return errorResult(fetchTool, "unsupported_content_type",
			"%s is %s, which this server does not fetch (it fetches HTML, plain text and JSON)", final, mediaType)
	}
	if title == "" {
		title = final.String()
	}
	return documentResult(title, final.String(), text, notes, maxTokens)
}

// requestError turns a failed request into a result a model can act on.
func (f *Fetcher) requestError(ctx context.Context, u *url.URL, err error) Result {
	var refusedURL *urlRefusedError
	var refusedAddr *netguard.RefusedError
	var redirects *tooManyRedirectsError
	switch {
	case errors.As(err, &refusedURL):
		return errorResult(fetchTool, "url_not_allowed", "redirected to %v", refusedURL)
	case errors.As(err, &refusedAddr):
		return errorResult(fetchTool, "url_not_allowed", "%s: %v; this server does not fetch from private or local networks", u, refusedAddr)
	case errors.As(err, &redirects):
		return errorResult(fetchTool, "url_not_accessible", "%s: %v", u, redirects)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errorResult(fetchTool, "url_not_accessible", "%s: timed out after %s", u, f.cfg.Timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return errorResult(fetchTool, "url_not_accessible", "%s: the fetch was canceled", u)
	}
	return errorResult(fetchTool, "url_not_accessible", "%s: %v", u, unwrapURLError(err))
}

// unwrapURLError drops net/http's `Get "<url>":` prefix; the message names the URL already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readCapped reads at most limit bytes of r; cut reports that there was more.
func readCapped(r io.Reader, limit int64) (body []byte, cut bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > limit {
		return body[:limit], true, nil
	}
	return body, false, nil
}

type contentKind int

const (
	kindUnsupported contentKind = iota
	kindHTML
	kindText
)

// classify reads the media type (sniffed when the server sends none) and what web_fetch does
// with it.
func classify(header string, body []byte) (contentKind, string) {
	mediaType, _, err := mime.ParseMediaType(header)
	if header == "" || err != nil {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	mediaType = strings.ToLower(mediaType)
	switch {
	case mediaType == "text/html", mediaType == "application/xhtml+xml":
		return kindHTML, mediaType
	case strings.HasPrefix(mediaType, "text/"),
		mediaType == "application/json", strings.HasSuffix(mediaType, "+json"),
		mediaType == "application/xml", strings.HasSuffix(mediaType, "+xml"),
		mediaType == "application/javascript", mediaType == "application/x-ndjson":
		return kindText, mediaType
	}
	return kindUnsupported, mediaType
}

// documentResult builds the one document block of a fetched page, its text cut to the token
// budget with a note that says so, after the notes of what was cut before.
func documentResult(title, finalURL, text string, notes []string, maxTokens int64) Result {
	text = logSafe(strings.TrimSpace(text))
	maxChars := maxTokens * charsPerToken
	if total := int64(utf8.RuneCountInString(text)); total > maxChars {
		text = firstRunes(text, int(maxChars))
		notes = append(notes, fmt.Sprintf("[content truncated: showing the first %d of %d characters, about %d tokens (max_content_tokens %d)]",
			maxChars, total, maxTokens, maxTokens))
	}
	if len(notes) > 0 {
		text += "\n\n" + strings.Join(notes, "\n")
	}
	if text == "" {
		text = "(the page has no text)"
	}
	// A text source is type, media_type and data (wire.ValidateContent), no other member.
	source, _ := json.Marshal(struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}{"text", "text/plain", text})
	title = shortTitle(logSafe(title))
	return Result{Content: []wire.ContentBlock{{
		Type:    wire.ContentTypeDocument,
		Source:  source,
		Title:   &title,
		Context: ptr(finalURL),
	}}}
}

// logSafe makes text storable in the event log: valid UTF-8 without NUL (wire.LogSafeJSON).
func logSafe(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", wire.Replacement), wire.Replacement)
}

// maxTitleRunes keeps a block's title a title: some pages stuff their <title>.
const maxTitleRunes = 300

func shortTitle(s string) string {
	if utf8.RuneCountInString(s) <= maxTitleRunes {
		return s
	}
	return firstRunes(s, maxTitleRunes-1) + "…"
}

func firstRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

func ptr[T any](v T) *T { return &v }
