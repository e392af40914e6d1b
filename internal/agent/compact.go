package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Context compaction: when a conversation no longer fits the model's context window, the
// model summarises it and the conversation goes on from the summary. The summary is logged in
// agent.thread_context_compacted (its private part; clients see the event with no content, as
// hosted shows it), and projection starts from the latest one: everything logged before it
// is replaced by one user message that carries the summary. So the log stays the one truth: a
// step retried after a crash projects exactly what the worker sent, and a compaction that was
// committed is never paid for twice.

// compactAt is the share of the context window a request's estimated prompt may fill before
// the conversation is compacted first. The estimate (estimateTokens) is rough, and the answer
// needs room too, so a quarter of the window is kept free; an estimate that is still short is
// caught by the API's "prompt is too long", which compacts as well.
const compactAt = 0.75

// summaryMaxTokens bounds the summary: long enough for a thorough hand-over, short enough to
// leave almost the whole window to the work that follows.
const summaryMaxTokens = 8192

// shrinkKeepRunes is how much of a block's text a shrunken summarisation request keeps.
const shrinkKeepRunes = 400

// summaryInstruction asks for the summary. It is appended as the last user text of a request
// that is otherwise the conversation as sent (same system prompt and tools, so the request
// reads the cached prefix).
const summaryInstruction = `The conversation has grown too long for the context window and will be replaced by your summary of it. Do not call any tool. Write a summary that lets you continue the work without the conversation:
1. The user's requests and goals, in their own words where it matters, and every constraint or preference they stated.
2. What has been done: files created or changed (with paths), commands run and what they showed, decisions made and why.
3. Errors met and how they were resolved, or what is still failing.
4. The current state and the exact next steps, including anything the user asked that is still open.
Be specific: names, paths, values and short code excerpts that the next steps need. Answer with the summary only.`

// continuationText is the user message that replaces a compacted conversation.
func continuationText(summary string) string {
	return "This session continues from an earlier part of the conversation that was compacted to fit the context window. " +
		"Your summary of it:\n\n<summary>\n" + summary + "\n</summary>\n\n" +
		"Continue the work from where it stopped, without asking the user to repeat anything."
}

// compactedPrivate is an agent.thread_context_compacted event's private part.
type compactedPrivate struct {
	Summary string `json:"summary"`
	// PreTokens is the estimated prompt size that was compacted.
	PreTokens int64 `json:"pre_compaction_tokens"`
}

// compactedBlocks reads the continuation message of a compaction event.
func compactedBlocks(ev wire.Event) ([]model.Block, error) {
	var p compactedPrivate
	if len(ev.Private) == 0 {
		return nil, fmt.Errorf("%s %s has no summary", ev.Type, ev.ID)
	}
	if err := json.Unmarshal(ev.Private, &p); err != nil {
		return nil, fmt.Errorf("decode private part of %s %s: %w", ev.Type, ev.ID, err)
	}
	return []model.Block{{Type: model.BlockText, Text: continuationText(p.Summary)}}, nil
}

// errCompactionLimit: the conversation cannot be made to fit.
var errCompactionLimit = errors.New("compaction cannot make the conversation fit the context window")

// needsCompaction reports whether req's estimated prompt passes the share of the window
// compaction starts at. A conversation that is only the continuation of a compaction is never
// compacted again: there is nothing older to summarise.
func needsCompaction(req model.Request, m catalog.Model) bool {
	return estimateTokens(req) > int64(float64(m.ContextWindow)*compactAt)
}

// estimateTokens estimates a request's prompt in tokens: about four bytes of text a token,
// which is near what Claude's tokenizer gives for English prose and code, plus what the
// vision docs give for an image at its usual size (platform.claude.com/docs/en/
// build-with-claude/vision: width×height/750, about 1600 tokens for a 1.15-megapixel image).
func estimateTokens(req model.Request) int64 {
	n := len(req.System)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	var images, docTokens int64
	var walk func(bs []model.Block)
	walk = func(bs []model.Block) {
		for _, b := range bs {
			n += len(b.Text) + len(b.Thinking) + len(b.Input) + len(b.Title) + len(b.Context)
			switch b.Type {
			case model.BlockImage:
				images++
			case model.BlockDocument:
				docTokens += documentTokens(b.Source)
			}
			walk(b.Content)
		}
	}
	for _, m := range req.Messages {
		walk(m.Content)
	}
	return int64(n+3)/4 + images*1600 + docTokens
}

// documentTokens estimates a document block. A PDF costs its pages' text and images, not its
// bytes (a page is about 1,500 to 3,000 tokens: platform.claude.com/docs/en/build-with-claude/
// pdf-support), and PDF bytes are mostly compressed streams: about one token per 50 bytes of
// file. Counting its base64 would compact after any large PDF; an estimate that is short is
// caught by the API's "prompt is too long", which compacts too.
func documentTokens(source json.RawMessage) int64 {
	var src struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	if json.Unmarshal(source, &src) != nil {
		return 0
	}
	switch src.Type {
	case "text":
		return int64(len(src.Data)+3) / 4
	case "base64":
		return int64(len(src.Data)/4*3) / 50
	}
	return 3000 // a url: unknown, a few pages
}

// compact summarises req's conversation with the model and logs the summary. It returns the
// request with the continuation as its only message, and the usage of the summarisation calls
// (billed, so the caller adds it to the request's span). A summarisation request that is
// itself too long is tried again with the older blocks cut short, then with every block cut
// short; errCompactionLimit when even that does not fit or the model gives no summary.
func (c *Core) compact(ctx context.Context, in Input, req model.Request) (model.Request, model.Usage, error) {
	var billed model.Usage
	pre := estimateTokens(req)
	var summary string
	for attempt := 0; attempt < 3 && summary == ""; attempt++ {
		sreq := summaryRequest(req, attempt)
		resp, err := c.model.Stream(ctx, sreq, nil)
		billed = sumUsage(billed, resp.Usage)
		var me *model.Error
		if errors.As(err, &me) && me.PromptTooLong {
			c.log.InfoContext(ctx, "summarisation request too long; cutting older blocks short", "attempt", attempt)
			continue
		}
		if err != nil {
			return req, billed, fmt.Errorf("summarise the conversation: %w", err)
		}
		// A summary cut at max_tokens is still a summary; an answer without text is a
		// failed request the workflow retries, not a reason to give up on the session.
		summary = strings.TrimSpace(responseText(resp))
		if summary == "" {
			return req, billed, &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("the summary request was answered without text (stop reason %s)", resp.StopReason)}
		}
	}
	if summary == "" {
		return req, billed, fmt.Errorf("%w: the conversation is too long to summarise", errCompactionLimit)
	}
	private, err := json.Marshal(compactedPrivate{Summary: summary, PreTokens: pre})
	if err != nil {
		return req, billed, fmt.Errorf("encode compaction: %w", err)
	}
	ev := NewEvent{ID: ids.New(ids.Event), Type: wire.EventAgentThreadContextCompacted, Body: emptyBody(), Private: private}
	if _, err := in.Emitter.Emit(ctx, []NewEvent{ev}); err != nil {
		return req, billed, fmt.Errorf("emit compaction: %w", err)
	}
	c.log.InfoContext(ctx, "conversation compacted", "estimated_tokens_before", pre, "summary_bytes", len(summary))
	req.Messages = []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: continuationText(summary)}}}}
	return req, billed, nil
}

// summaryRequest is the request that asks for a summary of req's conversation. Attempt 0
// sends the conversation whole; attempt 1 cuts the blocks of all but the last four messages
// short, attempt 2 every block. Cutting keeps the structure the API checks (every tool_use
// still answered, the last assistant message's thinking unchanged) and only shortens text,
// tool results and drops old images and thinking.
func summaryRequest(req model.Request, attempt int) model.Request {
	s := req
	s.MaxTokens = min(req.MaxTokens, summaryMaxTokens)
	s.ToolChoice = model.ToolChoiceNone
	// No thinking: the whole budget goes to the summary, which a long think could otherwise
	// use up. Earlier thinking blocks may stay in the conversation with thinking off.
	s.Thinking = nil
	msgs := make([]model.Message, len(req.Messages))
	copy(msgs, req.Messages)
	// Messages before shrinkBefore are cut short: none on the first attempt, all but the last
	// four on the second, every one on the third.
	shrinkBefore := 0
	switch attempt {
	case 1:
		shrinkBefore = max(len(msgs)-4, 0)
	case 2:
		shrinkBefore = len(msgs)
	}
	lastAssistant := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			lastAssistant = i
			break
		}
	}
	for i := range shrinkBefore {
		msgs[i] = model.Message{Role: msgs[i].Role, Content: shrink(msgs[i].Content, i == lastAssistant)}
	}
	last := len(msgs) - 1
	instruction := model.Block{Type: model.BlockText, Text: summaryInstruction}
	if last >= 0 && msgs[last].Role == "user" {
		content := append(append([]model.Block(nil), msgs[last].Content...), instruction)
		msgs[last] = model.Message{Role: "user", Content: content}
	} else {
		msgs = append(msgs, model.Message{Role: "user", Content: []model.Block{instruction}})
	}
	s.Messages = msgs
	return s
}

// shrink cuts blocks short for a summarisation request. Thinking blocks cannot be changed
// (their signature covers them): they are dropped, except in the last assistant message,
// where a tool loop in progress needs them kept whole.
func shrink(blocks []model.Block, keepThinking bool) []model.Block {
	out := make([]model.Block, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case model.BlockThinking, model.BlockRedactedThinking:
			if keepThinking {
				out = append(out, b)
			}
			continue
		case model.BlockText:
			b.Text = cut(b.Text)
		case model.BlockImage, model.BlockDocument:
			b = model.Block{Type: model.BlockText, Text: "[" + b.Type + " omitted from the summary request]"}
		case model.BlockToolResult:
			b.Content = shrink(b.Content, false)
		}
		out = append(out, b)
	}
	return out
}

func cut(s string) string {
	r := []rune(s)
	if len(r) <= shrinkKeepRunes {
		return s
	}
	return string(r[:shrinkKeepRunes]) + fmt.Sprintf(" […%d characters cut for the summary request]", len(r)-shrinkKeepRunes)
}

// responseText is the text of a response's text blocks.
func responseText(resp model.Response) string {
	var b strings.Builder
	for _, bl := range resp.Content {
		if bl.Type == model.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// compactionLimitEvents close a request that compaction could not make fit: its span, as
// failed, and session.error compaction_limit_reached_error, which ends the turn with
// retries_exhausted (API.md §5.5, §8.2).
func compactionLimitEvents(startID string, billed model.Usage, cause error) ([]NewEvent, error) {
	end, err := spanEndEvent(ids.New(ids.Event), startID, true, billed)
	if err != nil {
		return nil, err
	}
	ev, err := newEvent(ids.New(ids.Event), wire.EventSessionError, wire.NewSessionErrorBody(
		wire.SessionErrorCompactionLimit,
		"The conversation no longer fits the model's context window, and compacting it could not make room: "+cause.Error(),
		wire.RetryStatusExhausted,
	))
	if err != nil {
		return nil, err
	}
	return []NewEvent{end, ev}, nil
}
