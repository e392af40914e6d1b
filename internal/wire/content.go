package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ContentBlock is one block of event content (API.md §5.1): text, image, document,
// search_result or redacted. Fields not used by a block's type stay empty.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Source    json.RawMessage `json:"source,omitempty"`
	Title     *string         `json:"title,omitempty"`
	Context   *string         `json:"context,omitempty"`
	Content   []ContentBlock  `json:"content,omitempty"`
	Citations json.RawMessage `json:"citations,omitempty"`
}

// Content block types (API.md §5.1).
const (
	ContentTypeText         = "text"
	ContentTypeImage        = "image"
	ContentTypeDocument     = "document"
	ContentTypeSearchResult = "search_result"
	ContentTypeRedacted     = "redacted"
)

// TextSource reads the source of a document block: its data when it is a text source.
func (c ContentBlock) TextSource() (string, bool) {
	var s BlockSource
	if json.Unmarshal(c.Source, &s) != nil || s.Type != "text" {
		return "", false
	}
	if s.Data == nil {
		return "", true
	}
	return *s.Data, true
}

// SourceURL reads the source of a search_result block, a URL string ("" if it is not one).
func (c ContentBlock) SourceURL() string {
	var u string
	if json.Unmarshal(c.Source, &u) != nil {
		return ""
	}
	return u
}

// UnmarshalJSON rejects unknown fields.
func (c *ContentBlock) UnmarshalJSON(b []byte) error {
	type plain ContentBlock
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return err
	}
	*c = ContentBlock(p)
	return nil
}

// Block sets allowed in each place (API.md §5.1).
var (
	// A client may not send redacted blocks: they stand for content withheld by policy, which
	// only the service produces (the Managed Agents reference: "redacted blocks in a user
	// event → 400").
	UserMessageBlocks = map[string]bool{ContentTypeText: true, ContentTypeImage: true, ContentTypeDocument: true}
	ToolResultBlocks  = map[string]bool{ContentTypeText: true, ContentTypeImage: true, ContentTypeDocument: true, ContentTypeSearchResult: true}
)

// ValidateContent checks each block's required fields for its type and that the type is
// allowed where it is used. field is the path used in messages.
func ValidateContent(field string, blocks []ContentBlock, allowed map[string]bool) error {
	for i, b := range blocks {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !allowed[b.Type] {
			if b.Type == ContentTypeRedacted {
				return fmt.Errorf("%s.type: %q blocks stand for content withheld by policy and cannot be sent", f, b.Type)
			}
			return fmt.Errorf("%s.type: %q is not allowed here", f, b.Type)
		}
		if err := b.validate(f); err != nil {
			return err
		}
	}
	return nil
}

func (b ContentBlock) validate(f string) error {
	only := func(ok ...bool) error {
		for _, o := range ok {
			if !o {
				return fmt.Errorf("%s: unexpected field for a %s block", f, b.Type)
			}
		}
		return nil
	}
	switch b.Type {
	case ContentTypeText:
		if b.Text == nil {
			return fmt.Errorf("%s.text: is required", f)
		}
		return only(b.Source == nil, b.Title == nil, b.Context == nil, b.Content == nil, b.Citations == nil)
	case ContentTypeImage:
		if err := validateSource(f+".source", b.Source, imageMediaTypes, "base64", "url", "file"); err != nil {
			return err
		}
		return only(b.Text == nil, b.Title == nil, b.Context == nil, b.Content == nil, b.Citations == nil)
	case ContentTypeDocument:
		if err := validateSource(f+".source", b.Source, documentMediaTypes, "base64", "text", "url", "file"); err != nil {
			return err
		}
		return only(b.Text == nil, b.Content == nil, b.Citations == nil)
	case ContentTypeRedacted:
		// Content withheld by policy carries nothing but its type.
		return only(b.Text == nil, b.Source == nil, b.Title == nil, b.Context == nil, b.Content == nil, b.Citations == nil)
	case ContentTypeSearchResult:
		var src string
		if err := json.Unmarshal(b.Source, &src); err != nil || src == "" {
			return fmt.Errorf("%s.source: must be a URL string", f)
		}
		if b.Title == nil {
			return fmt.Errorf("%s.title: is required", f)
		}
		if err := ValidateContent(f+".content", b.Content, map[string]bool{ContentTypeText: true}); err != nil {
			return err
		}
		return only(b.Text == nil, b.Context == nil)
	}
	return fmt.Errorf("%s.type: unknown content block type %q", f, b.Type)
}

// BlockSource is the source object of an image or document block.
type BlockSource struct {
	Type      string  `json:"type"`
	MediaType *string `json:"media_type"`
	Data      *string `json:"data"`
	URL       *string `json:"url"`
	FileID    *string `json:"file_id"`
}

// MaxImageBase64Bytes is the largest image the Messages API accepts: 5 MB of base64
// (platform.claude.com/docs/en/build-with-claude/vision; the limit is on the encoded data).
const MaxImageBase64Bytes = 5 << 20

// Media types a base64 source may declare, per block type (the Messages API's: its image
// formats, PDF documents; a text source is text/plain).
var (
	imageMediaTypes    = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}
	documentMediaTypes = []string{"application/pdf"}
)

func validateSource(f string, raw json.RawMessage, mediaTypes []string, kinds ...string) error {
	if len(raw) == 0 {
		return fmt.Errorf("%s: is required", f)
	}
	var s BlockSource
	if err := DecodeStrict(raw, &s); err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	allowed := false
	for _, k := range kinds {
		allowed = allowed || s.Type == k
	}
	if !allowed {
		return fmt.Errorf("%s.type: %q is not allowed here", f, s.Type)
	}
	switch s.Type {
	case "base64", "text":
		if s.MediaType == nil || s.Data == nil || s.URL != nil || s.FileID != nil {
			return fmt.Errorf("%s: a %s source needs media_type and data only", f, s.Type)
		}
		want := mediaTypes
		if s.Type == "text" {
			want = []string{"text/plain"}
		}
		if !slices.Contains(want, *s.MediaType) {
			return fmt.Errorf("%s.media_type: must be %s", f, strings.Join(want, ", "))
		}
		// The model provider refuses undecodable data only when the turn runs; refuse it now.
		if s.Type == "base64" {
			data, err := base64.StdEncoding.DecodeString(*s.Data)
			if err != nil || *s.Data == "" {
				return fmt.Errorf("%s.data: must be non-empty standard base64", f)
			}
			// The Messages API refuses an image over 5 MB (platform.claude.com/docs/en/
			// build-with-claude/vision, "Image size"); a turn would fail on it every time.
			if slices.Contains(imageMediaTypes, *s.MediaType) && len(*s.Data) > MaxImageBase64Bytes {
				return fmt.Errorf("%s.data: the image is %d bytes of base64 (%d decoded); the model accepts at most %d bytes of base64 (5 MB)", f, len(*s.Data), len(data), MaxImageBase64Bytes)
			}
		}
	case "url":
		if s.URL == nil || *s.URL == "" || s.MediaType != nil || s.Data != nil || s.FileID != nil {
			return fmt.Errorf("%s: a url source needs url only", f)
		}
	case "file":
		if s.FileID == nil || *s.FileID == "" || s.MediaType != nil || s.Data != nil || s.URL != nil {
			return fmt.Errorf("%s: a file source needs file_id only", f)
		}
		// Without the Files API there is no file to send: refuse it now rather than let the
		// model receive a note in its place.
		return fmt.Errorf("%s: file sources need the Files API, which this server does not serve yet; send the content as a base64 or url source", f)
	}
	return nil
}
