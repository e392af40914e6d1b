package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/tools/web"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// WebConfig configures the server-side web tools web_fetch and web_search
// (docs/web-tools.md). The worker runs them; its WebTools builds them.
type WebConfig struct {
	// FetchAllowPrivateNetworks lets web_fetch reach loopback, private, link-local and the
	// other non-public addresses (MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS, a boolean,
	// default off).
	FetchAllowPrivateNetworks bool
	// FetchTimeout bounds one fetch (MANAGED_AGENT_WEB_FETCH_TIMEOUT, a duration; default
	// web.DefaultFetchTimeout).
	FetchTimeout time.Duration
	// FetchMaxBytes is how much of a response web_fetch reads (MANAGED_AGENT_WEB_FETCH_MAX_BYTES,
	// a size such as 10m; default web.DefaultMaxBodyBytes).
	FetchMaxBytes string
	// SearchBackend is the web_search backend (MANAGED_AGENT_WEB_SEARCH_BACKEND): searxng,
	// or empty for none (every call then says the tool is not configured).
	SearchBackend string
	// SearchURL is the backend's address (MANAGED_AGENT_WEB_SEARCH_URL), required with a
	// backend; SearchAPIKey is sent as a Bearer token (MANAGED_AGENT_WEB_SEARCH_API_KEY,
	// optional, a credential).
	SearchURL, SearchAPIKey string
	// SearchTimeout bounds one search (MANAGED_AGENT_WEB_SEARCH_TIMEOUT, a duration; default
	// web.DefaultSearchTimeout).
	SearchTimeout time.Duration
}

// webSearchBackends are the values MANAGED_AGENT_WEB_SEARCH_BACKEND accepts besides empty.
var webSearchBackends = []string{web.BackendSearXNG}

// webFromLookup reads the string variables; FromLookup reads the boolean and the durations
// so their parse errors reach Validate.
func webFromLookup(w WebConfig, get func(string) string) WebConfig {
	set := func(dst *string, name string) {
		if v := get(name); v != "" {
			*dst = v
		}
	}
	set(&w.FetchMaxBytes, "MANAGED_AGENT_WEB_FETCH_MAX_BYTES")
	set(&w.SearchBackend, "MANAGED_AGENT_WEB_SEARCH_BACKEND")
	set(&w.SearchURL, "MANAGED_AGENT_WEB_SEARCH_URL")
	set(&w.SearchAPIKey, "MANAGED_AGENT_WEB_SEARCH_API_KEY")
	return w
}

// minFetchBytes keeps web_fetch able to read a page's head at least.
const minFetchBytes = 1 << 10

// validateWeb checks the web tool variables; every problem names its variable.
func (c Config) validateWeb() error {
	w := c.Web
	errs := []error{
		c.parsed("MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS"),
		c.parsed("MANAGED_AGENT_WEB_FETCH_TIMEOUT"),
		c.parsed("MANAGED_AGENT_WEB_SEARCH_TIMEOUT"),
	}
	if w.FetchTimeout < 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_WEB_FETCH_TIMEOUT=%s: must not be negative", w.FetchTimeout))
	}
	if w.SearchTimeout < 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_WEB_SEARCH_TIMEOUT=%s: must not be negative", w.SearchTimeout))
	}
	_, err := w.fetchMaxBytes()
	errs = append(errs, err)
	_, err = w.searchBackend()
	errs = append(errs, err)
	return errors.Join(errs...)
}

func (w WebConfig) fetchMaxBytes() (int64, error) {
	if w.FetchMaxBytes == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(w.FetchMaxBytes)
	if err != nil || n < minFetchBytes {
		return 0, fmt.Errorf("MANAGED_AGENT_WEB_FETCH_MAX_BYTES=%q: must be a size of at least 1k, such as 10m or 512k", w.FetchMaxBytes)
	}
	return n, nil
}

// searchBackend builds the configured backend; nil when none is.
func (w WebConfig) searchBackend() (web.Backend, error) {
	name := strings.ToLower(strings.TrimSpace(w.SearchBackend))
	switch name {
	case "":
		if w.SearchURL != "" {
			return nil, errors.New("MANAGED_AGENT_WEB_SEARCH_URL is set but MANAGED_AGENT_WEB_SEARCH_BACKEND is not: set it to " + strings.Join(webSearchBackends, " or "))
		}
		return nil, nil
	case web.BackendSearXNG:
		if w.SearchURL == "" {
			return nil, errors.New("MANAGED_AGENT_WEB_SEARCH_URL is required with MANAGED_AGENT_WEB_SEARCH_BACKEND=searxng: the SearXNG instance, such as http://searxng:8080")
		}
		u, err := url.Parse(w.SearchURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The URL is not echoed: it may carry credentials.
			return nil, errors.New("MANAGED_AGENT_WEB_SEARCH_URL: must be an http or https URL such as http://searxng:8080")
		}
		b, err := web.NewSearXNG(web.SearXNGConfig{BaseURL: w.SearchURL, APIKey: w.SearchAPIKey})
		if err != nil {
			return nil, errors.New("MANAGED_AGENT_WEB_SEARCH_URL: must be an http or https URL such as http://searxng:8080")
		}
		return b, nil
	}
	return nil, fmt.Errorf("MANAGED_AGENT_WEB_SEARCH_BACKEND=%q: must be %s, or empty for none", w.SearchBackend, strings.Join(webSearchBackends, ", "))
}

// WebTools builds the runners of web_fetch and web_search from the configuration (which
// Validate has checked; an invalid one is an error here too). The Searcher of a deployment
// without MANAGED_AGENT_WEB_SEARCH_BACKEND answers every call with an error that says how to
// configure it. The worker hands both to the agent loop and closes the Fetcher when it stops.
func (c Config) WebTools() (*web.Fetcher, *web.Searcher, error) {
	if err := c.validateWeb(); err != nil {
		return nil, nil, err
	}
	maxBytes, _ := c.Web.fetchMaxBytes()
	backend, _ := c.Web.searchBackend()
	fetcher := web.NewFetcher(web.FetchConfig{
		Timeout:              c.Web.FetchTimeout,
		MaxBodyBytes:         maxBytes,
		AllowPrivateNetworks: c.Web.FetchAllowPrivateNetworks,
	})
	return fetcher, web.NewSearcher(backend, web.SearchConfig{Timeout: c.Web.SearchTimeout}), nil
}

// agentWebTools runs web_fetch and web_search for the agent loop (agent.WebTools).
type agentWebTools struct {
	fetch  *web.Fetcher
	search *web.Searcher
}

func (w agentWebTools) RunWeb(ctx context.Context, name string, input json.RawMessage, cfg wire.ToolConfig) agent.ToolResult {
	var r web.Result
	switch name {
	case wire.ToolNameWebFetch:
		r = w.fetch.Fetch(ctx, input, web.OptionsFor(cfg))
	case wire.ToolNameWebSearch:
		r = w.search.Search(ctx, input, web.OptionsFor(cfg))
	default:
		return agent.ToolResult{Text: fmt.Sprintf("%q is not a web tool (web_fetch, web_search)", name), IsError: true}
	}
	return agent.ToolResult{Text: r.Text(), Content: r.Content, IsError: r.IsError}
}

// AgentWebTools builds the web tools as the agent loop takes them
// (agent.NewCore(m, agent.WithWebTools(tools))); stop drops the fetcher's idle connections
// when the worker stops.
func (c Config) AgentWebTools() (tools agent.WebTools, stop func(), err error) {
	fetcher, searcher, err := c.WebTools()
	if err != nil {
		return nil, nil, err
	}
	return agentWebTools{fetch: fetcher, search: searcher}, fetcher.Close, nil
}
