package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
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
)

// findScript prints the NUL-separated paths under the current directory that filter keeps,
// pruned, sorted bytewise, at most max+1 of them (max 0: all).
func findScript(prune []string, filter string, max int) string {
	var names []string
	for _, n := range prune {
		names = append(names, "-name "+remote.ShellQuote(n))
	}
	prunes := ""
	if len(names) > 0 {
		prunes = `\( ` + strings.Join(names, " -o ") + ` \) -prune -o `
	}
	head := ""
	if max > 0 {
		head = fmt.Sprintf(" | head -z -n %d", max+1)
	}
	return fmt.Sprintf("find . -mindepth 1 %s%s -print0 2>/dev/null | sort -z%s", prunes, filter, head)
}

// search runs a search script after the preamble resolved dir in the sandbox (so a symlink
// cannot take the search out of the workspace) and cd'd into it; body's output follows the
// verdict ("ok dir", or "ok file" and cd'd into the file's directory when files is true).
func (b *box) search(ctx context.Context, op, dir string, files bool, body string) ([]string, []byte, bool, error) {
	rel, err := remote.CleanRel(dir)
	if err != nil {
		return nil, nil, false, err
	}
	nonce := remote.NewNonce()
	file := `ma_say notdir; exit 0`
	if files {
		file = `ma_kind=file; ma_name=$(basename -- "$ma_p"); cd -- "$(dirname -- "$ma_p")" || { ma_say notdir; exit 0; }`
	}
	script := b.preamble(nonce, rel) + `[ -e "$ma_p" ] || { ma_say notexist; exit 0; }
export LC_ALL=C
ma_kind=dir
if [ -d "$ma_p" ]; then cd -- "$ma_p" || { ma_say notdir; exit 0; }
elif [ -f "$ma_p" ]; then ` + file + `
else ma_say notdir; exit 0; fi
ma_say ok "$ma_kind"
` + body
	code, out, err := b.run(ctx, script, false, searchTimeout, searchMaxOutput+len(nonce)+64)
	var se *remote.StatusError
	if errors.As(err, &se) && se.Status == http.StatusRequestTimeout {
		return nil, nil, false, fmt.Errorf("%s %q: the search took longer than %s", op, dir, searchTimeout)
	}
	if err != nil {
		return nil, nil, false, err
	}
	words, rest, err := remote.SplitVerdict(nonce, out)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s %q in sandbox %s (exit %d): %w", op, dir, b.id, code, err)
	}
	if words[0] != "ok" {
		return nil, nil, false, pathCheck.Error(words, op, dir)
	}
	truncated := len(rest) > searchMaxOutput
	if truncated {
		rest = rest[:searchMaxOutput]
	}
	if code != 0 && !truncated {
		return nil, nil, false, fmt.Errorf("%s %q: the search command failed (exit %d): %s", op, dir, code, strings.TrimSpace(string(rest[:min(len(rest), 500)])))
	}
	return words[1:], rest, truncated, nil
}

// FindFiles implements sandbox.FileSearcher with one command.
func (b *box) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	if !doublestar.ValidatePattern(req.Pattern) {
		return sandbox.FindResult{}, fmt.Errorf("find: invalid pattern %q", req.Pattern)
	}
	_, out, truncated, err := b.search(ctx, "find in", req.Dir, false, findScript(req.Prune, "! -type d", req.MaxListed))
	if err != nil {
		return sandbox.FindResult{}, err
	}
	// findScript sorts before it cuts, so the entries MatchListing keeps are the first in
	// path order.
	return remote.MatchListing(req, out, truncated), nil
}

// GrepFiles implements sandbox.FileSearcher with one command: the candidate list, then the
// candidates themselves as a tar stream, both base64 (the toolbox answers text).
func (b *box) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep: %w", err)
	}
	filter := "-type f"
	if req.MaxFileSize > 0 {
		filter += fmt.Sprintf(" -size -%dc", req.MaxFileSize+1)
	}
	// A Dir naming one file searches that file.
	body := fmt.Sprintf("ma_t=$(mktemp) || exit 1\ntrap 'rm -f \"$ma_t\"' EXIT\n"+
		"if [ \"$ma_kind\" = file ]; then printf '%%s\\0' \"$ma_name\" > \"$ma_t\"; else ( %s ) > \"$ma_t\" || exit $?; fi\n"+
		"base64 -w0 < \"$ma_t\"; echo\n"+
		"head -z -n %d \"$ma_t\" | tar --null --no-recursion -T - -cf - 2>/dev/null | base64 -w0",
		findScript(req.Prune, filter, req.MaxFiles), max(req.MaxFiles, 1<<30))
	kind, output, truncated, err := b.search(ctx, "grep in", req.Dir, true, body)
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	single := len(kind) > 0 && kind[0] == "file"
	head, rest, _ := bytes.Cut(output, []byte("\n"))
	listed, err := base64.StdEncoding.DecodeString(string(head))
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep in %q: the file list did not decode: %w", req.Dir, err)
	}
	var out sandbox.GrepResult
	files := remote.ListedNames(listed, false)
	slices.Sort(files)
	if req.MaxFiles > 0 && len(files) > req.MaxFiles {
		files, out.Cut = files[:req.MaxFiles], true
	}
	out.Files = len(files)
	contents := untar(rest[:len(rest)/4*4], truncated)
	if truncated {
		out.Cut = true
	}
	for _, f := range files {
		data, ok := contents[f]
		if !ok || (req.MaxFileSize > 0 && int64(len(data)) > req.MaxFileSize) {
			out.Skipped++
			continue
		}
		shown := remote.JoinDir(req.Dir, f)
		if single {
			shown = req.Dir
		}
		remote.GrepFile(&out, re, req.MaxMatches, shown, data)
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
			// io.EOF, or a stream cut at the output cap: what was read whole is kept.
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
