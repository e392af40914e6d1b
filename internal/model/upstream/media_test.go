package upstream_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// pngOf is a base64 PNG of w×h pixels.
func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))))
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func imageBlock(mediaType, data string) obj {
	return obj{"type": "image", "source": obj{"type": "base64", "media_type": mediaType, "data": data}}
}

func documentBlock(source obj) obj { return obj{"type": "document", "source": source} }

var pdf = base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"))

func TestMedia(t *testing.T) {
	t.Parallel() // the biggest bodies: let them overlap the rest
	srv := upstream.Start(t)
	small := pngOf(t, 2, 2)
	withImages := func(blocks ...any) obj { return request(user(append(arr(blocks), text("What is this?")))) }
	many := func(n int, last string) obj {
		blocks := arr{}
		for range n - 1 {
			blocks = append(blocks, imageBlock("image/png", small))
		}
		return withImages(append(blocks, imageBlock("image/png", last))...)
	}
	refused := []struct {
		name string
		body obj
		want string
	}{
		{"an image type the API does not read", withImages(imageBlock("image/bmp", small)), "messages.0.content.0.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"},
		{"data that is not base64", withImages(imageBlock("image/png", "not base64!")), "messages.0.content.0.source.base64.data: The image data is not valid base64"},
		{"a PNG declared as a JPEG", withImages(imageBlock("image/jpeg", small)), "Image does not match the provided media type image/jpeg"},
		{"text declared as a GIF", withImages(imageBlock("image/gif", base64.StdEncoding.EncodeToString([]byte("hello")))), "Image does not match the provided media type image/gif"},
		{"an image over 8000 px", withImages(imageBlock("image/png", pngOf(t, 8001, 1))), "image dimensions exceed max allowed size: 8000 pixels"},
		{"21 images, one over 2000 px", many(21, pngOf(t, 2001, 1)), "exceed max allowed size for many-image requests: 2000 pixels"},
		{"101 images", many(101, small), "too many images in this request: at most 100"},
		{"a file source", withImages(obj{"type": "image", "source": obj{"type": "file", "file_id": "file_1"}}), "messages.0.content.0.source: Input tag 'file'"},
		{"a url source without a url", withImages(obj{"type": "image", "source": obj{"type": "url"}}), "source.url.url: Field required"},
		{"an extra source field", withImages(obj{"type": "image", "source": obj{"type": "url", "url": "https://x/a.png", "detail": "high"}}), "source.url.detail: Extra inputs are not permitted"},
		{"a base64 document that is not a PDF", withImages(documentBlock(obj{"type": "base64", "media_type": "application/pdf", "data": small})), "The PDF specified was not valid."},
		{"a base64 document of another type", withImages(documentBlock(obj{"type": "base64", "media_type": "text/plain", "data": pdf})), "source.base64.media_type: Input should be 'application/pdf'"},
		{"a text document of another type", withImages(documentBlock(obj{"type": "text", "media_type": "text/html", "data": "<p>x</p>"})), "source.text.media_type: Input should be 'text/plain'"},
		{"a bad image inside a tool result", loop(user("Hi"), assistant(arr{toolUse("toolu_s", "lookup")}), user(arr{toolResult("toolu_s", arr{imageBlock("image/jpeg", small)})})),
			"messages.2.content.0.tool_result.content.0.source.base64.data: Image does not match the provided media type image/jpeg"},
		{"a bad document inside a tool result", loop(user("Hi"), assistant(arr{toolUse("toolu_s", "lookup")}), user(arr{toolResult("toolu_s", arr{documentBlock(obj{"type": "base64", "media_type": "application/pdf", "data": "%%%"})})})),
			"tool_result.content.0.source.base64.data: The PDF specified is not valid base64"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).refused(t, 400, "invalid_request_error", tt.want)
		})
	}
	t.Run("an image over 5 MB", func(t *testing.T) {
		// Built as bytes: encoding 5 MB of JSON is slow under the race detector.
		big := `{"model":"` + testModel + `","max_tokens":100,"messages":[{"role":"user","content":[` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("A", 5<<20+4) + `"}}]}]}`
		post(t, srv, big).refused(t, 400, "invalid_request_error", "messages.0.content.0.source.base64: image exceeds 5 MB maximum: 5242884 bytes > 5242880 bytes")
	})
	accepted := []struct {
		name string
		body obj
	}{
		{"a PNG", withImages(imageBlock("image/png", small))},
		{"a GIF", withImages(imageBlock("image/gif", base64.StdEncoding.EncodeToString([]byte("GIF89a\x01\x00\x01\x00"))))},
		{"a WebP", withImages(imageBlock("image/webp", base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "))))},
		{"a url image", withImages(obj{"type": "image", "source": obj{"type": "url", "url": "https://example.com/a.png"}})},
		{"20 images, one over 2000 px", many(20, pngOf(t, 2001, 1))},
		{"100 images", many(100, small)},
		{"a PDF", withImages(with(documentBlock(obj{"type": "base64", "media_type": "application/pdf", "data": pdf}), "title", "Report"))},
		{"a text document", withImages(documentBlock(obj{"type": "text", "media_type": "text/plain", "data": "Plain words."}))},
		{"a url document", withImages(documentBlock(obj{"type": "url", "url": "https://example.com/a.pdf"}))},
		{"an image in a tool result", loop(user("Hi"), assistant(arr{toolUse("toolu_s", "lookup")}), user(arr{toolResult("toolu_s", arr{imageBlock("image/png", small), text("a screenshot")})}))},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv, tt.body).ok(t)
		})
	}
}

func TestImageTokens(t *testing.T) {
	srv := upstream.Start(t)
	// 75×100 px is 7500/750 = 10 tokens; "What is this?" is 13 bytes, 4 tokens.
	resp := post(t, srv, request(user(arr{imageBlock("image/png", pngOf(t, 75, 100)), text("What is this?")}))).ok(t)
	require.Equal(t, int64(14), resp.usage(t)["input_tokens"])
	// A url image is not read: it counts as the cap, 1600.
	resp = post(t, srv, request(user(arr{obj{"type": "image", "source": obj{"type": "url", "url": "https://x/a.png"}}, text("What is this?")}))).ok(t)
	require.Equal(t, int64(1604), resp.usage(t)["input_tokens"])
}
