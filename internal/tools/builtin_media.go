package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif"  // registers the GIF header decoder image.DecodeConfig uses
	_ "image/jpeg" // registers the JPEG header decoder
	_ "image/png"  // registers the PNG header decoder
	"regexp"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits of the images and PDFs read returns as content blocks. They are the Messages API's:
// a request that breaks one is refused as a whole, and since a tool result stays in the
// conversation, every later request of the session would be refused too. So read refuses
// such a file itself, with a result the model can act on.
//
//   - Images: at most 5 MB per image and 8000×8000 pixels
//     (https://platform.claude.com/docs/en/build-with-claude/vision, "General limits"). The
//     5 MB counts the base64 data sent, so the file may have three quarters of it.
//   - PDFs: the whole request at most 32 MB, and at most 100 pages per request on models with
//     a 200k-token context window (https://platform.claude.com/docs/en/build-with-claude/pdf-support,
//     "Check PDF requirements"). A PDF's base64 data is four thirds of it; 20 MiB keeps that
//     (about 28 MB) under the request limit with room for the rest of the conversation.
const (
	MaxImageBase64Bytes = 5 << 20
	MaxImageBytes       = MaxImageBase64Bytes / 4 * 3
	MaxImageSide        = 8000
	MaxPDFBytes         = 20 << 20
	MaxPDFPages         = 100
)

// media is a file read hands to the model as a content block rather than as text.
type media struct {
	block     string // wire.ContentTypeImage or wire.ContentTypeDocument
	mediaType string // the source's media_type
	name      string // how messages name the format
}

// sniffMedia recognises the formats read returns as blocks by their first bytes: a file's
// name may say anything, and the model API checks the data against the declared media type.
func sniffMedia(data []byte) (media, bool) {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return media{wire.ContentTypeImage, "image/png", "PNG image"}, true
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return media{wire.ContentTypeImage, "image/jpeg", "JPEG image"}, true
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return media{wire.ContentTypeImage, "image/gif", "GIF image"}, true
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return media{wire.ContentTypeImage, "image/webp", "WebP image"}, true
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return media{wire.ContentTypeDocument, "application/pdf", "PDF document"}, true
	}
	return media{}, false
}

// unsupportedFormat names the binary formats read recognises but the model API does not take,
// so the error can say what to convert; "" for anything else.
func unsupportedFormat(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("BM")) && len(data) >= 26:
		return "a BMP image"
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "a TIFF image"
	case bytes.HasPrefix(data, []byte("\x00\x00\x01\x00")):
		return "an ICO image"
	case len(data) >= 12 && string(data[4:8]) == "ftyp" && (string(data[8:12]) == "heic" || string(data[8:12]) == "heix" || string(data[8:12]) == "avif" || string(data[8:12]) == "mif1"):
		return "a HEIF/AVIF image"
	}
	return ""
}

// mediaResult is read's result for a file sniffMedia recognised: the block with the file's
// bytes as base64 and a line of text saying what it is, or an error result when the model API
// would refuse it.
func mediaResult(path string, m media, data []byte) Result {
	var about string
	switch m.block {
	case wire.ContentTypeImage:
		w, h, err := imageSize(m.mediaType, data)
		if err != nil {
			return errorf("read: %q starts like a %s but is not a valid one: %v", path, m.name, err)
		}
		if len(data) > MaxImageBytes {
			return errorf("read: %q is a %s of %d bytes; the model accepts images of at most %d bytes (%d MiB once base64-encoded); make a smaller copy with bash (for example ImageMagick's `convert in.png -resize 50%% out.png`, if installed) and read that",
				path, m.name, len(data), MaxImageBytes, MaxImageBase64Bytes>>20)
		}
		if w > MaxImageSide || h > MaxImageSide {
			return errorf("read: %q is a %s of %d×%d pixels; the model accepts images of at most %d×%d pixels; make a smaller copy with bash and read that",
				path, m.name, w, h, MaxImageSide, MaxImageSide)
		}
		about = fmt.Sprintf("%s: %s, %d×%d pixels, %d bytes.", path, m.name, w, h, len(data))
	case wire.ContentTypeDocument:
		if len(data) > MaxPDFBytes {
			return errorf("read: %q is a PDF document of %d bytes; the model accepts PDFs of at most %d bytes (%d MiB) here; split it (for example with `qpdf --split-pages`, if installed) or extract its text with bash (`pdftotext`)",
				path, len(data), MaxPDFBytes, MaxPDFBytes>>20)
		}
		pages := pdfPages(data)
		if pages > MaxPDFPages {
			return errorf("read: %q is a PDF document of about %d pages; the model accepts at most %d pages per request; split it (for example with `qpdf --pages`, if installed) or extract its text with bash (`pdftotext`)",
				path, pages, MaxPDFPages)
		}
		about = fmt.Sprintf("%s: %s, %d bytes.", path, m.name, len(data))
		if pages > 0 {
			about = fmt.Sprintf("%s: %s, %d bytes, %d page%s.", path, m.name, len(data), pages, plural(pages))
		}
	}
	// A base64 source is type, media_type and data (wire.ValidateContent), no other member.
	source, err := json.Marshal(struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}{"base64", m.mediaType, base64.StdEncoding.EncodeToString(data)})
	if err != nil {
		return errorf("read: encode %q: %v", path, err)
	}
	// The block comes before the text: the vision guide recommends images before the text
	// about them.
	return Result{
		Text:    about,
		Content: []wire.ContentBlock{{Type: m.block, Source: source}, {Type: wire.ContentTypeText, Text: &about}},
	}
}

// imageSize reads an image's dimensions from its header, which also proves the file is an
// image of the format its first bytes claim.
func imageSize(mediaType string, data []byte) (w, h int, err error) {
	if mediaType == "image/webp" {
		return webpSize(data)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

// webpSize reads the canvas size of a WebP file from the header of its first chunk (the
// standard library has no WebP decoder): VP8X holds the canvas size, VP8L and VP8 the frame's.
// The layouts are those of RFC 9649 (WebP Image Format), sections 2.5 to 2.7.
func webpSize(data []byte) (w, h int, err error) {
	if len(data) < 30 {
		return 0, 0, fmt.Errorf("the WebP header is cut short")
	}
	payload := data[20:]
	switch string(data[12:16]) {
	case "VP8X":
		// Each is one less than the size, in 24 bits, little-endian.
		w = 1 + (int(payload[4]) | int(payload[5])<<8 | int(payload[6])<<16)
		h = 1 + (int(payload[7]) | int(payload[8])<<8 | int(payload[9])<<16)
		return w, h, nil
	case "VP8L":
		if payload[0] != 0x2f {
			return 0, 0, fmt.Errorf("bad VP8L signature")
		}
		bits := binary.LittleEndian.Uint32(payload[1:5])
		return 1 + int(bits&0x3fff), 1 + int(bits>>14&0x3fff), nil
	case "VP8 ":
		if !bytes.Equal(payload[3:6], []byte{0x9d, 0x01, 0x2a}) {
			return 0, 0, fmt.Errorf("bad VP8 start code")
		}
		return int(binary.LittleEndian.Uint16(payload[6:8]) & 0x3fff), int(binary.LittleEndian.Uint16(payload[8:10]) & 0x3fff), nil
	}
	return 0, 0, fmt.Errorf("unknown WebP chunk %q", data[12:16])
}

// pdfPageObject matches the dictionary entry of a page object (/Type /Page, not /Pages).
var pdfPageObject = regexp.MustCompile(`/Type\s*/Page(?:[\s/>\]]|$)`)

// pdfPages counts a PDF's page objects: exact for PDFs whose objects are written in the open,
// 0 when they are all in compressed object streams (then the model API is the judge). It is
// a bound check, not a parser: a count above MaxPDFPages is refused before the model sees it.
func pdfPages(data []byte) int {
	return len(pdfPageObject.FindAllIndex(data, -1))
}
