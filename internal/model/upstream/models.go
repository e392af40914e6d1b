package upstream

import (
	"slices"
	"strings"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
)

// modelSpec is what the server checks a request against: the catalog's entry and the two
// facts the catalog does not carry.
type modelSpec struct {
	catalog.Model
	// BudgetThinking: the model takes thinking {type: enabled, budget_tokens}. Every model
	// with thinking does except the adaptive-only ones: Opus 4.6 and Sonnet 4.6 still take
	// it (deprecated), Opus 4.7 and every later model refuse it
	// (build-with-claude/adaptive-thinking).
	BudgetThinking bool
	// FastModeBeta: fast mode on this model is a research preview (Opus 5) or deprecated
	// (Opus 4.8) and needs the fast-mode-2026-02-01 beta header (build-with-claude/fast-mode).
	FastModeBeta bool
}

var (
	budgetOnAdaptive = []string{"claude-opus-4-6", "claude-sonnet-4-6"}
	fastModeBetaOnly = []string{"claude-opus-5", "claude-opus-4-8"}
)

// resolveModel finds the model a request names, the way the Claude API spells models: a
// model id, a dated snapshot or a -latest alias. Amazon Bedrock and Google Vertex spellings,
// which the catalog also reads, name no model on this API (404, as an unknown id).
func resolveModel(id string, contextWindow int) (modelSpec, bool) {
	if id == "" || strings.ContainsAny(id, ".@[:") {
		return modelSpec{}, false
	}
	m, ok := catalog.Builtin().Lookup(id)
	if !ok {
		return modelSpec{}, false
	}
	if contextWindow > 0 {
		m.ContextWindow = contextWindow
	}
	return modelSpec{
		Model:          m,
		BudgetThinking: m.Thinking == catalog.ThinkingEnabled || slices.Contains(budgetOnAdaptive, m.ID),
		FastModeBeta:   m.FastMode && slices.Contains(fastModeBetaOnly, m.ID),
	}, true
}
