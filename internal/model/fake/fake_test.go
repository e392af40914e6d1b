package fake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/fake"
)

func user(text string) model.Message {
	return model.Message{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: text}}}
}

func assistant(blocks ...model.Block) model.Message {
	return model.Message{Role: "assistant", Content: blocks}
}

// results is a user message answering tool calls only.
func results(blocks ...model.Block) model.Message {
	return model.Message{Role: "user", Content: blocks}
}

func result(id, text string, isError bool) model.Block {
	return model.Block{Type: model.BlockToolResult, ToolUseID: id, IsError: isError,
		Content: []model.Block{{Type: model.BlockText, Text: text}}}
}

func toolUse(id, name, input string) model.Block {
	return model.Block{Type: model.BlockToolUse, ID: id, Name: name, Input: []byte(input)}
}

func text(s string) model.Block { return model.Block{Type: model.BlockText, Text: s} }

func thinking(s string) model.Block {
	return model.Block{Type: model.BlockThinking, Thinking: s, Signature: "fake_signature"}
}

func request(msgs ...model.Message) model.Request {
	return model.Request{Model: "fake", Messages: msgs, MaxTokens: 1024}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	const twoTools = "list and read\n/tool bash {\"command\": \"ls\"}\n/tool read {\"path\":\"a.txt\"}"
	long := strings.Repeat("x", 250)

	tests := []struct {
		name     string
		msgs     []model.Message
		attempt  int
		want     []model.Block
		wantStop string
	}{
		{name: "echo", msgs: []model.Message{user("hello  world")},
			want: []model.Block{text("echo: hello  world")}, wantStop: model.StopEndTurn},
		{name: "echo keeps prose lines and drops directive lines", msgs: []model.Message{user("first\n/sleep 0\nsecond\n")},
			want: []model.Block{text("echo: first\nsecond")}, wantStop: model.StopEndTurn},
		{name: "unknown slash word is prose", msgs: []model.Message{user("/etc/hosts is missing")},
			want: []model.Block{text("echo: /etc/hosts is missing")}, wantStop: model.StopEndTurn},
		{name: "no user message", msgs: nil,
			want: []model.Block{text("echo:")}, wantStop: model.StopEndTurn},
		{name: "merged user messages: the last text block is the latest message",
			msgs: []model.Message{{Role: "user", Content: []model.Block{text("/think\n/tool bash {}"), text("a")}}},
			want: []model.Block{text("echo: a")}, wantStop: model.StopEndTurn},
		{name: "a message after a cut-off turn is answered, not the old results",
			msgs: []model.Message{
				user(`/loop bash {"command":"true"}`),
				assistant(toolUse("toolu_fake_1", "bash", `{"command":"true"}`)),
				{Role: "user", Content: []model.Block{result("toolu_fake_1", "interrupted", true), text("hello")}},
			},
			want: []model.Block{text("echo: hello")}, wantStop: model.StopEndTurn},
		{name: "tool first call", msgs: []model.Message{user(twoTools)},
			want: []model.Block{
				toolUse("toolu_fake_1", "bash", `{"command":"ls"}`),
				toolUse("toolu_fake_2", "read", `{"path":"a.txt"}`),
			}, wantStop: model.StopToolUse},
		{name: "tool second call reports results by name",
			msgs: []model.Message{
				user(twoTools),
				assistant(toolUse("toolu_fake_1", "bash", `{"command":"ls"}`), toolUse("toolu_fake_2", "read", `{"path":"a.txt"}`)),
				results(result("toolu_fake_2", "no such file", true), result("toolu_fake_1", "a\nb\n", false)),
			},
			want: []model.Block{text("read error: no such file\nbash: a b")}, wantStop: model.StopEndTurn},
		{name: "tool result cut to 200 characters",
			msgs: []model.Message{
				user("/tool bash {}"),
				assistant(toolUse("sevt_1", "bash", `{}`)),
				results(result("sevt_1", long, false)),
			},
			want: []model.Block{text("bash: " + long[:200])}, wantStop: model.StopEndTurn},
		{name: "result of an unknown id is named by its id",
			msgs: []model.Message{
				user("/tool bash {}"),
				assistant(toolUse("a", "bash", `{}`)),
				results(result("b", "ok", false)),
			},
			want: []model.Block{text("b: ok")}, wantStop: model.StopEndTurn},
		{name: "tool ids continue the conversation's numbering",
			msgs: []model.Message{
				user("/tool bash {}"), assistant(toolUse("x", "bash", `{}`)), results(result("x", "ok", false)),
				assistant(text("bash: ok")), user("/tool write {\"path\":\"b\"}"),
			},
			want: []model.Block{toolUse("toolu_fake_2", "write", `{"path":"b"}`)}, wantStop: model.StopToolUse},
		{name: "loop calls on a late call",
			msgs: []model.Message{
				user("/loop bash {}"),
				assistant(toolUse("toolu_fake_1", "bash", `{}`)), results(result("toolu_fake_1", "ok", false)),
				assistant(toolUse("toolu_fake_2", "bash", `{}`)), results(result("toolu_fake_2", "ok", false)),
			},
			want: []model.Block{toolUse("toolu_fake_3", "bash", `{}`)}, wantStop: model.StopToolUse},
		{name: "loop and tool on call 0 in line order", msgs: []model.Message{user("/loop a {}\n/tool b {}")},
			want: []model.Block{toolUse("toolu_fake_1", "a", `{}`), toolUse("toolu_fake_2", "b", `{}`)}, wantStop: model.StopToolUse},
		{name: "loop without tool on call 1",
			msgs: []model.Message{
				user("/loop a {}\n/tool b {}"),
				assistant(toolUse("1", "a", `{}`), toolUse("2", "b", `{}`)),
				results(result("1", "x", false), result("2", "y", false)),
			},
			want: []model.Block{toolUse("toolu_fake_3", "a", `{}`)}, wantStop: model.StopToolUse},
		{name: "think before text", msgs: []model.Message{user("/think\nwhy")},
			want: []model.Block{thinking("Call 1 of this turn; the user wrote: why"), text("echo: why")}, wantStop: model.StopEndTurn},
		{name: "think before tool use", msgs: []model.Message{user("/think\n/tool bash {}")},
			want: []model.Block{thinking("Call 1 of this turn; the user wrote: "), toolUse("toolu_fake_1", "bash", `{}`)}, wantStop: model.StopToolUse},
		{name: "fail ends after N attempts", msgs: []model.Message{user("/fail overloaded 2\nhi")}, attempt: 3,
			want: []model.Block{text("echo: hi")}, wantStop: model.StopEndTurn},
		{name: "fail only hits the first call after the message",
			msgs: []model.Message{
				user("/fail server 1\n/tool bash {}"),
				assistant(toolUse("toolu_fake_1", "bash", `{}`)),
				results(result("toolu_fake_1", "ok", false)),
			},
			want: []model.Block{text("bash: ok")}, wantStop: model.StopEndTurn},
		{name: "tool-result-only message is not a turn",
			msgs: []model.Message{
				user("earlier"), assistant(text("echo: earlier")),
				user("/tool bash {}"),
				assistant(toolUse("toolu_fake_1", "bash", `{}`)),
				results(result("toolu_fake_1", "done", false)),
			},
			want: []model.Block{text("bash: done")}, wantStop: model.StopEndTurn},
		{name: "message with text and tool results is a turn",
			msgs: []model.Message{
				user("/tool bash {}"),
				assistant(toolUse("toolu_fake_1", "bash", `{}`)),
				{Role: "user", Content: []model.Block{result("toolu_fake_1", "done", false), text("/tool read {}")}},
			},
			want: []model.Block{toolUse("toolu_fake_2", "read", `{}`)}, wantStop: model.StopToolUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tt.attempt > 0 {
				ctx = model.WithAttempt(ctx, tt.attempt)
			}
			resp, err := fake.New().Create(ctx, request(tt.msgs...))
			require.NoError(t, err)
			require.Equal(t, tt.want, resp.Content)
			require.Equal(t, tt.wantStop, resp.StopReason)
		})
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		directive string
		attempt   int
		kind      model.ErrorKind
		status    int
		retryable bool
	}{
		{directive: "/fail overloaded 2", kind: model.ErrOverloaded, status: 529, retryable: true},
		{directive: "/fail overloaded 2", attempt: 2, kind: model.ErrOverloaded, status: 529, retryable: true},
		{directive: "/fail rate_limited 1", kind: model.ErrRateLimited, status: 429, retryable: true},
		{directive: "/fail server 1", attempt: 1, kind: model.ErrServer, status: 500, retryable: true},
		{directive: "/fail invalid 1", kind: model.ErrInvalid, status: 400, retryable: false},
	}
	for _, tt := range tests {
		t.Run(tt.directive, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tt.attempt > 0 {
				ctx = model.WithAttempt(ctx, tt.attempt)
			}
			_, err := fake.New().Stream(ctx, request(user("hi\n"+tt.directive)), nil)
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tt.kind, me.Kind)
			require.Equal(t, tt.status, me.Status)
			require.Equal(t, tt.retryable, model.IsRetryable(err))
			require.Contains(t, me.Message, tt.directive)
		})
	}
}

func TestMalformedDirectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg  string
		want string
	}{
		{msg: "go\n/tool bash {\"command\": }", want: "fake model: line 2: /tool: input of bash is not valid JSON: invalid character '}'"},
		{msg: "/tool bash [1]", want: "fake model: line 1: /tool: input of bash must be a JSON object, got [1]"},
		{msg: "/loop bash", want: "fake model: line 1: /loop: needs a tool name and a JSON object"},
		{msg: "/tool", want: "fake model: line 1: /tool: needs a tool name and a JSON object"},
		{msg: "/sleep soon", want: `fake model: line 1: /sleep: needs a whole number of milliseconds >= 0, got "soon"`},
		{msg: "/sleep -5", want: `fake model: line 1: /sleep: needs a whole number of milliseconds >= 0, got "-5"`},
		{msg: "/sleep 5\n/sleep 5", want: "fake model: line 2: /sleep: given twice"},
		{msg: "/fail busy 1", want: `fake model: line 1: /fail: unknown kind "busy"`},
		{msg: "/fail server 0", want: `fake model: line 1: /fail: needs a number of calls >= 1 after the kind, got "0"`},
		{msg: "/fail server", want: `fake model: line 1: /fail: needs a number of calls >= 1 after the kind, got ""`},
		{msg: "/fail server 1\n/fail server 2", want: "fake model: line 2: /fail: given twice"},
		{msg: "/think hard", want: `fake model: line 1: /think: takes no arguments, got "hard"`},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			t.Parallel()
			slept := false
			c := fake.New(fake.WithSleep(func(context.Context, time.Duration) error { slept = true; return nil }))
			resp, err := c.Create(t.Context(), request(user(tt.msg)))
			require.NoError(t, err)
			require.Len(t, resp.Content, 1)
			require.Equal(t, model.BlockText, resp.Content[0].Type)
			require.True(t, strings.HasPrefix(resp.Content[0].Text, tt.want), "got %q", resp.Content[0].Text)
			require.Equal(t, model.StopEndTurn, resp.StopReason)
			require.False(t, slept, "a malformed message applies no directive")
		})
	}
}

// TestStateless checks that an answer depends on the request only: the same request gives the
// same answer however often and in whatever order it is asked, and Create equals Stream.
func TestStateless(t *testing.T) {
	t.Parallel()
	first := request(user("/think\n/tool bash {\"command\":\"true\"}"))
	second := request(first.Messages[0], assistant(toolUse("toolu_fake_1", "bash", `{"command":"true"}`)),
		results(result("toolu_fake_1", "", false)))
	c := fake.New()
	var answers []model.Response
	for _, req := range []model.Request{second, first, second, first} {
		resp, err := c.Create(t.Context(), req)
		require.NoError(t, err)
		streamed, err := c.Stream(t.Context(), req, func(model.Delta) {})
		require.NoError(t, err)
		require.Equal(t, resp, streamed)
		answers = append(answers, resp)
	}
	require.Equal(t, answers[0], answers[2])
	require.Equal(t, answers[1], answers[3])
	require.Equal(t, model.StopToolUse, answers[1].StopReason)
	require.Equal(t, []model.Block{thinking("Call 2 of this turn; the user wrote: "), text("bash:")}, answers[0].Content)
}

func TestStreamOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
		want []model.Delta
	}{
		{name: "text word by word", msg: "big  red\ndog", want: []model.Delta{
			{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockText},
			{Kind: model.DeltaText, Index: 0, Text: "echo: "},
			{Kind: model.DeltaText, Index: 0, Text: "big  "},
			{Kind: model.DeltaText, Index: 0, Text: "red\n"},
			{Kind: model.DeltaText, Index: 0, Text: "dog"},
			{Kind: model.DeltaBlockStop, Index: 0},
		}},
		{name: "thinking then text", msg: "/think\nhi", want: []model.Delta{
			{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockThinking},
			{Kind: model.DeltaThinking, Index: 0, Text: "Call "},
			{Kind: model.DeltaThinking, Index: 0, Text: "1 "},
			{Kind: model.DeltaThinking, Index: 0, Text: "of "},
			{Kind: model.DeltaThinking, Index: 0, Text: "this "},
			{Kind: model.DeltaThinking, Index: 0, Text: "turn; "},
			{Kind: model.DeltaThinking, Index: 0, Text: "the "},
			{Kind: model.DeltaThinking, Index: 0, Text: "user "},
			{Kind: model.DeltaThinking, Index: 0, Text: "wrote: "},
			{Kind: model.DeltaThinking, Index: 0, Text: "hi"},
			{Kind: model.DeltaBlockStop, Index: 0},
			{Kind: model.DeltaBlockStart, Index: 1, Type: model.BlockText},
			{Kind: model.DeltaText, Index: 1, Text: "echo: "},
			{Kind: model.DeltaText, Index: 1, Text: "hi"},
			{Kind: model.DeltaBlockStop, Index: 1},
		}},
		{name: "tool use blocks are announced", msg: "/tool a {}\n/tool b {}", want: []model.Delta{
			{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockToolUse},
			{Kind: model.DeltaBlockStop, Index: 0},
			{Kind: model.DeltaBlockStart, Index: 1, Type: model.BlockToolUse},
			{Kind: model.DeltaBlockStop, Index: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []model.Delta
			resp, err := fake.New().Stream(t.Context(), request(user(tt.msg)), func(d model.Delta) { got = append(got, d) })
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, joinDeltas(resp.Content, got), resp.Content, "the deltas rebuild the response")
		})
	}
}

// joinDeltas rebuilds the text and thinking of content from deltas.
func joinDeltas(content []model.Block, deltas []model.Delta) []model.Block {
	out := make([]model.Block, len(content))
	for i, b := range content {
		out[i] = b
		out[i].Text, out[i].Thinking = "", ""
	}
	for _, d := range deltas {
		switch d.Kind {
		case model.DeltaText:
			out[d.Index].Text += d.Text
		case model.DeltaThinking:
			out[d.Index].Thinking += d.Text
		}
	}
	return out
}

func TestUsage(t *testing.T) {
	t.Parallel()
	req := model.Request{
		System: "sys", // 3 characters
		Messages: []model.Message{
			user("héllo\n/tool bash {}"),                     // 19 (runes, not bytes)
			assistant(toolUse("toolu_fake_1", "bash", `{}`)), // 4 + 2; the id does not count
			results(result("toolu_fake_1", "ok", false)),     // 2
		},
	}
	resp, err := fake.New().Create(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, []model.Block{text("bash: ok")}, resp.Content)
	require.Equal(t, model.Usage{
		InputTokens:  (3 + 19 + 6 + 2 + 3) / 4, // 30 characters, rounded up
		OutputTokens: (8 + 3) / 4,              // "bash: ok" has 8 characters
	}, resp.Usage)
}

func TestSleep(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var waits []time.Duration
	record := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}
	c := fake.New(fake.WithSleep(record), fake.WithWordDelay(time.Millisecond))

	resp, err := c.Create(t.Context(), request(user("/sleep 250\nhi there")))
	require.NoError(t, err)
	require.Equal(t, []model.Block{text("echo: hi there")}, resp.Content)
	require.Equal(t, []time.Duration{250 * time.Millisecond}, waits, "Create sleeps but does not pause between words")

	waits = nil
	_, err = c.Stream(t.Context(), request(user("/sleep 250\nhi there")), func(model.Delta) {})
	require.NoError(t, err)
	require.Equal(t, []time.Duration{250 * time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}, waits,
		"Stream sleeps, then pauses before each of the three words")
}

func TestCancellation(t *testing.T) {
	t.Parallel()

	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := fake.New().Create(ctx, request(user("hi")))
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("during sleep", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := fake.New().Stream(ctx, request(user("/sleep 3600000")), nil)
			done <- err
		}()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})

	t.Run("during the stream", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		var got []model.Delta
		_, err := fake.New().Stream(ctx, request(user("one two three")), func(d model.Delta) {
			got = append(got, d)
			if d.Kind == model.DeltaText {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []model.Delta{
			{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockText},
			{Kind: model.DeltaText, Index: 0, Text: "echo: "},
		}, got, "no word is sent after the cancel")
	})

	t.Run("sleeper error is returned as is", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		c := fake.New(fake.WithSleep(func(context.Context, time.Duration) error { return boom }))
		_, err := c.Create(t.Context(), request(user("/sleep 1")))
		require.ErrorIs(t, err, boom)
	})
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := fake.New()
	req := request(user("/think\n/tool bash {}"))
	want, err := c.Create(t.Context(), req)
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([]model.Response, 8)
	for i := range got {
		wg.Go(func() {
			got[i], _ = c.Stream(t.Context(), req, func(model.Delta) {})
		})
	}
	wg.Wait()
	for _, g := range got {
		require.Equal(t, want, g)
	}
}
