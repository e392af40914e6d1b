package fake

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/model"
)

// conversation is what the fake model reads from a request.
type conversation struct {
	// text of the latest real user message.
	text string
	// call is the number of model calls answered since that message.
	call int
	// results are the tool results after the last assistant message.
	results []toolResult
	// toolUses counts the tool_use blocks of all assistant messages, to number new ids.
	toolUses int
}

type toolResult struct {
	name    string
	text    string
	isError bool
}

func readConversation(msgs []model.Message) conversation {
	var conv conversation
	turn := -1
	lastAssistant := -1
	for i, m := range msgs {
		switch {
		case m.Role == "assistant":
			lastAssistant = i
			conv.toolUses += countType(m.Content, model.BlockToolUse)
		case m.Role == "user" && countType(m.Content, model.BlockText) > 0:
			turn = i
		}
	}
	if turn >= 0 {
		conv.text = latestText(msgs[turn].Content)
	}
	for _, m := range msgs[turn+1:] {
		if m.Role == "assistant" {
			conv.call++
		}
	}
	if lastAssistant >= 0 {
		conv.results = collectResults(msgs[lastAssistant].Content, msgs[lastAssistant+1:])
	}
	return conv
}

// collectResults names the tool_result blocks of msgs after the tool_use blocks they answer.
func collectResults(answered []model.Block, msgs []model.Message) []toolResult {
	names := map[string]string{}
	for _, b := range answered {
		if b.Type == model.BlockToolUse {
			names[b.ID] = b.Name
		}
	}
	var out []toolResult
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type != model.BlockToolResult {
				continue
			}
			name, ok := names[b.ToolUseID]
			if !ok {
				name = b.ToolUseID
			}
			out = append(out, toolResult{name: name, text: joinText(b.Content), isError: b.IsError})
		}
	}
	return out
}

func countType(blocks []model.Block, typ string) int {
	n := 0
	for _, b := range blocks {
		if b.Type == typ {
			n++
		}
	}
	return n
}

func joinText(blocks []model.Block) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == model.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// words splits text into pieces that each hold one word and the blanks after it; joined
// they give text back exactly. Blanks before the first word stay with it.
func words(text string) []string {
	var out []string
	start := 0
	seenWord, trailing := false, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		switch {
		case !space && trailing:
			out = append(out, text[start:i])
			start, trailing = i, false
		case space && seenWord:
			trailing = true
		}
		seenWord = seenWord || !space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// tokens converts a character count into the fake's token count: a quarter, rounded up.
func tokens(chars int) int64 { return int64((chars + 3) / 4) }

func promptChars(req model.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
		n += blocksChars(m.Content)
	}
	return n
}

func blocksChars(blocks []model.Block) int {
	n := 0
	for _, b := range blocks {
		n += utf8.RuneCountInString(b.Text) + utf8.RuneCountInString(b.Thinking) +
			utf8.RuneCountInString(b.Name) + utf8.RuneCount(b.Input) + blocksChars(b.Content)
	}
	return n
}

// latestText is the text of the latest user.message in a user turn. Consecutive user
// messages reach the model merged into one (a message sent after an interrupted turn follows
// the interrupted one); each contributes its own text block, so the last text block is the
// latest message.
func latestText(blocks []model.Block) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Type == model.BlockText {
			return blocks[i].Text
		}
	}
	return ""
}
