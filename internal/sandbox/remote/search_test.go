package remote

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

func TestListedNames(t *testing.T) {
	tests := []struct {
		name      string
		listing   string
		truncated bool
		want      []string
	}{
		{"empty", "", false, nil},
		{"find's ./ prefix is dropped, the listing's order kept", "./b\x00./a/c\x00", false, []string{"b", "a/c"}},
		{"the directory itself and empty entries are left out", ".\x00\x00./x\x00", false, []string{"x"}},
		{"a name without the prefix (one file) is kept", "f.go\x00", false, []string{"f.go"}},
		{"a truncated listing loses its partial last name", "./a\x00./b\x00./par", true, []string{"a", "b"}},
		{"a truncated listing without one whole name is empty", "./partial-name", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ListedNames([]byte(tt.listing), tt.truncated))
		})
	}
}

func TestMatchListing(t *testing.T) {
	tests := []struct {
		name      string
		req       sandbox.FindRequest
		listing   string
		truncated bool
		want      sandbox.FindResult
	}{
		{
			name:    "doublestar on the relative path, sorted, joined onto Dir",
			req:     sandbox.FindRequest{Dir: "src", Pattern: "**/*.go"},
			listing: "./z.go\x00./a/b.go\x00./a/b.txt\x00",
			want:    sandbox.FindResult{Paths: []string{"src/a/b.go", "src/z.go"}},
		},
		{
			name:    "the root's matches are relative paths as listed",
			req:     sandbox.FindRequest{Dir: ".", Pattern: "*"},
			listing: "./b\x00./a\x00./d/e\x00",
			want:    sandbox.FindResult{Paths: []string{"a", "b"}},
		},
		{
			name:    "MaxListed keeps the first entries of the listing, then sorts them",
			req:     sandbox.FindRequest{Pattern: "*", MaxListed: 2},
			listing: "./c\x00./a\x00./b\x00",
			want:    sandbox.FindResult{Paths: []string{"a", "c"}, Cut: true},
		},
		{
			name:    "a listing of exactly MaxListed is not cut",
			req:     sandbox.FindRequest{Pattern: "*", MaxListed: 2},
			listing: "./c\x00./a\x00",
			want:    sandbox.FindResult{Paths: []string{"a", "c"}},
		},
		{
			name:      "a truncated listing is cut and loses its partial name",
			req:       sandbox.FindRequest{Pattern: "*"},
			listing:   "./a\x00./b\x00./c-partial",
			truncated: true,
			want:      sandbox.FindResult{Paths: []string{"a", "b"}, Cut: true},
		},
		{
			name:    "no match",
			req:     sandbox.FindRequest{Pattern: "*.rs"},
			listing: "./a.go\x00",
			want:    sandbox.FindResult{},
		},
		{
			name:    "an invalid pattern matches nothing",
			req:     sandbox.FindRequest{Pattern: "[a"},
			listing: "./[a\x00",
			want:    sandbox.FindResult{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, MatchListing(tt.req, []byte(tt.listing), tt.truncated))
		})
	}
}

func TestGrepFile(t *testing.T) {
	re := regexp.MustCompile(`fo+`)
	tests := []struct {
		name       string
		maxMatches int
		files      map[string]string // searched in order of names below
		names      []string
		want       sandbox.GrepResult
	}{
		{
			name:  "matching lines numbered from 1, a final newline starts no line",
			names: []string{"a.txt"},
			files: map[string]string{"a.txt": "foo\nbar\nxfoo\n"},
			want: sandbox.GrepResult{Total: 2, Matches: []sandbox.GrepMatch{
				{Path: "a.txt", Line: 1, Text: "foo"}, {Path: "a.txt", Line: 3, Text: "xfoo"}}},
		},
		{
			name:  "a binary file is skipped, not searched",
			names: []string{"bin", "t"},
			files: map[string]string{"bin": "foo\x00foo", "t": "fo"},
			want:  sandbox.GrepResult{Total: 1, Skipped: 1, Matches: []sandbox.GrepMatch{{Path: "t", Line: 1, Text: "fo"}}},
		},
		{
			name:       "maxMatches caps what is kept across files, Total counts all",
			maxMatches: 2,
			names:      []string{"a", "b"},
			files:      map[string]string{"a": "foo\nfoo", "b": "foo"},
			want: sandbox.GrepResult{Total: 3, Matches: []sandbox.GrepMatch{
				{Path: "a", Line: 1, Text: "foo"}, {Path: "a", Line: 2, Text: "foo"}}},
		},
		{
			name:  "an empty file has no lines",
			names: []string{"e"},
			files: map[string]string{"e": ""},
			want:  sandbox.GrepResult{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res sandbox.GrepResult
			for _, n := range tt.names {
				GrepFile(&res, re, tt.maxMatches, n, []byte(tt.files[n]))
			}
			require.Equal(t, tt.want, res)
		})
	}
}

func TestJoinDir(t *testing.T) {
	for _, tt := range []struct{ dir, name, want string }{
		{"", "a/b", "a/b"}, {".", "a", "a"}, {"src", "a", "src/a"}, {"src/", "a", "src/a"}, {"src/x", "../y", "src/y"},
	} {
		require.Equal(t, tt.want, JoinDir(tt.dir, tt.name), tt)
	}
}
