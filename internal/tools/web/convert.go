package web

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/url"
	"runtime"
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
//
// Converting is the one costly step of a fetch: the parsed tree and the converter's copies of
// it take over a hundred bytes per byte of HTML (a whole 10 MiB page allocated 1.3 GB in 26
// million allocations). So a page is cut before it is converted (htmlLimit), and no more
// conversions run at once than there are processors to run them (sem): beyond that,
// more at once only add to the memory held, not to the pages done.
type htmlConverter struct {
	conv *converter.Converter
	sem  chan struct{}
}

// maxConvertHTML is the most HTML converted of one page.
const maxConvertHTML = 2 << 20

// htmlBytesPerChar is how much HTML is converted per character of text the model may get:
// markup outweighs text several times on most pages, and the text beyond the budget is dropped.
const htmlBytesPerChar = 8

// htmlLimit is how much of a page's HTML is converted for a text budget of maxChars.
func htmlLimit(maxChars int64) int {
	return int(min(maxConvertHTML, htmlBytesPerChar*max(maxChars, 1)))
}

// cutHTML returns at most limit bytes of body and whether it cut any. It cuts before the last
// '<' of the kept part, so no tag is cut in half (unless that would keep less than half).
func cutHTML(body []byte, limit int) ([]byte, bool) {
	if len(body) <= limit {
		return body, false
	}
	head := body[:limit]
	if i := bytes.LastIndexByte(head, '<'); i > limit/2 {
		head = head[:i]
	}
	return head, true
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
	return htmlConverter{conv: conv, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// toMarkdown parses at most limit bytes of body (in the charset the response declares, else
// UTF-8, else what its <meta> says) and returns the page's <title> and its text as Markdown;
// cut says the page was longer. It waits for a free conversion slot, or for ctx to end.
func (c htmlConverter) toMarkdown(ctx context.Context, body []byte, contentType string, page *url.URL, limit int) (title, text string, cut bool, err error) {
	body, cut = cutHTML(body, limit)
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return "", "", false, ctx.Err()
	}
	doc, err := html.Parse(utf8Reader(body, contentType))
	if err != nil {
		return "", "", false, err
	}
	title = pageTitle(doc)
	dropDataImages(doc)
	md, err := c.conv.ConvertNode(doc, converter.WithContext(ctx), converter.WithDomain(page.String()))
	if err != nil {
		return "", "", false, err
	}
	return title, string(bytes.TrimSpace(md)), cut, nil
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
