package upstream_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// testModel (claude-sonnet-4-5) caches prefixes of at least 1024 tokens.

var ephemeral = obj{"type": "ephemeral"}

func ephemeralTTL(ttl string) obj { return obj{"type": "ephemeral", "ttl": ttl} }

// cached is a text block that is a breakpoint.
func cached(s string, cc ...obj) obj {
	c := ephemeral
	if len(cc) > 0 {
		c = cc[0]
	}
	return with(text(s), "cache_control", c)
}

// accounting is the input side of a usage.
type accounting struct{ read, creation, input, e5m, e1h int64 }

func account(t *testing.T, r response) accounting {
	t.Helper()
	u := r.ok(t).usage(t)
	cc := r.msg["usage"].(map[string]any)["cache_creation"].(map[string]any)
	a := accounting{
		read: u["cache_read_input_tokens"], creation: u["cache_creation_input_tokens"], input: u["input_tokens"],
		e5m: int64(cc["ephemeral_5m_input_tokens"].(float64)), e1h: int64(cc["ephemeral_1h_input_tokens"].(float64)),
	}
	require.Equal(t, a.creation, a.e5m+a.e1h, "the TTL split adds up to the creation")
	return a
}

func TestCacheWriteThenRead(t *testing.T) {
	srv := upstream.Start(t)
	body := with(request(user("Hi")), "system", arr{cached(tokens(2000))})
	require.Equal(t, accounting{creation: 2000, input: 1, e5m: 2000}, account(t, post(t, srv, body)))
	require.Equal(t, accounting{read: 2000, input: 1}, account(t, post(t, srv, body)))
	ex := srv.Exchanges()
	require.Equal(t, upstream.Usage{CacheReadInputTokens: 2000, InputTokens: 1, OutputTokens: 1}, ex[1].Usage)
}

func TestCacheMinimumLength(t *testing.T) {
	srv := upstream.Start(t)
	short := with(request(user("Hi")), "system", arr{cached(tokens(1022))}) // 1022 + … < 1024: the breakpoint is on the system block
	require.Equal(t, accounting{input: 1023}, account(t, post(t, srv, short)))
	require.Equal(t, accounting{input: 1023}, account(t, post(t, srv, short)), "a prefix under the minimum is never written")
	exact := with(request(user("Hi")), "system", arr{cached(tokens(1024))})
	require.Equal(t, accounting{creation: 1024, input: 1, e5m: 1024}, account(t, post(t, srv, exact)))
	require.Equal(t, accounting{read: 1024, input: 1}, account(t, post(t, srv, exact)))
}

// conversation is one user message of a big block and then n small blocks, the last a
// breakpoint: unit 0 is the big block, 1..n the small ones (no tools, no system).
func conversation(n int) obj {
	blocks := arr{text(tokens(1100))}
	for i := 1; i <= n; i++ {
		b := text(tokens(10))
		if i == n {
			b = cached(tokens(10))
		}
		blocks = append(blocks, b)
	}
	return request(user(blocks))
}

func TestCacheLookback(t *testing.T) {
	// The first request writes the prefix through block 5; a later request whose only
	// breakpoint is k blocks further finds it if k ≤ 20 (the breakpoint's block and the 20
	// before it are checked).
	for _, tt := range []struct {
		more int
		hit  bool
	}{{1, true}, {20, true}, {21, false}} {
		srv := upstream.Start(t)
		require.Equal(t, int64(1150), account(t, post(t, srv, conversation(5))).creation)
		got := account(t, post(t, srv, conversation(5+tt.more)))
		total := int64(1100 + 10*(5+tt.more))
		if tt.hit {
			require.Equal(t, accounting{read: 1150, creation: total - 1150, e5m: total - 1150}, got, "%d blocks further", tt.more)
		} else {
			require.Equal(t, accounting{creation: total, e5m: total}, got, "%d blocks further", tt.more)
		}
	}
}

func TestCacheLongestPrefixWins(t *testing.T) {
	srv := upstream.Start(t)
	// Two breakpoints: the system (2000) and the end of the first user message (2000+5).
	first := with(request(user(arr{cached(tokens(5))})), "system", arr{cached(tokens(2000))})
	require.Equal(t, accounting{creation: 2005, e5m: 2005}, account(t, post(t, srv, first)))
	// The same prefix then a new turn: both entries match, the longer one is read.
	second := with(request(user(arr{cached(tokens(5))}), assistant("Sure."), user(arr{cached(tokens(7))})), "system", arr{cached(tokens(2000))})
	require.Equal(t, accounting{read: 2005, creation: 2 + 7, e5m: 9}, account(t, post(t, srv, second)))
	// A different first message: only the system entry matches.
	third := with(request(user(arr{cached(tokens(6))})), "system", arr{cached(tokens(2000))})
	require.Equal(t, accounting{read: 2000, creation: 6, e5m: 6}, account(t, post(t, srv, third)))
}

func TestCacheAutomaticBreakpoint(t *testing.T) {
	srv := upstream.Start(t)
	first := with(request(user(tokens(100))), "system", tokens(2000), "cache_control", ephemeral)
	require.Equal(t, accounting{creation: 2100, e5m: 2100}, account(t, post(t, srv, first)))
	second := with(request(user(tokens(100)), assistant("Done."), user(tokens(50))), "system", tokens(2000), "cache_control", ephemeral)
	require.Equal(t, accounting{read: 2100, creation: 2 + 50, e5m: 52}, account(t, post(t, srv, second)))
}

func TestCacheBreakpointRules(t *testing.T) {
	srv := upstream.Start(t)
	five := with(request(user(arr{cached("a"), cached("b"), cached("c"), cached("d")})), "system", arr{cached("s")})
	post(t, srv, five).refused(t, 400, "invalid_request_error", "A maximum of 4 blocks with cache_control may be provided. Found 5.")
	auto := with(request(user(arr{cached("a"), cached("b"), cached("c"), cached("d")})), "cache_control", ephemeral)
	post(t, srv, auto).refused(t, 400, "invalid_request_error", "Found 5.")
	toolBreakpoints := with(request(user(arr{cached("a"), cached("b")})), "system", arr{cached("s"), cached("t")},
		"tools", arr{with(tool("lookup"), "cache_control", ephemeral)})
	post(t, srv, toolBreakpoints).refused(t, 400, "invalid_request_error", "Found 5.")
	post(t, srv, request(user(arr{cached("a", ephemeralTTL("10m"))}))).refused(t, 400, "invalid_request_error",
		"messages.0.content.0.cache_control.ephemeral.ttl: Input should be '5m' or '1h'")
	post(t, srv, request(user(arr{cached("a", obj{"type": "persistent"})}))).refused(t, 400, "invalid_request_error",
		"messages.0.content.0.cache_control.type: Input should be 'ephemeral'")
	post(t, srv, with(request(user(arr{cached("a", ephemeralTTL("1h"))})), "system", arr{cached("s")})).refused(t, 400, "invalid_request_error",
		"must not come after a ttl='5m'")
	four := with(request(user(arr{cached("a"), cached("b"), cached("c")})), "system", arr{cached("s")})
	post(t, srv, four).ok(t)
}

func TestCacheTTLSplit(t *testing.T) {
	srv := upstream.Start(t)
	body := with(request(user(arr{cached(tokens(100))})), "system", arr{cached(tokens(2000), ephemeralTTL("1h"))})
	require.Equal(t, accounting{creation: 2100, e1h: 2000, e5m: 100}, account(t, post(t, srv, body)))
}

func TestCacheExpiry(t *testing.T) {
	start := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	srv := upstream.Start(t, upstream.WithClock(func() time.Time { return start }))
	short := with(request(user("Hi")), "system", arr{cached(tokens(2000))})
	long := with(request(user("Hi")), "system", arr{cached(tokens(3000), ephemeralTTL("1h"))})
	require.Equal(t, int64(2000), account(t, post(t, srv, short)).creation)
	require.Equal(t, int64(3000), account(t, post(t, srv, long)).creation)

	srv.Advance(4 * time.Minute)
	require.Equal(t, int64(2000), account(t, post(t, srv, short)).read, "alive at 4 minutes")
	srv.Advance(4 * time.Minute)
	require.Equal(t, int64(2000), account(t, post(t, srv, short)).read, "the read at 4 minutes refreshed it")
	srv.Advance(5*time.Minute + time.Second)
	require.Equal(t, accounting{creation: 2000, input: 1, e5m: 2000}, account(t, post(t, srv, short)), "expired 5 minutes after its last use")

	require.Equal(t, int64(3000), account(t, post(t, srv, long)).read, "a 1h entry outlives 13 minutes")
	srv.Advance(61 * time.Minute)
	require.Equal(t, int64(3000), account(t, post(t, srv, long)).creation, "and expires after an hour")
}

func TestCacheInvalidation(t *testing.T) {
	srv := upstream.Start(t)
	bigTool := with(tool("lookup"), "description", tokens(1100), "cache_control", ephemeral)
	toolTokens := int64(2 + 1100 + 5) // "lookup", the description, {"type":"object"} (17 bytes)
	body := func(toolDef obj, system, message string, extra ...any) obj {
		return with(with(request(user(arr{cached(message)})), "tools", arr{toolDef}, "system", arr{cached(system)}), extra...)
	}
	base := body(bigTool, tokens(500), "Hi")
	require.Equal(t, toolTokens+500+1, account(t, post(t, srv, base)).creation)
	require.Equal(t, toolTokens+500+1, account(t, post(t, srv, base)).read)

	// A new system prompt keeps the tools' entry.
	require.Equal(t, toolTokens, account(t, post(t, srv, body(bigTool, tokens(501), "Hi"))).read)
	// A new tool definition invalidates everything after it.
	changed := with(bigTool, "description", tokens(1101))
	require.Equal(t, int64(0), account(t, post(t, srv, body(changed, tokens(500), "Hi"))).read)
	// Thinking and tool_choice invalidate the messages but keep the tools and the system.
	thinking := body(bigTool, tokens(500), "Hi", "thinking", enabled(1024), "max_tokens", 2000)
	require.Equal(t, toolTokens+500, account(t, post(t, srv, thinking)).read)
	choice := body(bigTool, tokens(500), "Hi", "tool_choice", obj{"type": "none"})
	require.Equal(t, toolTokens+500, account(t, post(t, srv, choice)).read)
	// Moving a breakpoint does not change the prompt: the entry without it still matches.
	moved := with(request(user(arr{cached("Hi")})), "tools", arr{bigTool}, "system", arr{text(tokens(500))})
	require.Equal(t, toolTokens+500+1, account(t, post(t, srv, moved)).read)
	// Another model has its own cache.
	require.Equal(t, int64(0), account(t, post(t, srv, with(base, "model", "claude-sonnet-4-0"))).read)
}

func TestCacheNotWrittenByFailedRequests(t *testing.T) {
	var calls atomic.Int32
	srv := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		if calls.Add(1) == 1 {
			return upstream.Reply{Status: 529}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "ok"}}}
	}))
	body := with(request(user("Hi")), "system", arr{cached(tokens(2000))})
	post(t, srv, body).refused(t, 529, "overloaded_error", "Overloaded")
	require.Equal(t, int64(2000), account(t, post(t, srv, body)).creation)
	require.Equal(t, int64(2000), account(t, post(t, srv, body)).read)
}

func TestCacheReadRefreshes(t *testing.T) {
	start := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	t.Run("an entry found by the lookback", func(t *testing.T) {
		srv := upstream.Start(t, upstream.WithClock(func() time.Time { return start }))
		require.Equal(t, int64(1150), account(t, post(t, srv, conversation(5))).creation)
		srv.Advance(4 * time.Minute)
		// Its only breakpoint is 5 blocks further: it reads the entry at block 5 and
		// refreshes it.
		require.Equal(t, int64(1150), account(t, post(t, srv, conversation(10))).read)
		srv.Advance(4 * time.Minute)
		require.Equal(t, int64(1150), account(t, post(t, srv, conversation(5))).read, "refreshed at 4 minutes")
	})
	t.Run("a shorter entry of the prefix read", func(t *testing.T) {
		srv := upstream.Start(t, upstream.WithClock(func() time.Time { return start }))
		body := func(message string) obj {
			return with(request(user(arr{cached(message)})), "system", arr{cached(tokens(2000))})
		}
		require.Equal(t, int64(2001), account(t, post(t, srv, body("Hi"))).creation)
		srv.Advance(4 * time.Minute)
		require.Equal(t, int64(2001), account(t, post(t, srv, body("Hi"))).read)
		srv.Advance(4 * time.Minute)
		require.Equal(t, int64(2000), account(t, post(t, srv, body("Yo"))).read, "the system entry was refreshed with the longer one")
	})
}
