package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"maps"
	"slices"
)

// Limits of images and documents (build-with-claude/vision, "Basics and limits";
// build-with-claude/pdf-support, "PDF support requirements").
const (
	maxImageBytes      = 5 << 20 // an image's base64 data, as the API measures it
	maxImagesPerReq    = 100
	maxImageSide       = 8000 // px, either side
	manyImages         = 20   // more images than this in one request …
	maxImageSideInMany = 2000 // … and each side may be at most this
)

// imageTypes are the image media types the API accepts, with the leading bytes of each
// format: the API refuses data that is not of the declared type.
var imageTypes = map[string][][]byte{
	"image/jpeg": {{0xFF, 0xD8, 0xFF}},
	"image/png":  {{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}},
	"image/gif":  {[]byte("GIF87a"), []byte("GIF89a")},
	"image/webp": {[]byte("RIFF")}, // and "WEBP" at offset 8, checked below
}

// mediaSource is the source of an image or a document block.
type mediaSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
}

// mediaCount counts the images of a request and remembers their sides, for the limits that
// depend on how many there are.
type mediaCount struct {
	images  int
	maxSide int    // the longest side of any base64 image whose dimensions could be read
	first   string // the path of that image
}

var sourceFields = map[string][]string{
	"base64": {"type", "media_type", "data"},
	"url":    {"type", "url"},
	"text":   {"type", "media_type", "data"},
}

// readSource reads a source object with only the fields of its type among allowed.
func readSource(path string, raw json.RawMessage, allowed []string) (mediaSource, *apiError) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return mediaSource{}, invalid("%s.source: Input should be a valid dictionary", path)
	}
	var src mediaSource
	if err := json.Unmarshal(raw, &src); err != nil {
		return mediaSource{}, invalid("%s.source: %v", path, err)
	}
	if !slices.Contains(allowed, src.Type) {
		return mediaSource{}, invalid("%s.source: Input tag '%s' found using 'type' does not match any of the expected tags: %s",
			path, src.Type, quoteAll(allowed))
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(sourceFields[src.Type], k) {
			return mediaSource{}, invalid("%s.source.%s.%s: Extra inputs are not permitted", path, src.Type, k)
		}
	}
	if src.Type == "url" && src.URL == "" {
		return mediaSource{}, invalid("%s.source.url.url: Field required", path)
	}
	return src, nil
}

// checkImage checks an image block's source: base64 of an accepted type (valid base64, at
// most 5 MB, bytes of the declared type, at most 8000 px a side) or a url.
func checkImage(path string, raw json.RawMessage, media *mediaCount) *apiError {
	media.images++
	if media.images > maxImagesPerReq {
		return invalid("%s: too many images in this request: at most %d images are allowed", path, maxImagesPerReq)
	}
	src, err := readSource(path, raw, []string{"base64", "url"})
	if err != nil {
		return err
	}
	if src.Type == "url" {
		return nil
	}
	magic, ok := imageTypes[src.MediaType]
	if !ok {
		return invalid("%s.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", path)
	}
	if len(src.Data) > maxImageBytes {
		return invalid("%s.source.base64: image exceeds 5 MB maximum: %d bytes > %d bytes", path, len(src.Data), maxImageBytes)
	}
	data, decodeErr := base64.StdEncoding.DecodeString(src.Data)
	if decodeErr != nil || len(data) == 0 {
		return invalid("%s.source.base64.data: The image data is not valid base64", path)
	}
	matches := slices.ContainsFunc(magic, func(m []byte) bool { return bytes.HasPrefix(data, m) })
	if src.MediaType == "image/webp" {
		matches = matches && len(data) >= 12 && string(data[8:12]) == "WEBP"
	}
	if !matches {
		return invalid("%s.source.base64.data: Image does not match the provided media type %s", path, src.MediaType)
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		side := max(cfg.Width, cfg.Height)
		if side > maxImageSide {
			return invalid("%s.source.base64.data: image dimensions exceed max allowed size: %d pixels", path, maxImageSide)
		}
		if side > media.maxSide {
			media.maxSide, media.first = side, path
		}
	}
	return nil
}

// checkManyImages applies the smaller side limit of a request with more than 20 images; it
// runs once every image has been counted.
func checkManyImages(media *mediaCount) *apiError {
	if media.images > manyImages && media.maxSide > maxImageSideInMany {
		return invalid("%s.source.base64.data: At least one of the image dimensions exceed max allowed size for many-image requests: %d pixels",
			media.first, maxImageSideInMany)
	}
	return nil
}

// checkDocument checks a document block's source: a base64 PDF, plain text, or a url.
func checkDocument(path string, raw json.RawMessage, _ *mediaCount) *apiError {
	src, err := readSource(path, raw, []string{"base64", "text", "url"})
	if err != nil {
		return err
	}
	switch src.Type {
	case "base64":
		if src.MediaType != "application/pdf" {
			return invalid("%s.source.base64.media_type: Input should be 'application/pdf'", path)
		}
		data, decodeErr := base64.StdEncoding.DecodeString(src.Data)
		if decodeErr != nil || len(data) == 0 {
			return invalid("%s.source.base64.data: The PDF specified is not valid base64", path)
		}
		if !bytes.HasPrefix(data, []byte("%PDF-")) {
			return invalid("%s.source.base64.data: The PDF specified was not valid.", path)
		}
	case "text":
		if src.MediaType != "text/plain" {
			return invalid("%s.source.text.media_type: Input should be 'text/plain'", path)
		}
		if src.Data == "" {
			return invalid("%s.source.text.data: document text must be non-empty", path)
		}
	}
	return nil
}
