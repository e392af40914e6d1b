package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // DecodeConfig reads the dimensions of each format the API accepts
	_ "image/jpeg"
	_ "image/png"
)

// imageTokensCap is what an image costs at most: the API scales a larger image down until it
// is about this many tokens (build-with-claude/vision, "Evaluate image size"), so it is also
// the cost of an image whose dimensions this server cannot read (url sources, webp).
const imageTokensCap = 1600

// blockTokens is what one content block adds to the prompt:
//   - text: Tokens(text); thinking: Tokens(thinking); redacted_thinking: Tokens(data);
//   - tool_use: Tokens(name) + Tokens(input as compact JSON);
//   - tool_result: Tokens of a string content, or the sum over its content blocks;
//   - image: ceil(width*height/750) capped at 1600 (the vision page's estimate), 1600 when
//     the dimensions cannot be read;
//   - document: Tokens(title) + Tokens(context) + Tokens of the text, or of the decoded PDF
//     bytes, or 1600 for a url source.
func blockTokens(b Block) int64 {
	switch b.Type {
	case "text":
		return Tokens(b.Text)
	case "thinking":
		return Tokens(b.Thinking)
	case "redacted_thinking":
		return Tokens(b.Data)
	case "tool_use":
		return Tokens(b.Name) + Tokens(compactJSON(b.Input))
	case "tool_result":
		content, _ := resultContent(b.Content)
		var n int64
		for _, c := range content {
			n += blockTokens(c)
		}
		return n
	case "image":
		return imageTokens(b.Source)
	case "document":
		return Tokens(b.Title) + Tokens(b.Context) + documentTokens(b.Source)
	}
	return 0
}

// toolTokens is what one tool definition adds to the prompt.
func toolTokens(t Tool) int64 {
	return Tokens(t.Name) + Tokens(t.Description) + Tokens(compactJSON(t.InputSchema))
}

func imageTokens(raw json.RawMessage) int64 {
	var src mediaSource
	if json.Unmarshal(raw, &src) != nil || src.Type != "base64" {
		return imageTokensCap
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil {
		return imageTokensCap
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return imageTokensCap
	}
	return min((int64(cfg.Width)*int64(cfg.Height)+749)/750, imageTokensCap)
}

func documentTokens(raw json.RawMessage) int64 {
	var src mediaSource
	if json.Unmarshal(raw, &src) != nil {
		return 0
	}
	switch src.Type {
	case "text":
		return Tokens(src.Data)
	case "base64":
		data, _ := base64.StdEncoding.DecodeString(src.Data)
		return Tokens(string(data))
	default:
		return imageTokensCap
	}
}

// resultContent reads a tool_result's content: a string is one text block.
func resultContent(raw json.RawMessage) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var blocks []Block
	err := json.Unmarshal(raw, &blocks)
	return blocks, err
}

// compactJSON is raw without insignificant space, so that the count does not depend on how
// a client indents its JSON.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
