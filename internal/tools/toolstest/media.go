package toolstest

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// onePixelPNG is a valid 1×1 PNG: binary bytes (NUL included) a provider must carry intact.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

// minimalPDF is a one-page PDF.
const minimalPDF = "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" +
	"2 0 obj\n<< /Type /Pages /Count 1 /Kids [3 0 R] >>\nendobj\n" +
	"3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>\nendobj\n" +
	"trailer\n<< /Root 1 0 R >>\n%%EOF\n"

// runMedia checks that read returns an image or a PDF as a block whose data are the file's
// bytes exactly, on every provider: a remote one carries them through its own transport.
func runMedia(t *testing.T, newSandbox NewSandbox) {
	sb := newSandbox(t)
	for _, tc := range []struct {
		path, block, mediaType string
		data                   []byte
	}{
		{"img/dot.png", wire.ContentTypeImage, "image/png", onePixelPNG},
		{"doc.pdf", wire.ContentTypeDocument, "application/pdf", []byte(minimalPDF)},
	} {
		require.NoError(t, sb.WriteFile(t.Context(), tc.path, tc.data))
		res := tool(t, sb, "read", jsonObject("file_path", tc.path))
		require.False(t, res.IsError, res.Text)
		require.NotEmpty(t, res.Content, tc.path)
		require.Equal(t, tc.block, res.Content[0].Type, tc.path)
		var src wire.BlockSource
		require.NoError(t, json.Unmarshal(res.Content[0].Source, &src))
		require.Equal(t, tc.mediaType, *src.MediaType)
		require.Equal(t, base64.StdEncoding.EncodeToString(tc.data), *src.Data, "%s: the block holds the file's bytes", tc.path)
	}
}
