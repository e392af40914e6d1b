package sandbox

import (
	"bytes"
	"context"
	"strings"
)

// FileSearcher is an optional capability of a Sandbox: listing and searching a directory
// tree in one call, so a remote provider does not pay one round trip per file when the glob
// and grep tools run. Tools find it by type assertion and otherwise fall back to Exec (find)
// and ReadFile, with the same results; the tools suite checks both ways.
type FileSearcher interface {
	// FindFiles lists everything under req.Dir that is not a directory and whose path
	// relative to req.Dir matches req.Pattern.
	FindFiles(ctx context.Context, req FindRequest) (FindResult, error)
	// GrepFiles searches the regular text files under req.Dir (or the one file req.Dir
	// names) for lines matching req.Pattern.
	GrepFiles(ctx context.Context, req GrepRequest) (GrepResult, error)
}

// FindRequest is one listing. Paths are confined to the workspace like every other path:
// a Dir outside it fails with ErrOutsideWorkspace, a missing one with ErrNotExist.
type FindRequest struct {
	// Dir is the directory searched, relative to the workspace ("" is its root).
	Dir string
	// Pattern is a doublestar pattern (github.com/bmatcuk/doublestar) matched against the
	// path relative to Dir.
	Pattern string
	// Prune names entries skipped with everything under them (the tools' state, .git).
	Prune []string
	// MaxListed caps the entries considered; beyond it the result is Cut.
	MaxListed int
}

// FindResult lists the matches, each joined onto the request's Dir (so it can be passed to
// ReadFile as is), sorted.
type FindResult struct {
	Paths []string
	// Cut: the listing hit MaxListed, some entries were not considered.
	Cut bool
}

// GrepRequest is one content search.
type GrepRequest struct {
	// Dir is the directory searched, or one file, relative to the workspace.
	Dir string
	// Pattern is a Go RE2 regular expression matched against each line (SplitLines).
	Pattern string
	Prune   []string
	// MaxFileSize skips larger files without reading them (they are not counted).
	MaxFileSize int64
	// MaxFiles caps the files searched, in path order; beyond it the result is Cut.
	MaxFiles int
	// MaxMatches caps the matches returned; Total still counts them all.
	MaxMatches int
}

// GrepResult is what a content search found.
type GrepResult struct {
	// Matches are in path order, then line order.
	Matches []GrepMatch
	// Total counts every matching line, also those beyond MaxMatches.
	Total int
	// Files is how many files were listed for searching; Skipped how many of them were
	// binary (IsBinary) or unreadable.
	Files, Skipped int
	Cut            bool
}

// GrepMatch is one matching line.
type GrepMatch struct {
	// Path is the file, joined onto the request's Dir (Dir itself when it names a file).
	Path string
	// Line is 1-based.
	Line int
	// Text is the whole line, without its newline.
	Text string
}

// BinarySniffLen is how much of a file is checked for NUL bytes to call it binary (what git
// does).
const BinarySniffLen = 8000

// IsBinary reports whether data looks binary: what read refuses and grep skips, on every
// provider alike.
func IsBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), BinarySniffLen)], 0) >= 0
}

// SplitLines splits text into lines; a final newline does not start another line. Tools
// and FileSearcher implementations number lines by it.
func SplitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}
