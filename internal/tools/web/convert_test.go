package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hugePage is 10 MiB of paragraphs: whole, it took the converter 1.3 GB.
var hugePage = bytes.Repeat([]byte("<p>x</p>"), 10<<20/8)

func TestCutHTML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		limit   int
		want    string
		wantCut bool
	}{
		{name: "short enough", body: "<p>abc</p>", limit: 10, want: "<p>abc</p>"},
		{name: "cut before the tag the limit falls in", body: "<p>abc</p><p>def</p>", limit: 13, want: "<p>abc</p>", wantCut: true},
		{name: "cut at a tag's start", body: "<p>abc</p><p>def</p>", limit: 10, want: "<p>abc", wantCut: true},
		{name: "no tag in the second half: cut at the limit", body: "<p>" + strings.Repeat("a", 20), limit: 10, want: "<p>aaaaaaa", wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cut := cutHTML([]byte(tt.body), tt.limit)
			require.Equal(t, tt.want, string(got))
			require.Equal(t, tt.wantCut, cut)
		})
	}
}

func TestHTMLLimit(t *testing.T) {
	t.Parallel()
	for maxChars, want := range map[int64]int{
		DefaultMaxContentTokens * charsPerToken: 800_000,
		40:                                      320,
		1 << 20:                                 maxConvertHTML,
		0:                                       htmlBytesPerChar,
	} {
		require.Equal(t, want, htmlLimit(maxChars), maxChars)
	}
}

// A huge page is cut before it is converted, and the result says so.
func TestFetchHugePageIsCut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(hugePage)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	f, _ := newTestFetcher(t, FetchConfig{})
	const tokens = 1000
	_, text, _ := document(t, f.Fetch(t.Context(), input("http://docs.example.test:"+port+"/"), Options{MaxContentTokens: tokens}))
	require.True(t, strings.HasPrefix(text, "x\n\nx\n\nx"), text[:20])
	require.Contains(t, text, fmt.Sprintf("[the page was cut: of its %d bytes of HTML, at most the first %d were converted to text]", len(hugePage), htmlLimit(tokens*charsPerToken)))
	require.Contains(t, text, "[content truncated: showing the first 4000 of ")
	require.NotContains(t, text, "the response was larger", "the body was read whole")
	require.Less(t, utf8.RuneCountInString(text), tokens*charsPerToken+300, "the budget and the notes")
}

// A conversion waits for a free slot, and gives up when its context ends.
func TestConvertWaitsForASlot(t *testing.T) {
	t.Parallel()
	c := newHTMLConverter()
	for range cap(c.sem) {
		c.sem <- struct{}{}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, _, err := c.toMarkdown(ctx, []byte("<p>x</p>"), "text/html", &url.URL{Scheme: "http", Host: "example.test"}, 100)
	require.ErrorIs(t, err, context.Canceled)

	<-c.sem
	_, text, cut, err := c.toMarkdown(t.Context(), []byte("<p>x</p>"), "text/html", &url.URL{Scheme: "http", Host: "example.test"}, 100)
	require.NoError(t, err)
	require.Equal(t, "x", text)
	require.False(t, cut)
}

// BenchmarkConvertLargePage converts a 10 MiB page as web_fetch does: cut to what the text
// budget needs (the default one, and the largest cap).
func BenchmarkConvertLargePage(b *testing.B) {
	page := &url.URL{Scheme: "http", Host: "example.test", Path: "/"}
	for _, bb := range []struct {
		name  string
		limit int
	}{
		{"default max_content_tokens", htmlLimit(DefaultMaxContentTokens * charsPerToken)},
		{"largest cap", maxConvertHTML},
	} {
		b.Run(bb.name, func(b *testing.B) {
			c := newHTMLConverter()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := c.toMarkdown(b.Context(), hugePage, "text/html", page, bb.limit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
