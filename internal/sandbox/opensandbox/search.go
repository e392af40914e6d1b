package opensandbox

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// execd's GET /files/search is not used for FindFiles: it matches the pattern against each
// file's base name only (not the path relative to the directory), descends into every
// directory (no pruning of .git or the tools' state) and answers one unbounded array. One
// `find` does what the tools expect in one round trip, and grep reads every file it lists in
// the same command, so neither costs a round trip per file.

// searchTimeout bounds a listing or a content search.
const searchTimeout = 2 * time.Minute

// maxListing bounds the output of a listing (NUL-separated paths).
const maxListing = 32 << 20

// prunes renders find's pruning of names (empty: none).
func prunes(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var parts []string
	for _, n := range names {
		parts = append(parts, "-name "+remote.ShellQuote(n))
	}
	return `\( ` + strings.Join(parts, " -o ") + ` \) -prune -o `
}

// FindFiles lists the files under req.Dir with one command and matches them here.
func (b *box) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	rel, err := remote.CleanRel(req.Dir)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	if err := b.touch(ctx); err != nil {
		return sandbox.FindResult{}, err
	}
	limit := ""
	if req.MaxListed > 0 {
		limit = " | head -z -n " + strconv.Itoa(req.MaxListed+1)
	}
	nonce := remote.NewNonce()
	script := b.resolve(nonce, rel) + remote.DirCheck + `printf '%s ok\n' ` + nonce + `
find . ` + prunes(req.Prune) + `! -type d -print0 2>/dev/null` + limit
	res, err := b.run(ctx, script, searchTimeout, maxListing)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	if res.TimedOut {
		return sandbox.FindResult{}, fmt.Errorf("listing the files under %q took longer than %s", req.Dir, searchTimeout)
	}
	words, rest, err := remote.SplitVerdict(nonce, res.Output)
	if err != nil {
		return sandbox.FindResult{}, fmt.Errorf("list %q in opensandbox sandbox %s: %w", req.Dir, b.id, err)
	}
	if words[0] != "ok" {
		return sandbox.FindResult{}, pathCheck.Error(words, "list", req.Dir)
	}
	return remote.MatchListing(req, rest, res.Truncated), nil
}

// GrepFiles lists the files under req.Dir (or takes the one file it names) and streams them
// back in the same command as one tar archive, base64-encoded in lines (the command's output
// is text), searched here as they arrive: memory holds one file at a time, and the sandbox
// starts three processes however many files there are.
func (b *box) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep pattern: %w", err)
	}
	rel, err := remote.CleanRel(req.Dir)
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	if err := b.touch(ctx); err != nil {
		return sandbox.GrepResult{}, err
	}
	size, limit := "", ""
	if req.MaxFileSize > 0 {
		size = fmt.Sprintf("-size -%dk ", req.MaxFileSize>>10+1)
	}
	if req.MaxFiles > 0 {
		limit = " | head -z -n " + strconv.Itoa(req.MaxFiles+1)
	}
	nonce := remote.NewNonce()
	script := b.resolve(nonce, rel) + `[ -e "$ma_p" ] || { ma_say notexist; exit 0; }
if [ -d "$ma_p" ]; then
	cd -- "$ma_p" || { ma_say notdir; exit 0; }
	printf '%s ok dir\n' ` + nonce + `
	find . ` + prunes(req.Prune) + `-type f ` + size + `-print0 2>/dev/null | LC_ALL=C sort -z` + limit + ` | tar --null --no-recursion -T - -cf - 2>/dev/null | base64
elif [ -f "$ma_p" ]; then
	printf '%s ok file\n' ` + nonce + `
	cd -- "$(dirname -- "$ma_p")" && tar --no-recursion -cf - -- "$(basename -- "$ma_p")" 2>/dev/null | base64
else
	ma_say notfile; exit 0
fi`
	pr, pw := io.Pipe()
	type outcome struct {
		res sandbox.GrepResult
		err error
	}
	done := make(chan outcome, 1)
	single := false
	go func() {
		res, err := scanArchive(pr, nonce, re, req, &single)
		_, _ = io.Copy(io.Discard, pr) // let the command finish whatever was cut
		done <- outcome{res, err}
	}()
	exec, err := b.stream(ctx, script, searchTimeout, func(p []byte) { _, _ = pw.Write(p) }, 8<<20)
	pw.Close()
	got := <-done
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	if exec.TimedOut {
		return sandbox.GrepResult{}, fmt.Errorf("searching the files under %q took longer than %s", req.Dir, searchTimeout)
	}
	if got.err != nil {
		return sandbox.GrepResult{}, got.err
	}
	if single {
		for i := range got.res.Matches {
			got.res.Matches[i].Path = req.Dir
		}
	}
	return got.res, nil
}

// scanArchive reads the verdict line and then the base64 tar archive of a grep command.
func scanArchive(r io.Reader, nonce string, re *regexp.Regexp, req sandbox.GrepRequest, single *bool) (sandbox.GrepResult, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := readBounded(br, '\n', 4<<10)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep %q: the path check gave no verdict", req.Dir)
	}
	words := strings.Fields(string(first))
	if len(words) < 2 || words[0] != nonce {
		return sandbox.GrepResult{}, fmt.Errorf("grep %q: the path check gave no verdict: %q", req.Dir, remote.CutText(first, 200))
	}
	if words[1] != "ok" {
		return sandbox.GrepResult{}, pathCheck.Error(words[1:], "grep", req.Dir)
	}
	*single = len(words) > 2 && words[2] == "file"
	limit := int64(MaxFileSize)
	if req.MaxFileSize > 0 {
		limit = min(req.MaxFileSize, limit)
	}
	var res sandbox.GrepResult
	// The decoder skips the newlines base64 wraps its output with.
	tr := tar.NewReader(base64.NewDecoder(base64.StdEncoding, br))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("grep %q: the file stream broke off: %w", req.Dir, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if req.MaxFiles > 0 && res.Files >= req.MaxFiles {
			res.Cut = true
			return res, nil
		}
		res.Files++
		file := remote.JoinDir(req.Dir, strings.TrimPrefix(h.Name, "./"))
		if h.Size > limit {
			res.Skipped++
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return res, fmt.Errorf("grep %q: the file stream broke off: %w", req.Dir, err)
		}
		remote.GrepFile(&res, re, req.MaxMatches, file, data)
	}
}

// readBounded reads up to delim (dropped), at most max bytes.
func readBounded(br *bufio.Reader, delim byte, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice(delim)
		buf = append(buf, chunk...)
		if len(buf) > max {
			return nil, fmt.Errorf("a record is longer than %d bytes", max)
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}
