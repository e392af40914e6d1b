package mcp

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Media types the wire accepts in a base64 source (wire.ValidateContent), and the largest
// image or PDF passed on as such (the Messages API refuses images over 5 MB).
var (
	imageMediaTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}
	maxBinaryBytes  = 5 << 20
	// maxResultBinaryBytes bounds the images and PDFs of one result together: each is
	// stored in the event log and sent to the model.
	maxResultBinaryBytes = 5 << 20
)

// convertResult turns an MCP tool result into wire content blocks allowed in
// agent.mcp_tool_result: text → text; image (a type the wire accepts) → image with a base64
// source; an embedded resource → its text, or an image/PDF block for such a blob; a
// resource link → a text naming its URI; audio and other binaries → a text note;
// structuredContent without content → its JSON as text. Text beyond maxChars (all blocks
// together) is cut, with a note.
func convertResult(res *sdk.CallToolResult, maxChars int) Result {
	out := Result{IsError: res.IsError, Content: []wire.ContentBlock{}}
	budget := maxChars
	binaryBudget := maxResultBinaryBytes
	addBinary := func(kind, mediaType string, data []byte) bool {
		if len(data) > binaryBudget {
			return false
		}
		b, ok := binaryBlock(kind, mediaType, data)
		if ok {
			out.Content = append(out.Content, b)
			binaryBudget -= len(data)
		}
		return ok
	}
	total := 0 // characters of text the tool produced, for the note
	addText := func(s string) {
		n := utf8.RuneCountInString(s)
		total += n
		if out.Truncated {
			return
		}
		if n <= budget {
			out.Content = append(out.Content, textBlock(s))
			budget -= n
			return
		}
		out.Truncated = true
		if budget > 0 {
			out.Content = append(out.Content, textBlock(firstRunes(s, budget)))
		}
		budget = 0
	}
	content := res.Content
	if len(content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			addText(string(b))
		}
	}
	for _, c := range content {
		switch c := c.(type) {
		case *sdk.TextContent:
			addText(c.Text)
		case *sdk.ImageContent:
			if !addBinary(wire.ContentTypeImage, c.MIMEType, c.Data) {
				addText(fmt.Sprintf("[image (%s, %d bytes) not shown: unsupported type or too large]", orUnknown(c.MIMEType), len(c.Data)))
			}
		case *sdk.AudioContent:
			addText(fmt.Sprintf("[audio (%s, %d bytes) not shown: audio is not supported]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			addText(resourceLinkText(c))
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				addText("[empty embedded resource]")
			case r.Blob == nil:
				addText(r.Text)
			default:
				kind := wire.ContentTypeDocument
				if strings.HasPrefix(r.MIMEType, "image/") {
					kind = wire.ContentTypeImage
				}
				if !addBinary(kind, r.MIMEType, r.Blob) {
					addText(fmt.Sprintf("[binary resource %s (%s, %d bytes) not shown]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
				}
			}
		default:
			addText(fmt.Sprintf("[unsupported MCP content of type %T not shown]", c))
		}
	}
	if out.Truncated {
		out.Content = append(out.Content, textBlock(fmt.Sprintf(
			"[output truncated: %d of %d characters of text shown]", maxChars, total)))
	}
	return out
}

// binaryBlock is an image (jpeg, png, gif, webp) or document (PDF) block with a base64
// source, if data is one the wire accepts.
func binaryBlock(kind, mediaType string, data []byte) (wire.ContentBlock, bool) {
	mediaType = strings.ToLower(strings.TrimSpace(strings.SplitN(mediaType, ";", 2)[0]))
	ok := len(data) > 0 && len(data) <= maxBinaryBytes
	switch kind {
	case wire.ContentTypeImage:
		ok = ok && slices.Contains(imageMediaTypes, mediaType)
	case wire.ContentTypeDocument:
		ok = ok && mediaType == "application/pdf"
	}
	if !ok {
		return wire.ContentBlock{}, false
	}
	src, err := json.Marshal(map[string]string{"type": "base64", "media_type": mediaType, "data": base64.StdEncoding.EncodeToString(data)})
	if err != nil {
		return wire.ContentBlock{}, false
	}
	return wire.ContentBlock{Type: kind, Source: src}, true
}

func resourceLinkText(l *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	b.WriteString(l.URI)
	if name := cmp.Or(l.Title, l.Name); name != "" {
		fmt.Fprintf(&b, " (%s)", name)
	}
	if l.MIMEType != "" {
		fmt.Fprintf(&b, ", %s", l.MIMEType)
	}
	if l.Description != "" {
		fmt.Fprintf(&b, ": %s", l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func textBlock(s string) wire.ContentBlock {
	return wire.ContentBlock{Type: wire.ContentTypeText, Text: &s}
}

func firstRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func orUnknown(s string) string { return cmp.Or(s, "unknown type") }
