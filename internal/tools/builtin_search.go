package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits of glob and grep.
const (
	maxGlobResults = 1000
	maxGrepMatches = 1000
	maxGrepFiles   = 20_000
	// maxGrepFileSize is what find's -size -2048k keeps (sizes round up to KiB): larger
	// files are not searched.
	maxGrepFileSize = 2047 << 10
	maxGrepLineLen  = 500
	listTimeout     = 60 * time.Second
	listMaxOutput   = 16 << 20
	// listMaxEntries caps a FileSearcher's listing like listMaxOutput caps find's.
	listMaxEntries = 500_000
)

// pruned are the names glob and grep never descend into or list.
var pruned = []string{StateDir, ".git"}

// fileList is what one `find` over a directory returned.
type fileList struct {
	paths []string // relative to the searched directory, sorted
	cut   bool     // the listing hit listMaxOutput
}

// listFiles lists the files under dir (relative to the workspace; "" is its root) with one
// `find`. The state directory and .git are skipped. It runs with dir as the working directory,
// so the provider confines dir like any other path. NUL-separated output keeps names with
// newlines intact; find's complaints (unreadable directories) are dropped.
func listFiles(ctx context.Context, sb sandbox.Sandbox, dir, filter string) (fileList, error) {
	cmd := `find . \( -name ` + shellQuote(StateDir) + ` -o -name .git \) -prune -o ` + filter + ` -print0 2>/dev/null`
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command: cmd, Dir: dir, Timeout: listTimeout, MaxOutput: listMaxOutput,
	})
	if err != nil {
		return fileList{}, err
	}
	if res.TimedOut {
		return fileList{}, fmt.Errorf("listing the files under %s took longer than %s", dirLabel(dir), listTimeout)
	}
	var list fileList
	out := string(res.Output)
	if res.Truncated {
		// The last name may be cut in the middle.
		list.cut = true
		if i := strings.LastIndexByte(out, 0); i >= 0 {
			out = out[:i]
		}
	}
	for name := range strings.SplitSeq(out, "\x00") {
		if name = strings.TrimPrefix(name, "./"); name != "" && name != "." {
			list.paths = append(list.paths, name)
		}
	}
	slices.Sort(list.paths)
	return list, nil
}

// inDir joins a path found under dir back onto dir, so results can be passed to read as is.
func inDir(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return path.Join(dir, name)
}

// dirLabel names a search directory in messages.
func dirLabel(dir string) string {
	if dir == "" || dir == "." {
		return "the workspace root"
	}
	return fmt.Sprintf("%q", dir)
}

type globInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// runGlob lists the files under path whose path relative to it matches a doublestar pattern.
func runGlob(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	var in globInput
	if err := decodeInput(wire.ToolNameGlob, raw, &in); err != nil {
		return errorf("%v", err)
	}
	pattern := strings.TrimPrefix(in.Pattern, "./")
	switch {
	case in.Pattern == "":
		return inputError(wire.ToolNameGlob, "pattern is required")
	case strings.HasPrefix(pattern, "/"):
		return inputError(wire.ToolNameGlob, "pattern %q must be relative to path (use path to choose the directory)", in.Pattern)
	case !doublestar.ValidatePattern(pattern):
		return inputError(wire.ToolNameGlob, "pattern %q is not a valid glob pattern", in.Pattern)
	}
	if fs, ok := sb.(sandbox.FileSearcher); ok {
		found, err := fs.FindFiles(ctx, sandbox.FindRequest{Dir: in.Path, Pattern: pattern, Prune: pruned, MaxListed: listMaxEntries})
		if err != nil {
			return sandboxError(wire.ToolNameGlob, in.Path, err)
		}
		return Result{Text: globText(in, found.Paths, found.Cut)}
	}
	list, err := listFiles(ctx, sb, in.Path, `! -type d`)
	if err != nil {
		return sandboxError(wire.ToolNameGlob, in.Path, err)
	}
	var matches []string
	for _, name := range list.paths {
		if ok, _ := doublestar.Match(pattern, name); ok {
			matches = append(matches, inDir(in.Path, name))
		}
	}
	return Result{Text: globText(in, matches, list.cut)}
}

func globText(in globInput, matches []string, cut bool) string {
	var notes []string
	if cut {
		notes = append(notes, "[the directory has too many files to list them all; some were not considered — narrow path]")
	}
	if len(matches) == 0 {
		return strings.Join(append([]string{fmt.Sprintf("No files match %q under %s.", in.Pattern, dirLabel(in.Path))}, notes...), "\n")
	}
	if len(matches) > maxGlobResults {
		notes = append(notes, fmt.Sprintf("[showing the first %d of %d matches; narrow the pattern or path]", maxGlobResults, len(matches)))
		matches = matches[:maxGlobResults]
	}
	return strings.Join(append(matches, notes...), "\n")
}

type grepInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// grepSearch accumulates matches over files.
type grepSearch struct {
	re      *regexp.Regexp
	lines   []string
	total   int
	skipped int // binary or unreadable files
}

// runGrep searches the text files under path (or the one file path names) for a Go RE2
// regular expression and prints the matching lines as file:line:text.
func runGrep(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	var in grepInput
	if err := decodeInput(wire.ToolNameGrep, raw, &in); err != nil {
		return errorf("%v", err)
	}
	if in.Pattern == "" {
		return inputError(wire.ToolNameGrep, "pattern is required")
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return inputError(wire.ToolNameGrep, "pattern is not a valid regular expression (Go RE2 syntax): %v", err)
	}
	if fs, ok := sb.(sandbox.FileSearcher); ok {
		return grepWith(ctx, fs, in)
	}
	s := &grepSearch{re: re}
	files, cut, res := grepFiles(ctx, sb, in.Path)
	if res != nil {
		return *res
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return sandboxError(wire.ToolNameGrep, "", err)
		}
		data, err := sb.ReadFile(ctx, f)
		if err != nil || len(data) > maxGrepFileSize || sandbox.IsBinary(data) {
			s.skipped++
			continue
		}
		s.scan(f, string(data))
	}
	return Result{Text: s.text(in, len(files), cut)}
}

// grepWith searches with the sandbox's FileSearcher: one call instead of one ReadFile per
// file, formatted exactly as the fallback's results.
func grepWith(ctx context.Context, fs sandbox.FileSearcher, in grepInput) Result {
	found, err := fs.GrepFiles(ctx, sandbox.GrepRequest{
		Dir: in.Path, Pattern: in.Pattern, Prune: pruned,
		MaxFileSize: maxGrepFileSize, MaxFiles: maxGrepFiles, MaxMatches: maxGrepMatches,
	})
	if err != nil {
		return sandboxError(wire.ToolNameGrep, in.Path, err)
	}
	s := &grepSearch{total: found.Total, skipped: found.Skipped}
	for _, m := range found.Matches {
		s.add(m.Path, m.Line, m.Text)
	}
	return Result{Text: s.text(in, found.Files, found.Cut)}
}

// grepFiles returns the files to search: those under path, or path itself when it names a
// file. A non-nil Result reports why there is nothing to search.
func grepFiles(ctx context.Context, sb sandbox.Sandbox, dir string) (files []string, cut bool, res *Result) {
	filter := fmt.Sprintf(`-type f -size -%dk`, maxGrepFileSize>>10+1)
	list, err := listFiles(ctx, sb, dir, filter)
	if err != nil {
		if fileErr := checkSingleFile(ctx, sb, dir, err); fileErr != nil {
			r := sandboxError(wire.ToolNameGrep, dir, fileErr)
			return nil, false, &r
		}
		return []string{dir}, false, nil
	}
	for _, name := range list.paths {
		files = append(files, inDir(dir, name))
	}
	if len(files) > maxGrepFiles {
		return files[:maxGrepFiles], true, nil
	}
	return files, list.cut, nil
}

// checkSingleFile decides whether a path that could not be listed as a directory is a file:
// nil if it is, otherwise the error to report.
func checkSingleFile(ctx context.Context, sb sandbox.Sandbox, p string, listErr error) error {
	if p == "" || errors.Is(listErr, sandbox.ErrOutsideWorkspace) || errors.Is(listErr, sandbox.ErrNotExist) ||
		errors.Is(listErr, sandbox.ErrGone) || ctx.Err() != nil {
		return listErr
	}
	if _, err := sb.ReadFile(ctx, p); err != nil {
		return listErr
	}
	return nil
}

func (s *grepSearch) scan(file, text string) {
	for i, line := range sandbox.SplitLines(text) {
		if !s.re.MatchString(line) {
			continue
		}
		s.total++
		if len(s.lines) < maxGrepMatches {
			s.add(file, i+1, line)
		}
	}
}

func (s *grepSearch) add(file string, line int, text string) {
	s.lines = append(s.lines, fmt.Sprintf("%s:%d:%s", file, line, shorten(text, maxGrepLineLen)))
}

func (s *grepSearch) text(in grepInput, files int, cut bool) string {
	var out []string
	if s.total == 0 {
		out = append(out, fmt.Sprintf("No matches for %q under %s (%d files searched).", in.Pattern, dirLabel(in.Path), files-s.skipped))
	} else {
		out = append(out, s.lines...)
	}
	if s.total > len(s.lines) {
		out = append(out, fmt.Sprintf("[showing the first %d of %d matching lines; narrow the pattern or path]", len(s.lines), s.total))
	}
	if cut {
		out = append(out, "[too many files under the path; some were not searched — narrow path]")
	}
	return strings.Join(out, "\n")
}

// shorten cuts a line longer than n runes and says so.
func shorten(line string, n int) string {
	if cut := firstRunes(line, n); len(cut) < len(line) {
		return cut + " […]"
	}
	return line
}
