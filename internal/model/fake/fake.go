// Package fake is the offline, deterministic model (docs/fake-model.md): it answers from
// directives written in the latest user message, so tests, demos and benchmarks can drive the
// agent loop without a network or an API key. It is the default model.
//
// A call is a pure function of its request (plus the attempt number of model.WithAttempt):
//   - The turn is the latest real user message: the newest user message holding at least one
//     text block (a message made only of tool_result blocks answers a tool call and is not a
//     turn). Its last text block is the message text (consecutive user messages reach the
//     model merged, each as its own block, and only the newest one counts).
//   - The call number is the count of assistant messages after that message, so a retried or
//     replayed call sees the same number and gives the same answer.
//   - Directives are lines whose first word (after leading blanks) is one of /tool, /loop,
//     /sleep, /fail, /think; every other line is prose (a line such as "/etc/hosts is
//     missing" stays prose).
//
// Answers:
//   - /tool NAME JSON: call 0 answers one tool_use block per /tool line, in order (stop
//     tool_use). /loop NAME JSON: every call answers a tool_use block for each /loop line
//     (on call 0 together with the /tool lines, in line order).
//   - The message is the last text block of the latest user turn: consecutive user messages
//     reach the model merged, each as its own text block.
//   - A call after the first that asks for no tool and follows tool results (the messages
//     after the last assistant message hold tool_result blocks) answers one line per result, in result
//     order: "NAME: TEXT" or "NAME error: TEXT", TEXT being the result's text blocks joined by
//     newlines, trimmed, cut to 200 characters, with line breaks turned into spaces. NAME
//     comes from the tool_use block with that id in the last assistant message (the id itself
//     when none matches).
//   - Otherwise "echo: PROSE", PROSE being the message text without its directive lines,
//     trimmed ("echo:" when nothing is left).
//   - /think: every answer starts with a thinking block. /sleep MS: every call first waits MS
//     milliseconds and returns ctx.Err() if cancelled meanwhile. /fail KIND N: call 0 fails
//     with a *model.Error of KIND while model.Attempt(ctx) <= N — failed calls leave nothing
//     in the conversation, so the retry attempt is what tells the N+1st try from the first.
//   - A malformed directive (bad JSON, missing argument, unknown /fail kind, a second /sleep
//     or /fail) makes every call answer a text saying what is wrong; no directive applies.
//
// Tool use ids are toolu_fake_<n>, n counting the tool_use blocks of the whole conversation,
// so they are unique within it. Stop reasons are tool_use for tool calls, end_turn otherwise.
//
// Usage: input tokens = ceil(C/4) where C counts the characters (runes) of the system prompt
// and of every message block: text, thinking text, tool_use name and input JSON, and the
// blocks nested in tool_result content. Tool definitions, ids and signatures are not counted.
// Output tokens = ceil(C/4) with the same rule over the answer's blocks.
//
// It imports only the model package.
package fake

import (
	"context"
	"time"

	"github.com/managed-agents/managed-agents/internal/model"
)

// Client is the fake model. The zero value is not usable; build it with New.
type Client struct {
	sleep     func(ctx context.Context, d time.Duration) error
	wordDelay time.Duration
}

var _ model.Client = (*Client)(nil)

// Option configures a Client.
type Option func(*Client)

// WithSleep replaces how the client waits (for /sleep and WithWordDelay); tests use it to see
// the requested durations without measuring time.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithWordDelay pauses d before each streamed word, so a human watching previews in a demo
// sees the text arrive. Create does not pause. The default is no pause.
func WithWordDelay(d time.Duration) Option {
	return func(c *Client) { c.wordDelay = d }
}

// New returns a fake model client.
func New(opts ...Option) *Client {
	c := &Client{sleep: sleepCtx}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Create returns the complete answer.
func (c *Client) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return c.Stream(ctx, req, nil)
}

// Stream streams the answer word by word through onDelta (which may be nil), then returns it.
func (c *Client) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	conv := readConversation(req.Messages)
	content, stop, err := c.answer(ctx, conv)
	if err != nil {
		return model.Response{}, err
	}
	if onDelta != nil {
		if err := c.stream(ctx, content, onDelta); err != nil {
			return model.Response{}, err
		}
	}
	return model.Response{
		Content:    content,
		StopReason: stop,
		Usage: model.Usage{
			InputTokens:  tokens(promptChars(req)),
			OutputTokens: tokens(blocksChars(content)),
		},
	}, nil
}

// answer decides the content of this call, waiting and failing as the directives ask.
func (c *Client) answer(ctx context.Context, conv conversation) ([]model.Block, string, error) {
	s, err := parseScript(conv.text)
	if err != nil {
		return []model.Block{textBlock("fake model: " + err.Error())}, model.StopEndTurn, nil
	}
	if s.sleep > 0 {
		if err := c.sleep(ctx, s.sleep); err != nil {
			return nil, "", err
		}
	}
	if s.fail != nil && conv.call == 0 {
		if attempt := model.Attempt(ctx); attempt <= s.fail.times {
			return nil, "", s.fail.err(attempt)
		}
	}
	content, stop := s.reply(conv)
	return content, stop, nil
}

// stream announces every block and sends text and thinking one word at a time.
func (c *Client) stream(ctx context.Context, content []model.Block, onDelta func(model.Delta)) error {
	for i, b := range content {
		onDelta(model.Delta{Kind: model.DeltaBlockStart, Index: i, Type: b.Type})
		kind, text := model.DeltaText, b.Text
		if b.Type == model.BlockThinking {
			kind, text = model.DeltaThinking, b.Thinking
		}
		for _, w := range words(text) {
			if err := c.pause(ctx); err != nil {
				return err
			}
			onDelta(model.Delta{Kind: kind, Index: i, Text: w})
		}
		onDelta(model.Delta{Kind: model.DeltaBlockStop, Index: i})
	}
	return nil
}

// pause waits the word delay; without one it still notices a cancelled context, so an
// interrupt stops a long answer between two words.
func (c *Client) pause(ctx context.Context) error {
	if c.wordDelay > 0 {
		return c.sleep(ctx, c.wordDelay)
	}
	return ctx.Err()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
