package web

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/idna"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Result is the outcome of one web tool call as the model sees it: the content blocks of the
// agent.tool_result, and whether it reports an error. An error result holds one text block.
type Result struct {
	Content []wire.ContentBlock
	IsError bool
}

// Text is the text of an error result (or of a text-only result): its text blocks joined.
func (r Result) Text() string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == wire.ContentTypeText && b.Text != nil {
			parts = append(parts, *b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Options are an agent's settings of one web tool (its configs[] entry, API.md §3.2 (a)).
type Options struct {
	// AllowedDomains, if set, are the only domains a URL may be on; BlockedDomains are never
	// fetched or returned. A domain matches itself and its subdomains; a web_search entry
	// may carry a path ("docs.example.com/api"), which then must prefix the URL's path.
	AllowedDomains, BlockedDomains []string
	// MaxContentTokens caps the text of a fetched page (web_fetch; 0: DefaultMaxContentTokens).
	MaxContentTokens int64
	// UserLocation localises searches when the backend can (web_search; SearXNG cannot).
	UserLocation *wire.ToolUserLocation
}

// OptionsFor reads the web extras of a resolved configs[] entry
// (toolconfig.Effective.BuiltInConfig).
func OptionsFor(cfg wire.ToolConfig) Options {
	o := Options{
		AllowedDomains: slices.Clone(cfg.AllowedDomains),
		BlockedDomains: slices.Clone(cfg.BlockedDomains),
		UserLocation:   cfg.UserLocation,
	}
	if cfg.MaxContentTokens != nil {
		o.MaxContentTokens = *cfg.MaxContentTokens
	}
	return o
}

// errorResult is an is_error result whose text starts with the tool and the error code, the
// codes of the hosted tools (url_not_allowed, url_not_accessible, ...), so a model and a
// client can tell the kinds apart.
func errorResult(tool, code, format string, args ...any) Result {
	text := fmt.Sprintf("%s error (%s): %s", tool, code, fmt.Sprintf(format, args...))
	return Result{Content: []wire.ContentBlock{{Type: wire.ContentTypeText, Text: &text}}, IsError: true}
}

// decodeInput strictly decodes a tool's input, like the sandbox built-ins: unknown fields and
// wrong types are errors that name the field; an absent input decodes as {}.
func decodeInput(input json.RawMessage, v any) error {
	trimmed := strings.TrimSpace(string(input))
	if trimmed == "" || trimmed == "null" {
		input = json.RawMessage("{}")
	} else if trimmed[0] != '{' {
		return fmt.Errorf("expected a JSON object")
	}
	return wire.DecodeStrict(input, v)
}

// domainRule is one allowed_domains or blocked_domains entry: a host and an optional path.
type domainRule struct {
	host string
	path string // "" or "/api" (no trailing slash)
}

func parseRules(domains []string) []domainRule {
	rules := make([]domainRule, 0, len(domains))
	for _, d := range domains {
		host, path, _ := strings.Cut(strings.TrimSpace(d), "/")
		host = normalizeHost(host)
		if host == "" {
			continue
		}
		path = strings.TrimRight(path, "/")
		if path != "" {
			path = "/" + path
		}
		rules = append(rules, domainRule{host: host, path: path})
	}
	return rules
}

// match reports whether host (asciiHost of the URL's) is on the rule's domain (the host
// itself or a subdomain of it) and, for a rule with a path, u is under that path (a whole
// segment: /api matches /api and /api/x, not /apix).
func (r domainRule) match(host string, u *url.URL) bool {
	if host != r.host && !strings.HasSuffix(host, "."+r.host) {
		return false
	}
	if r.path == "" {
		return true
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return p == r.path || strings.HasPrefix(p, r.path+"/")
}

func normalizeHost(h string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(h)), ".")
}

// asciiHost is the form a host is dialled in, which the rules (plain LDH names) are compared
// with: IDNA's lookup mapping makes "bücher.example" xn--bcher-kva.example and an ideographic
// full stop a dot, as net/http does before it resolves the name. Without it a blocked domain
// written in Unicode would slip past the rules.
func asciiHost(h string) (string, error) {
	a, err := idna.Lookup.ToASCII(strings.TrimRight(strings.TrimSpace(h), "."))
	if err != nil {
		return "", err
	}
	return normalizeHost(a), nil
}

// domainPolicy holds an agent's domain rules for one call.
type domainPolicy struct {
	allowed, blocked []domainRule
	hasAllowed       bool
}

func newDomainPolicy(o Options) domainPolicy {
	return domainPolicy{allowed: parseRules(o.AllowedDomains), blocked: parseRules(o.BlockedDomains), hasAllowed: o.AllowedDomains != nil}
}

// refusal says why u is not allowed, or "" when it is.
func (p domainPolicy) refusal(u *url.URL) string {
	if len(p.blocked) == 0 && !p.hasAllowed {
		return ""
	}
	// The rules are about names; a URL by address would name the blocked site's server
	// without its name (directly or as a redirect's target). Checking what the blocked
	// names resolve to instead would fail both ways: one address serves many names behind a
	// CDN, and a name has addresses a lookup here does not return.
	if _, err := netip.ParseAddr(u.Hostname()); err == nil && len(p.blocked) > 0 {
		return fmt.Sprintf("%s is an IP address, which blocked_domains cannot be checked against: fetch the site by its name", u.Hostname())
	}
	host, err := asciiHost(u.Hostname())
	if err != nil {
		return fmt.Sprintf("%q is not a valid host name, so the domain rules cannot be checked", u.Hostname())
	}
	for _, r := range p.blocked {
		if r.match(host, u) {
			return fmt.Sprintf("%s is in blocked_domains (%s)", u.Hostname(), r.host+r.path)
		}
	}
	if !p.hasAllowed {
		return ""
	}
	for _, r := range p.allowed {
		if r.match(host, u) {
			return ""
		}
	}
	return fmt.Sprintf("%s is not in allowed_domains", u.Hostname())
}
