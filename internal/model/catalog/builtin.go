package catalog

// The built-in table, read on 2026-12-07 from Anthropic's documentation:
//
//   - Models overview and the per-model pages (context window, max output, thinking, default
//     effort, model ids): https://platform.claude.com/docs/en/about-claude/models/overview and
//     https://platform.claude.com/docs/en/models/<model>/overview (opus-5, opus-5-5, opus-4-8,
//     opus-4-6, opus-4-5, sonnet-5, sonnet-5-5, fable-5-1, …)
//   - Pricing (base input, 5m and 1h cache writes, cache hits, output):
//     https://platform.claude.com/docs/en/about-claude/pricing
//   - Prompt caching, "minimum cacheable prompt length":
//     https://platform.claude.com/docs/en/build-with-claude/prompt-caching
//   - Extended and adaptive thinking: https://platform.claude.com/docs/en/build-with-claude/extended-thinking
//     and …/build-with-claude/adaptive-thinking (Opus 4.6 and Sonnet 4.6 still take
//     budget_tokens but deprecate it; Opus 4.7 and every later model take only "adaptive")
//   - Effort (supported models): https://platform.claude.com/docs/en/build-with-claude/effort
//   - Mid-conversation system messages (role "system" after a user turn): Opus 4.8 onward per
//     https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages and
//     …/about-claude/models/whats-new-claude-4-8; the Managed Agents reference lists Fable 5.1,
//     Mythos 5.1, Fable 5, Mythos 5, Opus 5 and Opus 4.8 for system.message; the 5.5 models,
//     Sonnet 5 and the 5.2 models are taken to have it too (their SDK profiles do).
//   - Fast mode (supported models): https://platform.claude.com/docs/en/build-with-claude/fast-mode
//     (available on Fable 5.2, Mythos 5.2 and Opus 5.5; research preview on Opus 5;
//     deprecated but still accepted on Opus 4.8; gone from Opus 4.7 and 4.6). Its premium is a
//     multiplier on every rate, cache prices included: 2× on Opus 5.5 ($8/$40), Opus 5 and
//     Opus 4.8 ($10/$50). The Fable 5.2 and Mythos 5.2 premium was not on the pages read, so
//     their fast requests are priced at standard rates until an override sets fast_price.
//
// Where the pages read did not state a number, the entry says so and what it assumes.
// Operators correct or extend the table without a release through MANAGED_AGENT_MODEL_CATALOG
// (docs/configuration.md, docs/costs.md).

const (
	k200 = 200_000
	m1   = 1_000_000
	k128 = 128_000
	k64  = 64_000
	k32  = 32_000
)

// Builtin is the table researched from the documentation above. Each call returns the same
// immutable table.
func Builtin() *Table { return builtin }

var builtin = newTable(builtinModels, builtinAliases)

var builtinModels = []Model{
	// --- Claude 5 generation ---
	{
		// Fable 5.2: $8/$40, cache hits $0.20 per the pricing page. Its cache-write prices and
		// minimum cacheable length were not on the pages read: the writes assume the usual
		// 1.25× (5m) and 2× (1h) of input, the minimum is Fable 5's.
		ID: "claude-fable-5-2", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
		Price: Price{Input: 8, Output: 40, CacheWrite5m: 10, CacheWrite1h: 16, CacheRead: 0.20},
	},
	{
		// Mythos 5.2 (limited availability): priced as Fable 5.2, same assumptions.
		ID: "claude-mythos-5-2", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
		Price: Price{Input: 8, Output: 40, CacheWrite5m: 10, CacheWrite1h: 16, CacheRead: 0.20},
	},
	{
		// Fable 5.1: minimum cacheable length not stated for 5.1; Fable 5's 512 assumed.
		ID: "claude-fable-5-1", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 10, Output: 50, CacheWrite5m: 12.50, CacheWrite1h: 20, CacheRead: 0.25},
	},
	{
		ID: "claude-mythos-5-1", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 10, Output: 50, CacheWrite5m: 12.50, CacheWrite1h: 20, CacheRead: 0.25},
	},
	{
		ID: "claude-fable-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 10, Output: 50, CacheWrite5m: 12.50, CacheWrite1h: 20, CacheRead: 1},
	},
	{
		ID: "claude-mythos-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 10, Output: 50, CacheWrite5m: 12.50, CacheWrite1h: 20, CacheRead: 1},
	},
	{
		// Opus 5.5, the current Opus: cache hits are 0.05× input. Minimum cacheable length
		// not stated for 5.5; Opus 5's 512 assumed.
		ID: "claude-opus-5-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
		Price:     Price{Input: 4, Output: 20, CacheWrite5m: 5, CacheWrite1h: 8, CacheRead: 0.20},
		FastPrice: Price{Input: 8, Output: 40, CacheWrite5m: 10, CacheWrite1h: 16, CacheRead: 0.4},
	},
	{
		// Opus 5 (legacy since Opus 5.5, released 2026-07-24): documented, and the model this
		// project's quickstarts use.
		ID: "claude-opus-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 512,
		Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
		Price:     Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.50},
		FastPrice: Price{Input: 10, Output: 50, CacheWrite5m: 12.5, CacheWrite1h: 20, CacheRead: 1},
	},
	{
		// Sonnet 5.5: cache hits cut to $0.10 (0.05× input) on 2026-10-07. Minimum cacheable
		// length not stated for 5.5; Sonnet 5's 1024 assumed.
		ID: "claude-sonnet-5-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 1024,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 2, Output: 10, CacheWrite5m: 2.50, CacheWrite1h: 4, CacheRead: 0.10},
	},
	{
		ID: "claude-sonnet-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 1024,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 2, Output: 10, CacheWrite5m: 2.50, CacheWrite1h: 4, CacheRead: 0.20},
	},
	{
		// Haiku 5.5 bills a request whose prompt is over 100k tokens at 5× on every token of
		// it, output included. Minimum cacheable length not stated; Haiku 4.5's 4096 assumed
		// (the conservative choice: a breakpoint it refuses caches nothing and costs nothing).
		ID: "claude-haiku-5-5", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 4096,
		Thinking: ThinkingAdaptive, Effort: true,
		Price:               Price{Input: 0.10, Output: 0.50, CacheWrite5m: 0.125, CacheWrite1h: 0.20, CacheRead: 0.01},
		LongPromptThreshold: 100_000,
		LongPromptPrice:     Price{Input: 0.50, Output: 2.50, CacheWrite5m: 0.625, CacheWrite1h: 1, CacheRead: 0.05},
	},

	// --- Claude 4 generation ---
	{
		ID: "claude-opus-4-8", MidConversationSystem: true, ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 1024,
		Thinking: ThinkingAdaptive, Effort: true, FastMode: true,
		Price:     Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.50},
		FastPrice: Price{Input: 10, Output: 50, CacheWrite5m: 12.5, CacheWrite1h: 20, CacheRead: 1},
	},
	{
		ID: "claude-opus-4-7", ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 2048,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.50},
	},
	{
		ID: "claude-opus-4-6", ContextWindow: m1, MaxOutputTokens: k128, MinCacheableTokens: 4096,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.50},
	},
	{
		// Opus 4.5 takes effort but only budgeted thinking.
		ID: "claude-opus-4-5", ContextWindow: k200, MaxOutputTokens: k64, MinCacheableTokens: 4096,
		Thinking: ThinkingEnabled, Effort: true,
		Price: Price{Input: 5, Output: 25, CacheWrite5m: 6.25, CacheWrite1h: 10, CacheRead: 0.50},
	},
	{
		ID: "claude-opus-4-1", ContextWindow: k200, MaxOutputTokens: k32, MinCacheableTokens: 1024,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 15, Output: 75, CacheWrite5m: 18.75, CacheWrite1h: 30, CacheRead: 1.50},
	},
	{
		ID: "claude-opus-4-0", ContextWindow: k200, MaxOutputTokens: k32, MinCacheableTokens: 1024,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 15, Output: 75, CacheWrite5m: 18.75, CacheWrite1h: 30, CacheRead: 1.50},
	},
	{
		// Sonnet 4.6: 1M context at standard prices; budget_tokens deprecated, adaptive preferred.
		ID: "claude-sonnet-4-6", ContextWindow: m1, MaxOutputTokens: k64, MinCacheableTokens: 1024,
		Thinking: ThinkingAdaptive, Effort: true,
		Price: Price{Input: 3, Output: 15, CacheWrite5m: 3.75, CacheWrite1h: 6, CacheRead: 0.30},
	},
	{
		ID: "claude-sonnet-4-5", ContextWindow: k200, MaxOutputTokens: k64, MinCacheableTokens: 1024,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 3, Output: 15, CacheWrite5m: 3.75, CacheWrite1h: 6, CacheRead: 0.30},
	},
	{
		ID: "claude-sonnet-4-0", ContextWindow: k200, MaxOutputTokens: k64, MinCacheableTokens: 1024,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 3, Output: 15, CacheWrite5m: 3.75, CacheWrite1h: 6, CacheRead: 0.30},
	},
	{
		ID: "claude-haiku-4-5", ContextWindow: k200, MaxOutputTokens: k64, MinCacheableTokens: 4096,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 1, Output: 5, CacheWrite5m: 1.25, CacheWrite1h: 2, CacheRead: 0.10},
	},

	// --- Claude 3 generation: on the pricing page as deprecated or retired on the Claude API
	// (partner platforms keep their own schedules); kept so their recorded usage still prices.
	{
		ID: "claude-3-7-sonnet", ContextWindow: k200, MaxOutputTokens: k64, MinCacheableTokens: 1024,
		Thinking: ThinkingEnabled,
		Price:    Price{Input: 3, Output: 15, CacheWrite5m: 3.75, CacheWrite1h: 6, CacheRead: 0.30},
	},
	{
		ID: "claude-3-5-haiku", ContextWindow: k200, MaxOutputTokens: 8192, MinCacheableTokens: 2048,
		Price: Price{Input: 0.80, Output: 4, CacheWrite5m: 1, CacheWrite1h: 1.60, CacheRead: 0.08},
	},
	{
		ID: "claude-3-haiku", ContextWindow: k200, MaxOutputTokens: 4096, MinCacheableTokens: 2048,
		Price: Price{Input: 0.25, Output: 1.25, CacheWrite5m: 0.30, CacheWrite1h: 0.50, CacheRead: 0.03},
	},
	{
		ID: "claude-3-opus", ContextWindow: k200, MaxOutputTokens: 4096, MinCacheableTokens: 1024,
		Price: Price{Input: 15, Output: 75, CacheWrite5m: 18.75, CacheWrite1h: 30, CacheRead: 1.50},
	},
}

// builtinAliases are spellings that the generic normalisation (dates, -latest, Bedrock and
// Vertex forms) does not reach: the Claude 4.0 models' snapshot ids have no minor version
// ("claude-opus-4-20250514"), so without the date they read "claude-opus-4".
var builtinAliases = map[string]string{
	"claude-opus-4":   "claude-opus-4-0",
	"claude-sonnet-4": "claude-sonnet-4-0",
}
