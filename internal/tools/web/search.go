package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Defaults of SearchConfig.
const (
	DefaultSearchTimeout = 15 * time.Second
	DefaultMaxResults    = 10
	// maxQueryChars refuses queries no search engine takes.
	maxQueryChars = 1000
)

const searchTool = wire.ToolNameWebSearch

// Query is one search as a Backend gets it.
type Query struct {
	// Text is the model's query.
	Text string
	// MaxResults is how many hits the Searcher keeps; a backend may return more (the
	// Searcher filters them by domain first).
	MaxResults int
	// AllowedDomains and BlockedDomains are the agent's rules, for a backend that can narrow
	// its search by them; the Searcher filters the hits whatever the backend does.
	AllowedDomains, BlockedDomains []string
	// UserLocation is the agent's user_location, for a backend that localises.
	UserLocation *wire.ToolUserLocation
}

// Hit is one search result.
type Hit struct {
	URL     string
	Title   string
	Snippet string
	// PageAge is when the page was published or updated, as the backend says it ("" if
	// unknown).
	PageAge string
}

// Backend runs searches. Errors are shown to the model (without the query), so they should
// say what failed without secrets.
type Backend interface {
	Search(ctx context.Context, q Query) ([]Hit, error)
}

// SearchConfig configures a Searcher; zero values are the defaults.
type SearchConfig struct {
	// Timeout bounds one search.
	Timeout time.Duration
	// MaxResults is how many results a call returns at most.
	MaxResults int
}

// Searcher runs web_search over a Backend. A Searcher without one is "not configured": the
// tool stays declared and every call is an error that says how to configure it.
type Searcher struct {
	backend Backend
	cfg     SearchConfig
}

// NewSearcher builds a Searcher; b nil means no backend is configured.
func NewSearcher(b Backend, cfg SearchConfig) *Searcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultSearchTimeout
	}
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = DefaultMaxResults
	}
	return &Searcher{backend: b, cfg: cfg}
}

// Configured reports whether searches go anywhere.
func (s *Searcher) Configured() bool { return s != nil && s.backend != nil }

// Search runs one web_search call: input is {"query": "..."}. It returns one search_result
// block per hit, at most MaxResults, only of URLs the agent's domain rules allow; no hits is
// a text block saying so, not an error.
func (s *Searcher) Search(ctx context.Context, input json.RawMessage, opts Options) Result {
	var in struct {
		Query string `json:"query"`
	}
	if err := decodeInput(input, &in); err != nil {
		return errorResult(searchTool, "invalid_tool_input", "%v", err)
	}
	query := strings.TrimSpace(in.Query)
	if query == "" {
		return errorResult(searchTool, "invalid_tool_input", "query is required")
	}
	if n := utf8.RuneCountInString(query); n > maxQueryChars {
		return errorResult(searchTool, "query_too_long", "the query has %d characters; at most %d are searched", n, maxQueryChars)
	}
	if !s.Configured() {
		return errorResult(searchTool, "unavailable",
			"web_search is not configured on this server: set MANAGED_AGENT_WEB_SEARCH_BACKEND (searxng) and MANAGED_AGENT_WEB_SEARCH_URL (docs/web-tools.md)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	hits, err := s.backend.Search(ctx, Query{
		Text: query, MaxResults: s.cfg.MaxResults,
		AllowedDomains: opts.AllowedDomains, BlockedDomains: opts.BlockedDomains, UserLocation: opts.UserLocation,
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errorResult(searchTool, "unavailable", "the search backend did not answer within %s", s.cfg.Timeout)
		}
		return errorResult(searchTool, "unavailable", "the search backend failed: %v", err)
	}
	blocks := searchBlocks(hits, newDomainPolicy(opts), s.cfg.MaxResults)
	if len(blocks) == 0 {
		text := fmt.Sprintf("No results for %q.", query)
		if opts.AllowedDomains != nil || opts.BlockedDomains != nil {
			text = fmt.Sprintf("No results for %q within the agent's allowed_domains/blocked_domains.", query)
		}
		return Result{Content: []wire.ContentBlock{{Type: wire.ContentTypeText, Text: ptr(logSafe(text))}}}
	}
	return Result{Content: blocks}
}

// searchBlocks turns hits into search_result blocks: http(s) URLs the policy allows, each
// URL once, at most max.
func searchBlocks(hits []Hit, policy domainPolicy, max int) []wire.ContentBlock {
	var blocks []wire.ContentBlock
	seen := map[string]bool{}
	for _, h := range hits {
		if len(blocks) == max {
			break
		}
		u, err := url.Parse(strings.TrimSpace(h.URL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			continue
		}
		link := u.String()
		if seen[link] || policy.refusal(u) != "" {
			continue
		}
		seen[link] = true
		blocks = append(blocks, searchResultBlock(link, h))
	}
	return blocks
}

// searchResultBlock is {type: search_result, source: URL, title, content: [text], citations:
// {enabled: true}} (API.md §5.1). The text is never empty (the Messages API refuses empty
// text blocks): the snippet, else the title, else the URL.
func searchResultBlock(link string, h Hit) wire.ContentBlock {
	title := shortTitle(logSafe(strings.Join(strings.Fields(h.Title), " ")))
	if title == "" {
		title = link
	}
	text := logSafe(strings.TrimSpace(h.Snippet))
	if text == "" {
		text = title
	}
	if age := strings.TrimSpace(h.PageAge); age != "" {
		text += "\n(published " + logSafe(age) + ")"
	}
	source, _ := json.Marshal(link)
	return wire.ContentBlock{
		Type:      wire.ContentTypeSearchResult,
		Source:    source,
		Title:     &title,
		Content:   []wire.ContentBlock{{Type: wire.ContentTypeText, Text: &text}},
		Citations: json.RawMessage(`{"enabled":true}`),
	}
}
