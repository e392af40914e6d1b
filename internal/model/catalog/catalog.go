// Package catalog is the table of Claude models the server knows: each model's limits
// (context window, output ceiling, shortest cacheable prefix), the request features it
// accepts (thinking mode, effort, fast mode) and its list prices, with the lookup that maps
// every spelling of a model id (dated snapshots, aliases, Amazon Bedrock and Google Vertex
// ids) to one entry.
//
// The built-in numbers (builtin.go) come from Anthropic's published documentation; an operator
// replaces or extends them with Table.Override. The package is pure data and arithmetic: it
// imports nothing of this module, so the agent, the turn engine and the model clients can all
// use it.
package catalog

import (
	"regexp"
	"sort"
	"strings"
)

// ThinkingMode is the form of extended thinking a model accepts.
type ThinkingMode string

const (
	ThinkingNone     ThinkingMode = ""         // no extended thinking
	ThinkingEnabled  ThinkingMode = "enabled"  // thinking: {type: "enabled", budget_tokens: N}
	ThinkingAdaptive ThinkingMode = "adaptive" // thinking: {type: "adaptive"} (newest models)
)

func (m ThinkingMode) valid() bool {
	return m == ThinkingNone || m == ThinkingEnabled || m == ThinkingAdaptive
}

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	Input, Output, CacheWrite5m, CacheWrite1h, CacheRead float64
}

// Model is what the server knows of one model.
type Model struct {
	ID                 string // canonical id, e.g. "claude-sonnet-4-5"
	ContextWindow      int    // tokens the prompt plus max_tokens may use
	MaxOutputTokens    int    // the model's max_tokens ceiling
	MinCacheableTokens int    // a cache breakpoint on a shorter prefix caches nothing
	Thinking           ThinkingMode
	Effort             bool // accepts output_config.effort
	FastMode           bool // accepts speed "fast"
	// MidConversationSystem: accepts role "system" messages after a user turn
	// (platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages), which
	// is what a session's system.message event becomes.
	MidConversationSystem bool
	Price                 Price

	// LongPromptThreshold, when positive, is the prompt size (input + cache writes + cache
	// reads of one request) above which the whole request, output included, is billed at
	// LongPromptPrice instead of Price (Claude Haiku 5.5 prices prompts over 100k tokens so).
	LongPromptThreshold int64
	LongPromptPrice     Price

	// FastPrice is the price of a request served at speed "fast" (fast mode is a multiplier
	// on every rate, cache prices included). Zero where the premium is not documented: such a
	// request is priced at Price.
	FastPrice Price
}

// Default limits of a model the table does not know (see Table.Resolve). They are the
// conservative end of the documented range, so a request shaped by them fits any current
// Claude model: the smallest context window (200k), a max_tokens every model accepts
// (8192), the largest documented minimum cacheable prefix (4096) and no thinking, effort or
// fast mode (a model that lacks them answers 400 to them). The price is zero: an unknown
// model's cost is not guessed; list it with MANAGED_AGENT_MODEL_CATALOG to price it.
const (
	DefaultContextWindow      = 200_000
	DefaultMaxOutputTokens    = 8192
	DefaultMinCacheableTokens = 4096
)

// Table is an immutable set of models keyed by canonical id, with aliases.
type Table struct {
	models  map[string]Model
	aliases map[string]string // another spelling (lower case) → canonical id
}

func newTable(models []Model, aliases map[string]string) *Table {
	t := &Table{models: make(map[string]Model, len(models)), aliases: make(map[string]string, len(aliases))}
	for _, m := range models {
		t.models[strings.ToLower(m.ID)] = m
	}
	for a, id := range aliases {
		t.aliases[strings.ToLower(a)] = strings.ToLower(id)
	}
	return t
}

// IDs lists the canonical ids of the table, sorted.
func (t *Table) IDs() []string {
	ids := make([]string, 0, len(t.models))
	for _, m := range t.models {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids
}

// Lookup finds a model by any of its ids: the canonical id ("claude-sonnet-4-5"), a dated
// snapshot ("claude-sonnet-4-5-20250929"), an alias ("claude-3-7-sonnet-latest",
// "claude-opus-4"), an Amazon Bedrock id or inference profile
// ("anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.…", "global.anthropic.…"), a
// Google Vertex id ("claude-sonnet-4-5@20250929") or a 1M-context suffix ("…[1m]"). Case is
// ignored.
func (t *Table) Lookup(id string) (Model, bool) {
	if t == nil {
		return Model{}, false
	}
	for _, c := range candidates(id) {
		if m, ok := t.models[c]; ok {
			return m, true
		}
		if canon, ok := t.aliases[c]; ok {
			if m, ok := t.models[canon]; ok {
				return m, true
			}
		}
	}
	return Model{}, false
}

// Resolve is Lookup, or for an id the table does not know a conservative default with that
// id: DefaultContextWindow, DefaultMaxOutputTokens, DefaultMinCacheableTokens, no thinking,
// effort or fast mode, and a zero price.
func (t *Table) Resolve(id string) Model {
	if m, ok := t.Lookup(id); ok {
		return m
	}
	return Model{
		ID:                 id,
		ContextWindow:      DefaultContextWindow,
		MaxOutputTokens:    DefaultMaxOutputTokens,
		MinCacheableTokens: DefaultMinCacheableTokens,
	}
}

var (
	// Bedrock ids end with a version ("-v1:0", "-v1", "-v2:0").
	bedrockVersion = regexp.MustCompile(`-v\d+(:\d+)?$`)
	// Vertex pins a snapshot after an at sign ("@20250929", "@latest").
	vertexSnapshot = regexp.MustCompile(`@(\d{8}|latest|default)$`)
	// Snapshot ids of the Claude API end with the release date.
	dateSuffix = regexp.MustCompile(`-\d{8}$`)
)

// candidates are the spellings to try for id, from the most literal to the most normalised,
// so that an override keyed by an exact dated id still wins over the family entry.
func candidates(id string) []string {
	s := strings.ToLower(strings.TrimSpace(id))
	out := []string{s}
	add := func(next string) {
		if next != s {
			s = next
			out = append(out, s)
		}
	}
	// Claude Code spells the 1M-context variant of a model "<id>[1m]".
	add(strings.TrimSuffix(s, "[1m]"))
	// Bedrock: an optional ARN or region prefix ("us.", "eu.", "apac.", "global.") up to
	// "anthropic.", then the model, then a version.
	if i := strings.Index(s, "anthropic."); i >= 0 {
		add(bedrockVersion.ReplaceAllString(s[i+len("anthropic."):], ""))
	}
	add(vertexSnapshot.ReplaceAllString(s, ""))
	add(strings.TrimSuffix(s, "-latest"))
	add(dateSuffix.ReplaceAllString(s, ""))
	return out
}
