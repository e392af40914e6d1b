package tools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// localSandbox is a fresh sandbox of the local provider, removed when the test ends.
func localSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	p := local.New(t.TempDir())
	ref, err := p.Create(t.Context(), sandbox.Spec{Name: "media", SessionID: "media"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	return sb
}

func encodePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func encodeJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h)), nil))
	return buf.Bytes()
}

func encodeGIF(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White}), nil))
	return buf.Bytes()
}

// webpLossless is the header of a lossless WebP of w×h pixels (RFC 9649 §2.6 / VP8L); read
// checks headers, not the compressed data after them.
func webpLossless(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	chunk := append([]byte{0x2f}, binary.LittleEndian.AppendUint32(nil, bits)...)
	chunk = append(chunk, make([]byte, 16)...)
	return webpFile("VP8L", chunk)
}

// webpExtended is the header of an extended WebP whose canvas is w×h (VP8X).
func webpExtended(w, h int) []byte {
	chunk := make([]byte, 10)
	chunk[4], chunk[5], chunk[6] = byte(w-1), byte((w-1)>>8), byte((w-1)>>16)
	chunk[7], chunk[8], chunk[9] = byte(h-1), byte((h-1)>>8), byte((h-1)>>16)
	return webpFile("VP8X", append(chunk, make([]byte, 8)...))
}

func webpFile(fourCC string, chunk []byte) []byte {
	body := append([]byte("WEBP"+fourCC), binary.LittleEndian.AppendUint32(nil, uint32(len(chunk)))...)
	body = append(body, chunk...)
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

// pdfWithPages is a PDF whose page objects are written in the open, as simple writers do.
func pdfWithPages(n int) []byte {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
	fmt.Fprintf(&b, "2 0 obj\n<< /Type /Pages /Count %d /Kids [", n)
	for i := range n {
		fmt.Fprintf(&b, " %d 0 R", i+3)
	}
	b.WriteString(" ] >>\nendobj\n")
	for i := range n {
		fmt.Fprintf(&b, "%d 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>\nendobj\n", i+3)
	}
	b.WriteString("trailer\n<< /Root 1 0 R >>\n%%EOF\n")
	return []byte(b.String())
}

func readTool(t *testing.T, sb sandbox.Sandbox, input string) tools.Result {
	t.Helper()
	return tools.RunBuiltinOnce(t.Context(), sb, "sevt_read", "read", json.RawMessage(input))
}

// blockSource decodes the base64 source of a result's first block.
func blockSource(t *testing.T, b wire.ContentBlock) (mediaType string, data []byte) {
	t.Helper()
	var src wire.BlockSource
	require.NoError(t, json.Unmarshal(b.Source, &src))
	require.Equal(t, "base64", src.Type)
	require.NotNil(t, src.MediaType)
	require.NotNil(t, src.Data)
	data, err := base64.StdEncoding.DecodeString(*src.Data)
	require.NoError(t, err)
	return *src.MediaType, data
}

func TestReadReturnsImagesAndPDFsAsBlocks(t *testing.T) {
	t.Parallel()
	sb := localSandbox(t)
	tests := []struct {
		name, path string
		data       []byte
		block      string
		mediaType  string
		about      string
	}{
		{"png", "shots/a.png", encodePNG(t, 3, 2), wire.ContentTypeImage, "image/png", "PNG image, 3×2 pixels"},
		{"jpeg", "b.jpg", encodeJPEG(t, 16, 8), wire.ContentTypeImage, "image/jpeg", "JPEG image, 16×8 pixels"},
		{"gif", "c.gif", encodeGIF(t, 5, 7), wire.ContentTypeImage, "image/gif", "GIF image, 5×7 pixels"},
		{"webp lossless", "d.webp", webpLossless(300, 200), wire.ContentTypeImage, "image/webp", "WebP image, 300×200 pixels"},
		{"webp extended", "e.webp", webpExtended(1024, 768), wire.ContentTypeImage, "image/webp", "WebP image, 1024×768 pixels"},
		{"pdf", "doc.pdf", pdfWithPages(2), wire.ContentTypeDocument, "application/pdf", "PDF document"},
		// The bytes decide, not the name.
		{"png named .txt", "really-a.txt", encodePNG(t, 4, 4), wire.ContentTypeImage, "image/png", "PNG image, 4×4 pixels"},
		{"jpeg named .png", "wrong.png", encodeJPEG(t, 2, 2), wire.ContentTypeImage, "image/jpeg", "JPEG image"},
		{"pdf without extension", "report", pdfWithPages(1), wire.ContentTypeDocument, "application/pdf", "1 page."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, sb.WriteFile(t.Context(), tt.path, tt.data))
			res := readTool(t, sb, fmt.Sprintf(`{"file_path":%q}`, tt.path))
			require.False(t, res.IsError, res.Text)
			require.Len(t, res.Content, 2)
			require.Equal(t, tt.block, res.Content[0].Type)
			mt, data := blockSource(t, res.Content[0])
			require.Equal(t, tt.mediaType, mt)
			require.Equal(t, tt.data, data, "the block holds the file's bytes")
			require.Equal(t, wire.ContentTypeText, res.Content[1].Type)
			require.Contains(t, *res.Content[1].Text, tt.path)
			require.Contains(t, *res.Content[1].Text, tt.about)
			require.Equal(t, *res.Content[1].Text, res.Text)
			// What an agent.tool_result may carry (API.md §5.1).
			require.NoError(t, wire.ValidateContent("content", res.Content, wire.ToolResultBlocks))
		})
	}
	t.Run("pdf page count", func(t *testing.T) {
		require.NoError(t, sb.WriteFile(t.Context(), "three.pdf", pdfWithPages(3)))
		require.Contains(t, readTool(t, sb, `{"file_path":"three.pdf"}`).Text, fmt.Sprintf("%d bytes, 3 pages.", len(pdfWithPages(3))))
	})
	t.Run("text named .png is text", func(t *testing.T) {
		require.NoError(t, sb.WriteFile(t.Context(), "notes.png", []byte("not an image\n")))
		res := readTool(t, sb, `{"file_path":"notes.png"}`)
		require.False(t, res.IsError, res.Text)
		require.Nil(t, res.Content)
		require.Equal(t, "     1\tnot an image", res.Text)
	})
	t.Run("a retried call reads the same blocks", func(t *testing.T) {
		first := readTool(t, sb, `{"file_path":"shots/a.png"}`)
		require.Equal(t, first, readTool(t, sb, `{"file_path":"shots/a.png"}`))
	})
}

func TestReadRefusesMediaTheModelWouldRefuse(t *testing.T) {
	t.Parallel()
	sb := localSandbox(t)
	bigPNG := append(encodePNG(t, 10, 10), make([]byte, tools.MaxImageBytes)...) // a valid header, then padding
	justPNG := append(encodePNG(t, 10, 10), make([]byte, tools.MaxImageBytes-len(encodePNG(t, 10, 10)))...)
	bigPDF := append(pdfWithPages(1), bytes.Repeat([]byte("%"), tools.MaxPDFBytes)...)
	bmp := append([]byte("BM"), make([]byte, 60)...)
	tests := []struct {
		name, path, input string
		data              []byte
		want              []string
	}{
		{"image over 5 MB in base64", "big.png", "", bigPNG,
			[]string{"big.png", fmt.Sprintf("PNG image of %d bytes", len(bigPNG)), fmt.Sprintf("at most %d bytes (5 MiB once base64-encoded)", tools.MaxImageBytes)}},
		{"image wider than 8000 pixels", "wide.png", "", encodePNG(t, tools.MaxImageSide+1, 1),
			[]string{"wide.png", "8001×1 pixels", "at most 8000×8000 pixels"}},
		{"webp taller than 8000 pixels", "tall.webp", "", webpExtended(10, 9000),
			[]string{"tall.webp", "10×9000 pixels"}},
		{"pdf over the size bound", "big.pdf", "", bigPDF,
			[]string{"big.pdf", fmt.Sprintf("PDF document of %d bytes", len(bigPDF)), fmt.Sprintf("at most %d bytes (20 MiB)", tools.MaxPDFBytes)}},
		{"pdf over the page bound", "long.pdf", "", pdfWithPages(tools.MaxPDFPages + 1),
			[]string{"long.pdf", "about 101 pages", "at most 100 pages"}},
		{"corrupt png", "broken.png", "", append([]byte("\x89PNG\r\n\x1a\n"), "garbage\x00"...),
			[]string{"broken.png", "starts like a PNG image but is not a valid one"}},
		{"bmp is unsupported", "pic.bmp", "", bmp,
			[]string{"pic.bmp", "is a BMP image", "PNG, JPEG, GIF and WebP images, and PDF documents", "convert it to PNG"}},
		{"other binary is unsupported", "prog", "", []byte{0x7f, 'E', 'L', 'F', 0, 1},
			[]string{"prog", "binary file (6 bytes)", "PNG, JPEG, GIF and WebP images, and PDF documents"}},
		{"view_range on an image", "small.png", `{"file_path":"small.png","view_range":[1,2]}`, encodePNG(t, 1, 1),
			[]string{"small.png", "is a PNG image", "view_range applies to text files only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, sb.WriteFile(t.Context(), tt.path, tt.data))
			input := tt.input
			if input == "" {
				input = fmt.Sprintf(`{"file_path":%q}`, tt.path)
			}
			res := readTool(t, sb, input)
			require.True(t, res.IsError, "a refused file is an error result, never silently dropped: %s", res.Text)
			require.Nil(t, res.Content, "an error result is text only")
			for _, w := range tt.want {
				require.Contains(t, res.Text, w)
			}
		})
	}
	t.Run("an image at the bound is accepted", func(t *testing.T) {
		require.Len(t, justPNG, tools.MaxImageBytes)
		require.NoError(t, sb.WriteFile(t.Context(), "just.png", justPNG))
		res := readTool(t, sb, `{"file_path":"just.png"}`)
		require.False(t, res.IsError, res.Text)
		var src wire.BlockSource
		require.NoError(t, json.Unmarshal(res.Content[0].Source, &src))
		require.Len(t, *src.Data, tools.MaxImageBase64Bytes, "the base64 data is exactly the API's 5 MB")
	})
}

// A result's texts reach the event log, which stores no NUL (wire.LogSafeJSON): the text
// block that names the file is made safe like any other result text. A NUL can only come from
// the path the model wrote, which a real sandbox refuses, so a sandbox that serves any path
// stands in.
func TestReadMediaTextIsLogSafe(t *testing.T) {
	t.Parallel()
	sb := anyPath{data: encodePNG(t, 1, 1)}
	res := tools.RunBuiltin(t.Context(), sb, "read", json.RawMessage(`{"file_path":"a\u0000b.png"}`))
	require.False(t, res.IsError, res.Text)
	require.Equal(t, "a"+wire.Replacement+"b.png: PNG image, 1×1 pixels, "+fmt.Sprint(len(sb.data))+" bytes.", res.Text)
	require.Equal(t, res.Text, *res.Content[1].Text)
}

// anyPath serves data for every path it is asked to read.
type anyPath struct {
	sandbox.Sandbox
	data []byte
}

func (a anyPath) ReadFile(context.Context, string) ([]byte, error) { return a.data, nil }
