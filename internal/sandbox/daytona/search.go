package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// The toolbox has a glob (GET /files/search) and a grep (GET /files/find), but neither has
// the tools' semantics: search matches a base-name pattern, not a doublestar pattern on the
// relative path, and knows no pruning or cap; find matches its own pattern syntax, not RE2, and
// neither skips binary or large files nor caps anything. So FileSearcher runs one command
// instead: find lists the tree with the tools' pruning (GrepFiles also ships the candidates'
// contents as one base64 tar stream), and the matching happens here, exactly as in
// internal/sandbox/workspace. One round trip, whatever the number of files.

const (
	searchTimeout = 60 * time.Second
	// searchMaxOutput bounds what one search ships; a grep whose candidates are larger is
	// Cut (the files not shipped count as skipped).
	searchMaxOutput = 48 << 20
	searchNoDir     = 3
	searchNotDir    = 4
)

// findScript prints the NUL-separated paths under dir (relative to the workspace root) that
// filter keeps, pruned, sorted bytewise, at most max+1 of them (max 0: all).
func findScript(dir string, prune []string, filter string, max int) string {
	var names []string
	for _, n := range prune {
		names = append(names, "-name "+shellQuote(n))
	}
	prunes := ""
	if len(names) > 0 {
		prunes = `\( ` + strings.Join(names, " -o ") + ` \) -prune -o `
	}
	head := ""
	if max > 0 {
		head = fmt.Sprintf(" | head -z -n %d", max+1)
	}
	return fmt.Sprintf("export LC_ALL=C\nd=%s\n"+
		"if [ ! -e \"$d\" ]; then exit %d; fi\nif [ ! -d \"$d\" ]; then exit %d; fi\n"+
		"find \"$d\" -mindepth 1 %s%s -print0 2>/dev/null | sort -z%s",
		shellQuote(dir), searchNoDir, searchNotDir, prunes, filter, head)
}

func (b *box) searchDir(dir string) (abs, rel string, err error) {
	abs, err = b.resolve(dir)
	if err != nil {
		return "", "", err
	}
	rel = strings.TrimPrefix(strings.TrimPrefix(abs, b.work), "/")
	if rel == "" {
		rel = "."
	}
	return abs, rel, nil
}

func searchErr(op, dir string, code int, out []byte) error {
	switch code {
	case searchNoDir:
		return fmt.Errorf("%s %q: %w", op, dir, sandbox.ErrNotExist)
	case searchNotDir:
		return fmt.Errorf("%s %q: not a directory", op, dir)
	}
	return fmt.Errorf("%s %q: the search command failed (exit %d): %s", op, dir, code, strings.TrimSpace(string(out[:min(len(out), 500)])))
}

// relNames splits find's output into paths relative to rel.
func relNames(out []byte, rel string) []string {
	var names []string
	for name := range strings.SplitSeq(string(out), "\x00") {
		if name == "" {
			continue
		}
		name = path.Clean(name)
		if rel != "." {
			name = strings.TrimPrefix(name, rel+"/")
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// FindFiles implements sandbox.FileSearcher with one command.
func (b *box) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	if !doublestar.ValidatePattern(req.Pattern) {
		return sandbox.FindResult{}, fmt.Errorf("find: invalid pattern %q", req.Pattern)
	}
	_, rel, err := b.searchDir(req.Dir)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	res, err := b.Exec(ctx, sandbox.ExecRequest{Command: findScript(rel, req.Prune, "! -type d", req.MaxListed), Timeout: searchTimeout, MaxOutput: searchMaxOutput})
	if err != nil {
		return sandbox.FindResult{}, err
	}
	if res.TimedOut {
		return sandbox.FindResult{}, fmt.Errorf("find in %q: listing took longer than %s", req.Dir, searchTimeout)
	}
	if res.ExitCode != 0 {
		return sandbox.FindResult{}, searchErr("find in", req.Dir, res.ExitCode, res.Output)
	}
	out := res.Output
	var found sandbox.FindResult
	if res.Truncated {
		found.Cut = true
		out = out[:max(0, bytes.LastIndexByte(out, 0))]
	}
	names := relNames(out, rel)
	if req.MaxListed > 0 && len(names) > req.MaxListed {
		names, found.Cut = names[:req.MaxListed], true
	}
	for _, name := range names {
		if ok, _ := doublestar.Match(req.Pattern, name); ok {
			found.Paths = append(found.Paths, joinDir(req.Dir, name))
		}
	}
	return found, nil
}

func joinDir(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return path.Join(dir, name)
}

// GrepFiles implements sandbox.FileSearcher with one command: the candidate list, then the
// candidates themselves as a tar stream, both base64 (the toolbox answers text).
func (b *box) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep: %w", err)
	}
	_, rel, err := b.searchDir(req.Dir)
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	filter := "-type f"
	if req.MaxFileSize > 0 {
		filter += fmt.Sprintf(" -size -%dc", req.MaxFileSize+1)
	}
	list := findScript(rel, req.Prune, filter, req.MaxFiles)
	// A Dir naming one file searches that file.
	script := fmt.Sprintf("t=$(mktemp) || exit 1\ntrap 'rm -f \"$t\"' EXIT\n"+
		"if [ -f %[1]s ] && [ %[1]s != . ]; then printf '%%s\\0' %[1]s > \"$t\"; else ( %[2]s ) > \"$t\" || exit $?; fi\n"+
		"base64 -w0 < \"$t\"; echo\n"+
		"head -z -n %[3]d \"$t\" | tar --null --no-recursion -T - -cf - 2>/dev/null | base64 -w0",
		shellQuote(rel), list, max(req.MaxFiles, 1<<30))
	res, err := b.Exec(ctx, sandbox.ExecRequest{Command: script, Timeout: searchTimeout, MaxOutput: searchMaxOutput})
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	if res.TimedOut {
		return sandbox.GrepResult{}, fmt.Errorf("grep in %q: searching took longer than %s", req.Dir, searchTimeout)
	}
	if res.ExitCode != 0 && !res.Truncated {
		return sandbox.GrepResult{}, searchErr("grep in", req.Dir, res.ExitCode, res.Output)
	}
	head, body, _ := bytes.Cut(res.Output, []byte("\n"))
	listed, err := base64.StdEncoding.DecodeString(string(head))
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep in %q: the file list did not decode: %w", req.Dir, err)
	}
	var out sandbox.GrepResult
	single := !bytes.ContainsRune(listed[:max(0, len(listed)-1)], 0) && len(listed) > 0 && path.Clean(strings.TrimSuffix(string(listed), "\x00")) == path.Clean(rel) && rel != "."
	var files []string
	if single {
		files = []string{path.Clean(rel)}
	} else {
		files = relNames(listed, rel)
	}
	if req.MaxFiles > 0 && len(files) > req.MaxFiles {
		files, out.Cut = files[:req.MaxFiles], true
	}
	out.Files = len(files)
	contents := untar(body[:len(body)/4*4], res.Truncated)
	if res.Truncated {
		out.Cut = true
	}
	for _, f := range files {
		key := f
		if !single && rel != "." {
			key = path.Join(rel, f)
		}
		data, ok := contents[key]
		if !ok || (req.MaxFileSize > 0 && int64(len(data)) > req.MaxFileSize) || sandbox.IsBinary(data) {
			out.Skipped++
			continue
		}
		shown := f
		if single {
			shown = req.Dir
		} else {
			shown = joinDir(req.Dir, f)
		}
		for i, line := range sandbox.SplitLines(string(data)) {
			if !re.MatchString(line) {
				continue
			}
			out.Total++
			if req.MaxMatches <= 0 || len(out.Matches) < req.MaxMatches {
				out.Matches = append(out.Matches, sandbox.GrepMatch{Path: shown, Line: i + 1, Text: line})
			}
		}
	}
	return out, nil
}

// untar reads the regular files of a base64 tar stream (cut short when truncated: what was
// read whole is kept), keyed by their cleaned names.
func untar(b64 []byte, truncated bool) map[string][]byte {
	data, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil && !truncated {
		return nil
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = strconv.ErrRange // a cut stream ends the listing
			}
			return files
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			return files
		}
		files[path.Clean(h.Name)] = content
	}
}
