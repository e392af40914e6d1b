package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// overrideEntry is one model of an override file. Pointers tell a field that is set from one
// that is left out, so a partial entry changes only what it names.
type overrideEntry struct {
	ID                  *string        `json:"id"`
	ContextWindow       *int           `json:"context_window"`
	MaxOutputTokens     *int           `json:"max_output_tokens"`
	MinCacheableTokens  *int           `json:"min_cacheable_tokens"`
	Thinking            *string        `json:"thinking"`
	Effort              *bool          `json:"effort"`
	FastMode            *bool          `json:"fast_mode"`
	MidConvSystem       *bool          `json:"mid_conversation_system"`
	Price               *overridePrice `json:"price"`
	LongPromptThreshold *int64         `json:"long_prompt_threshold"`
	LongPromptPrice     *overridePrice `json:"long_prompt_price"`
	FastPrice           *overridePrice `json:"fast_price"`
}

type overridePrice struct {
	Input        *float64 `json:"input"`
	Output       *float64 `json:"output"`
	CacheWrite5m *float64 `json:"cache_write_5m"`
	CacheWrite1h *float64 `json:"cache_write_1h"`
	CacheRead    *float64 `json:"cache_read"`
}

// Override returns a new table: this one with the models of a JSON array replaced or added.
//
// Each element is an object with snake_case fields: id (required), context_window,
// max_output_tokens, min_cacheable_tokens, thinking ("", "none", "enabled" or "adaptive"),
// effort, fast_mode, mid_conversation_system, price {input, output, cache_write_5m, cache_write_1h, cache_read}
// (dollars per million tokens), long_prompt_threshold, long_prompt_price and fast_price (the
// same shape as price). An id the table
// knows by any spelling (see Lookup) names that model, and only the fields the entry sets
// change (inside price too); any other id adds a model whose unset fields are Resolve's
// conservative defaults (and a zero price). Decoding is strict: an unknown field, a negative
// number, a zero context window or output ceiling, an output ceiling above the context
// window, a bad thinking mode or an id given twice is an error that names the entry. The
// receiver is not changed.
func (t *Table) Override(data []byte) (*Table, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("model catalog: want a JSON array of models: %w", err)
	}
	next := &Table{models: maps.Clone(t.models), aliases: maps.Clone(t.aliases)}
	if next.models == nil {
		next.models = map[string]Model{}
	}
	seen := map[string]int{}
	for i, r := range raw {
		m, err := t.applyEntry(r)
		if err != nil {
			return nil, fmt.Errorf("model catalog entry %d%s: %w", i, entryName(r), err)
		}
		key := strings.ToLower(m.ID)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("model catalog entry %d%s: model %q is also entry %d", i, entryName(r), m.ID, j)
		}
		seen[key] = i
		next.models[key] = m
	}
	return next, nil
}

// entryName is ` ("<id>")` when the raw entry has a readable id, for error messages.
func entryName(r json.RawMessage) string {
	var e struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(r, &e) == nil && e.ID != "" {
		return fmt.Sprintf(" (%q)", e.ID)
	}
	return ""
}

// applyEntry decodes one entry strictly and lays it over the model it names (or the defaults).
func (t *Table) applyEntry(r json.RawMessage) (Model, error) {
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.DisallowUnknownFields()
	var e overrideEntry
	if err := dec.Decode(&e); err != nil {
		return Model{}, err
	}
	if bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		return Model{}, errors.New("want an object, got null")
	}
	if e.ID == nil || strings.TrimSpace(*e.ID) == "" {
		return Model{}, errors.New("id is required")
	}
	m := t.Resolve(strings.TrimSpace(*e.ID))
	if _, known := t.Lookup(*e.ID); !known {
		m.ID = strings.ToLower(strings.TrimSpace(*e.ID))
	}
	if err := setCount("context_window", e.ContextWindow, &m.ContextWindow, true); err != nil {
		return Model{}, err
	}
	if err := setCount("max_output_tokens", e.MaxOutputTokens, &m.MaxOutputTokens, true); err != nil {
		return Model{}, err
	}
	if err := setCount("min_cacheable_tokens", e.MinCacheableTokens, &m.MinCacheableTokens, false); err != nil {
		return Model{}, err
	}
	if m.MaxOutputTokens > m.ContextWindow {
		return Model{}, fmt.Errorf("max_output_tokens %d is above context_window %d", m.MaxOutputTokens, m.ContextWindow)
	}
	if e.Thinking != nil {
		mode := ThinkingMode(*e.Thinking)
		if mode == "none" {
			mode = ThinkingNone
		}
		if !mode.valid() {
			return Model{}, fmt.Errorf("thinking %q: want \"\", \"none\", %q or %q", *e.Thinking, ThinkingEnabled, ThinkingAdaptive)
		}
		m.Thinking = mode
	}
	if e.Effort != nil {
		m.Effort = *e.Effort
	}
	if e.FastMode != nil {
		m.FastMode = *e.FastMode
	}
	if e.MidConvSystem != nil {
		m.MidConversationSystem = *e.MidConvSystem
	}
	if err := e.Price.apply("price", &m.Price); err != nil {
		return Model{}, err
	}
	if e.LongPromptThreshold != nil {
		if *e.LongPromptThreshold < 0 {
			return Model{}, fmt.Errorf("long_prompt_threshold %d: must not be negative", *e.LongPromptThreshold)
		}
		m.LongPromptThreshold = *e.LongPromptThreshold
	}
	if err := e.LongPromptPrice.apply("long_prompt_price", &m.LongPromptPrice); err != nil {
		return Model{}, err
	}
	if err := e.FastPrice.apply("fast_price", &m.FastPrice); err != nil {
		return Model{}, err
	}
	return m, nil
}

func setCount(name string, v *int, dst *int, positive bool) error {
	if v == nil {
		return nil
	}
	switch {
	case *v < 0:
		return fmt.Errorf("%s %d: must not be negative", name, *v)
	case positive && *v == 0:
		return fmt.Errorf("%s: must be positive", name)
	}
	*dst = *v
	return nil
}

func (p *overridePrice) apply(name string, dst *Price) error {
	if p == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{
		{"input", p.Input, &dst.Input},
		{"output", p.Output, &dst.Output},
		{"cache_write_5m", p.CacheWrite5m, &dst.CacheWrite5m},
		{"cache_write_1h", p.CacheWrite1h, &dst.CacheWrite1h},
		{"cache_read", p.CacheRead, &dst.CacheRead},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return fmt.Errorf("%s.%s %g: must not be negative", name, f.name, *f.v)
		}
		*f.dst = *f.v
	}
	return nil
}
