package web

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// htmlConverter turns a page into Markdown with html-to-markdown v2, over the
// golang.org/x/net/html parser (the one the standard library's authors keep, HTML5-exact).
//
// Why Markdown of the whole page rather than a readability-style main-content extraction
// (go-readability): Markdown keeps what a model uses, headings, links (made absolute),
// lists, code blocks and tables, and the whole page keeps what readability heuristics drop
// on pages that are not articles: API references, index pages, tables of contents. Scripts,
// styles, the head, forms and embedded media are removed; the page's length is bounded by
// max_content_tokens anyway.
type htmlConverter struct {
	conv *converter.Converter
}

func newHTMLConverter() htmlConverter {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
	))
	for _, tag := range []string{"svg", "canvas", "template", "button", "select", "object", "embed", "dialog"} {
		conv.Register.TagType(tag, converter.TagTypeRemove, converter.PriorityStandard)
	}
	return htmlConverter{conv: conv}
}

// toMarkdown parses body (in the charset the response declares, else UTF-8, else what its
// <meta> says) and returns the page's <title> and its text as Markdown.
func (c htmlConverter) toMarkdown(ctx context.Context, body []byte, contentType string, page *url.URL) (title, text string, err error) {
	doc, err := html.Parse(utf8Reader(body, contentType))
	if err != nil {
		return "", "", err
	}
	title = pageTitle(doc)
	dropDataImages(doc)
	md, err := c.conv.ConvertNode(doc, converter.WithContext(ctx), converter.WithDomain(page.String()))
	if err != nil {
		return "", "", err
	}
	return title, string(bytes.TrimSpace(md)), nil
}

// decodeText returns a text response as UTF-8.
func decodeText(body []byte, contentType string) string {
	b, err := io.ReadAll(utf8Reader(body, contentType))
	if err != nil {
		return string(body)
	}
	return string(b)
}

// utf8Reader reads body as UTF-8: in the charset the Content-Type names; as it is when it is
// valid UTF-8 already; else by what charset.NewReader finds (a BOM, an HTML <meta>, else
// windows-1252, as browsers do).
func utf8Reader(body []byte, contentType string) io.Reader {
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
		if r, err := charset.NewReaderLabel(params["charset"], bytes.NewReader(body)); err == nil {
			return r
		}
	}
	if utf8.Valid(body) {
		return bytes.NewReader(body)
	}
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return bytes.NewReader(body)
	}
	return r
}

// pageTitle is the text of the document's first HTML <title> (not an SVG one), whitespace
// collapsed.
func pageTitle(doc *html.Node) string {
	var title *html.Node
	var find func(n *html.Node)
	find = func(n *html.Node) {
		for c := n.FirstChild; c != nil && title == nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.DataAtom == atom.Title && c.Namespace == "" {
				title = c
				return
			}
			if c.Type == html.ElementNode && c.Namespace != "" {
				continue // svg and math have titles of their own
			}
			find(c)
		}
	}
	find(doc)
	if title == nil {
		return ""
	}
	var sb strings.Builder
	for c := title.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			sb.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(sb.String()), " ")
}

// dropDataImages removes images inlined as data: URLs: their base64 would fill the text.
func dropDataImages(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && c.DataAtom == atom.Img && strings.HasPrefix(strings.TrimSpace(attr(c, "src")), "data:") {
			n.RemoveChild(c)
		} else {
			dropDataImages(c)
		}
		c = next
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}
