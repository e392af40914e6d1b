package remote

import (
	"bytes"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// The remote providers list and ship files with one command and match them here, with Go's
// doublestar and RE2, so that a search answers what it answers on every other provider.

// ListedNames splits find's NUL-separated listing (entries "./a/b") into names relative to
// the directory searched ("a/b"), in the listing's order. A truncated listing's last name may
// be cut in the middle, so it is dropped.
func ListedNames(listing []byte, truncated bool) []string {
	if truncated {
		listing = listing[:max(bytes.LastIndexByte(listing, 0), 0)]
	}
	var names []string
	for name := range strings.SplitSeq(string(listing), "\x00") {
		if name = strings.TrimPrefix(name, "./"); name != "" && name != "." {
			names = append(names, name)
		}
	}
	return names
}

// MatchListing is FindFiles' answer from a listing of the entries under req.Dir (truncated:
// the listing was cut at an output cap): at most req.MaxListed of the entries, in the
// listing's order, are sorted and matched against req.Pattern. The pattern is expected to be
// valid; an invalid one matches nothing.
func MatchListing(req sandbox.FindRequest, listing []byte, truncated bool) sandbox.FindResult {
	res := sandbox.FindResult{Cut: truncated}
	names := ListedNames(listing, truncated)
	if req.MaxListed > 0 && len(names) > req.MaxListed {
		names, res.Cut = names[:req.MaxListed], true
	}
	slices.Sort(names)
	for _, name := range names {
		if ok, _ := doublestar.Match(req.Pattern, name); ok {
			res.Paths = append(res.Paths, JoinDir(req.Dir, name))
		}
	}
	return res
}

// GrepFile searches one file's contents for GrepFiles, adding to res: a binary file
// (sandbox.IsBinary) is counted as skipped, else every line re matches counts towards Total
// and, up to maxMatches (0: no cap), is kept with name as its path.
func GrepFile(res *sandbox.GrepResult, re *regexp.Regexp, maxMatches int, name string, data []byte) {
	if sandbox.IsBinary(data) {
		res.Skipped++
		return
	}
	for i, line := range sandbox.SplitLines(string(data)) {
		if !re.MatchString(line) {
			continue
		}
		res.Total++
		if maxMatches <= 0 || len(res.Matches) < maxMatches {
			res.Matches = append(res.Matches, sandbox.GrepMatch{Path: name, Line: i + 1, Text: line})
		}
	}
}

// JoinDir joins a name found under dir onto dir ("" and "." are the workspace root), giving
// a path relative to the workspace.
func JoinDir(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return path.Join(dir, name)
}
