package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// BackendSearXNG names the SearXNG backend (MANAGED_AGENT_WEB_SEARCH_BACKEND=searxng).
const BackendSearXNG = "searxng"

// maxBackendBody caps a backend's answer: a page of results is some tens of KiB.
const maxBackendBody = 4 << 20

// SearXNGConfig configures the SearXNG backend.
type SearXNGConfig struct {
	// BaseURL is the instance, such as http://searxng:8080 (its /search must allow
	// format=json: `search.formats: [html, json]` in settings.yml).
	BaseURL string
	// APIKey, if set, is sent as Authorization: Bearer, for an instance behind an
	// authenticating proxy (SearXNG itself has no keys).
	APIKey string
	// Client sends the requests (default: a client of its own, with the environment's proxy).
	Client *http.Client
}

// SearXNG searches with a SearXNG instance's JSON API (GET /search?q=…&format=json). The
// instance is the operator's, usually on a private network: its requests are not subject
// to web_fetch's address guard (netguard).
type SearXNG struct {
	search *url.URL
	apiKey string
	client *http.Client
}

// NewSearXNG checks the base URL and builds the backend.
func NewSearXNG(cfg SearXNGConfig) (*SearXNG, error) {
	base, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("searxng: %q must be an http or https URL such as http://searxng:8080", cfg.BaseURL)
	}
	base.RawQuery, base.Fragment = "", ""
	search := base.JoinPath("search")
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &SearXNG{search: search, apiKey: cfg.APIKey, client: client}, nil
}

// searxngResponse is the part of SearXNG's JSON answer the backend reads (searx/webapp.py:
// query, number_of_results, results[], answers, corrections, infoboxes, suggestions,
// unresponsive_engines).
type searxngResponse struct {
	Results []struct {
		URL     string `json:"url"`
		Title   string `json:"title"`
		Content string `json:"content"`
		// PublishedDate is an ISO 8601 string, null, or absent.
		PublishedDate json.RawMessage `json:"publishedDate"`
	} `json:"results"`
}

// Search implements Backend.
func (s *SearXNG) Search(ctx context.Context, q Query) ([]Hit, error) {
	u := *s.search
	params := url.Values{"q": {searxngQuery(q)}, "format": {"json"}, "pageno": {"1"}}
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("searxng: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if s.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL carries the query; the message names the instance below
		}
		return nil, fmt.Errorf("searxng at %s: %w", s.search.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBackendBody))
	if err != nil {
		return nil, fmt.Errorf("searxng at %s: reading the answer: %w", s.search.Host, err)
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("searxng at %s: HTTP 403: the instance does not serve format=json (add json to search.formats in its settings.yml)", s.search.Host)
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("searxng at %s: HTTP 429: rate limited", s.search.Host)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("searxng at %s: HTTP %s", s.search.Host, resp.Status)
	}
	var out searxngResponse
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("searxng at %s: the answer is not SearXNG's JSON: %w", s.search.Host, err)
	}
	hits := make([]Hit, 0, len(out.Results))
	for _, r := range out.Results {
		var published string
		_ = json.Unmarshal(r.PublishedDate, &published) // null, absent or not a string: unknown
		hits = append(hits, Hit{URL: r.URL, Title: r.Title, Snippet: r.Content, PageAge: published})
	}
	return hits, nil
}

// searxngQuery narrows the query to the one allowed domain with a site: term, which the
// engines behind SearXNG understand. With more domains there is no portable OR, so the
// Searcher's filter alone applies.
func searxngQuery(q Query) string {
	if len(q.AllowedDomains) == 1 && !strings.Contains(q.AllowedDomains[0], "/") {
		return q.Text + " site:" + q.AllowedDomains[0]
	}
	return q.Text
}
