package e2b

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// The search tools' calls are one command each (FileSearcher): envd's ListDir cannot prune
// (.git, the tools' state) nor read contents, so grep would cost a read per file. The
// sandbox only lists and sends bytes; matching stays here, with Go's doublestar and RE2,
// exactly as on every other provider.

// searchTimeout bounds one listing or content search.
const searchTimeout = 5 * time.Minute

// maxListing caps a listing's output (NUL-separated names) held in memory.
const maxListing = 64 << 20

// dirScript is the prologue of the search scripts: it resolves $1 (the directory, or for
// grep a file) in the workspace like execScript does, leaving it in r.
const dirScript = `ws=$(pwd -P) || exit 95
r=.
if [ -n "$1" ]; then
	r=$(realpath -m -- "$1" 2>/dev/null) || { echo "ma-e2b:outside" >&2; exit 95; }
	case $r in "$ws"|"$ws"/*) ;; *) echo "ma-e2b:outside" >&2; exit 95 ;; esac
	[ -e "$r" ] || { echo "ma-e2b:missing" >&2; exit 95; }
fi
`

// findScript lists ($2 > 0: at most $2) entries under $1 that are not directories, NUL
// separated, not descending into the names from $3 on.
const findScript = dirScript + `[ -d "$r" ] && cd -- "$r" || { echo "ma-e2b:notdir" >&2; exit 95; }
max=$2; shift 2
e=(); for n in "$@"; do e+=(-o -name "$n"); done
if [ "$max" -gt 0 ]; then
	find . \( -false "${e[@]}" \) -prune -o ! -type d -print0 2>/dev/null | head -z -n "$max"
else
	find . \( -false "${e[@]}" \) -prune -o ! -type d -print0 2>/dev/null
fi`

// grepScript sends the regular files under $1 of at most $2 bytes ($2 <= 0: any size), in
// byte order, at most $3 of them ($3 <= 0: all), not descending into the names from $4 on:
// first "C:<listed>:d" (or "C:1:f" when $1 is a file) and a NUL, then a tar of the files. A
// file that cannot be read is left out of the tar (counted as skipped).
const grepScript = dirScript + `maxsize=$2 maxfiles=$3; shift 3
if [ -f "$r" ] && [ "$r" != . ]; then
	printf 'C:1:f\0'
	s=$(stat -L -c %s -- "$r" 2>/dev/null) || exit 0
	[ "$maxsize" -gt 0 ] && [ "$s" -gt "$maxsize" ] && exit 0
	cd -- "$(dirname -- "$r")" && exec tar -c -h --no-recursion -f - -- "$(basename -- "$r")" 2>/dev/null
	exit 0
fi
[ -d "$r" ] && cd -- "$r" || { echo "ma-e2b:notdir" >&2; exit 95; }
e=(); for n in "$@"; do e+=(-o -name "$n"); done
sz=(); [ "$maxsize" -gt 0 ] && sz=(-size "-$((maxsize + 1))c")
if [ "$maxfiles" -gt 0 ]; then
	mapfile -d '' files < <(find . \( -false "${e[@]}" \) -prune -o -type f "${sz[@]}" -print0 2>/dev/null | LC_ALL=C sort -z | head -z -n "$((maxfiles + 1))")
else
	mapfile -d '' files < <(find . \( -false "${e[@]}" \) -prune -o -type f "${sz[@]}" -print0 2>/dev/null | LC_ALL=C sort -z)
fi
printf 'C:%d:d\0' "${#files[@]}"
n=${#files[@]}
[ "$maxfiles" -gt 0 ] && [ "$n" -gt "$maxfiles" ] && n=$maxfiles
[ "$n" -gt 0 ] || exit 0
printf '%s\0' "${files[@]:0:n}" | tar -c -h --null --no-recursion -T - -f - 2>/dev/null
exit 0`

// FindFiles implements sandbox.FileSearcher with one command.
func (b *box) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	if !doublestar.ValidatePattern(req.Pattern) {
		return sandbox.FindResult{}, fmt.Errorf("find: invalid pattern %q", req.Pattern)
	}
	dir, err := confine("find in", req.Dir)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	limit := 0
	if req.MaxListed > 0 {
		limit = req.MaxListed + 1
	}
	if err := b.keepAlive(ctx, searchTimeout); err != nil {
		return sandbox.FindResult{}, err
	}
	args := append([]string{"-c", findScript, "ma-find", dir, strconv.Itoa(limit)}, req.Prune...)
	r, err := b.start(ctx, "find", args, searchTimeout, maxListing, nil)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	if err := b.searchStatus("find in", req.Dir, r); err != nil {
		return sandbox.FindResult{}, err
	}
	return remote.MatchListing(req, r.stdout, r.truncated), nil
}

// searchStatus turns a search script's refusal or failure into an error.
func (b *box) searchStatus(op, dir string, r run) error {
	switch {
	case r.timedOut:
		return fmt.Errorf("%s %q: took longer than %s", op, dir, searchTimeout)
	case r.exitCode == scriptFailure:
		if err := scriptRefusal(op, dir, r.stderr); err != nil {
			return err
		}
		fallthrough
	case r.exitCode != 0:
		return fmt.Errorf("%s %q: %s (status %d)", op, dir, strings.TrimSpace(string(r.stderr)), r.exitCode)
	}
	return nil
}

// GrepFiles implements sandbox.FileSearcher with one command: the sandbox sends the files as
// a tar stream, searched here as it arrives (one file in memory at a time).
func (b *box) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep: %w", err)
	}
	dir, err := confine("grep in", req.Dir)
	if err != nil {
		return sandbox.GrepResult{}, err
	}
	maxSize := req.MaxFileSize
	if maxSize <= 0 || maxSize > MaxFileSize {
		maxSize = MaxFileSize
	}
	if err := b.keepAlive(ctx, searchTimeout); err != nil {
		return sandbox.GrepResult{}, err
	}
	pr, pw := io.Pipe()
	type parsed struct {
		res sandbox.GrepResult
		err error
	}
	done := make(chan parsed, 1)
	go func() {
		res, err := grepStream(pr, req, re, maxSize)
		// Drain what is left so the stream's reader is never blocked on the pipe.
		_, _ = io.Copy(io.Discard, pr)
		done <- parsed{res, err}
	}()
	args := append([]string{"-c", grepScript, "ma-grep", dir, strconv.FormatInt(maxSize, 10), strconv.Itoa(req.MaxFiles)}, req.Prune...)
	r, runErr := b.start(ctx, "grep", args, searchTimeout, 64<<10, func(data []byte) error {
		_, err := pw.Write(data)
		return err
	})
	_ = pw.Close()
	p := <-done
	if runErr != nil {
		return sandbox.GrepResult{}, runErr
	}
	if err := b.searchStatus("grep in", req.Dir, r); err != nil {
		return sandbox.GrepResult{}, err
	}
	if p.err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep in %q: %w", req.Dir, p.err)
	}
	return p.res, nil
}

// grepStream reads grepScript's output and searches each file in it.
func grepStream(rd io.Reader, req sandbox.GrepRequest, re *regexp.Regexp, maxSize int64) (sandbox.GrepResult, error) {
	var res sandbox.GrepResult
	br := bufio.NewReader(rd)
	head, err := br.ReadString(0)
	if err != nil {
		if errors.Is(err, io.EOF) && head == "" {
			return res, nil // the script refused before its header; its status says why
		}
		return res, fmt.Errorf("read the listing: %w", err)
	}
	fields := strings.Split(strings.TrimSuffix(head, "\x00"), ":")
	if len(fields) != 3 || fields[0] != "C" {
		return res, fmt.Errorf("unexpected listing header %q", head)
	}
	listed, err := strconv.Atoi(fields[1])
	if err != nil {
		return res, fmt.Errorf("unexpected listing header %q", head)
	}
	single := fields[2] == "f"
	res.Files = listed
	if req.MaxFiles > 0 && listed > req.MaxFiles {
		res.Files, res.Cut = req.MaxFiles, true
	}
	searched := 0
	tr := tar.NewReader(br)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read the files: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size > maxSize {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxSize+1))
		if err != nil {
			return res, fmt.Errorf("read the files: %w", err)
		}
		searched++
		name := req.Dir
		if !single {
			name = remote.JoinDir(req.Dir, strings.TrimPrefix(hdr.Name, "./"))
		}
		remote.GrepFile(&res, re, req.MaxMatches, name, data)
	}
	// Files listed but not in the tar could not be read (or were too large, for one file).
	res.Skipped += max(res.Files-searched, 0)
	return res, nil
}
