package remote

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// A remote provider's file API reaches any path of the sandbox, so the providers confine a
// path in the sandbox itself, with a shell preamble that resolves it (symbolic links
// followed) and prints a verdict before the command's own output, after a nonce that output
// cannot know.

// CleanRel cleans a workspace-relative path; one that leaves the workspace lexically (or is
// absolute) is sandbox.ErrOutsideWorkspace, and "" is the root. The path check in the
// sandbox then resolves its symbolic links.
func CleanRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	c := path.Clean(p)
	if path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q: %w", p, sandbox.ErrOutsideWorkspace)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

// ShellQuote makes s one word of a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// NewNonce is a marker no command's output can know in advance.
func NewNonce() string { return "ma-" + strings.ToLower(rand.Text()) }

// PathPreamble is the shell preamble that resolves rel in the sandbox: it defines ma_say
// (print a verdict after nonce), sets ma_root to the real workspace directory root (a shell
// word; made when missing if makeRoot) and ma_p to the real path of the target (symbolic
// links resolved, missing components kept), and refuses a target outside the workspace.
func PathPreamble(nonce, root, rel string, makeRoot bool) string {
	rootLine := `ma_root=$(realpath -e -- ` + root + ` 2>/dev/null) || { ma_say noroot; exit 0; }`
	if makeRoot {
		rootLine = `ma_root=$(realpath -e -- ` + root + ` 2>/dev/null) || { mkdir -p -- ` + root + ` 2>/dev/null && ma_root=$(realpath -e -- ` + root + `); } || { ma_say noroot; exit 0; }`
	}
	return `ma_say() { printf '%s %s\n' ` + nonce + ` "$*"; }
` + rootLine + `
ma_p=$(realpath -m -- "$ma_root"/` + ShellQuote(rel) + ` 2>/dev/null) || { ma_say invalid; exit 0; }
case "$ma_p/" in "$ma_root"/*) ;; *) ma_say outside; exit 0 ;; esac
`
}

// SplitVerdict splits the preamble's verdict off out: the words after the nonce, and the
// rest of the output.
func SplitVerdict(nonce string, out []byte) ([]string, []byte, error) {
	line, rest, ok := bytes.Cut(out, []byte("\n"))
	words := strings.Fields(string(line))
	if !ok || len(words) < 2 || words[0] != nonce {
		return nil, nil, fmt.Errorf("the path check gave no verdict: %q", CutText(out, 200))
	}
	return words[1:], rest, nil
}

// CutText is b as text, cut at n bytes (marked with an ellipsis).
func CutText(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// PathCheck is what a provider's refusals of a path mean beyond the words they share.
type PathCheck struct {
	// MaxFileSize is the limit a "toolarge" verdict names.
	MaxFileSize int64
	// NoRoot explains a "noroot" verdict (the workspace directory is missing), naming the
	// variable that sets it.
	NoRoot string
}

// Error turns a refusal verdict (its words: the reason, then its details) about rel into the
// error the sandbox contract names; what says what was asked ("read", "working directory").
func (c PathCheck) Error(words []string, what, rel string) error {
	switch words[0] {
	case "outside":
		return fmt.Errorf("%s %q: %w", what, rel, sandbox.ErrOutsideWorkspace)
	case "notexist":
		return fmt.Errorf("%s %q: %w", what, rel, sandbox.ErrNotExist)
	case "notdir":
		return fmt.Errorf("%s %q: %w", what, rel, syscall.ENOTDIR)
	case "isdir":
		return fmt.Errorf("%s %q: %w", what, rel, syscall.EISDIR)
	case "notfile":
		return fmt.Errorf("%s %q: not a regular file", what, rel)
	case "toolarge":
		return fmt.Errorf("%s %q: file is too large (%s bytes, the limit is %d); read parts of it with bash", what, rel, strings.Join(words[1:], " "), c.MaxFileSize)
	case "noroot":
		return fmt.Errorf("%s %q: %s", what, rel, c.NoRoot)
	case "mkdir":
		return fmt.Errorf("%s %q: cannot create its directory (a parent is a file?)", what, rel)
	}
	return fmt.Errorf("%s %q: the path check failed (%s)", what, rel, strings.Join(words, " "))
}

// The checks that follow PathPreamble in a provider's scripts, each refusing with the words
// PathCheck reads.
const (
	// DirCheck refuses a target that is missing or not a directory, and enters it.
	DirCheck = `[ -e "$ma_p" ] || { ma_say notexist; exit 0; }
[ -d "$ma_p" ] || { ma_say notdir; exit 0; }
cd -- "$ma_p" || { ma_say notdir; exit 0; }
`
	// WriteCheck refuses a target that is a directory or exists as something other than a
	// regular file, makes its parent directory and refuses a parent outside the workspace
	// (ma_d is the parent's real path).
	WriteCheck = `[ -d "$ma_p" ] && { ma_say isdir; exit 0; }
if [ -e "$ma_p" ] || [ -L "$ma_p" ]; then [ -f "$ma_p" ] || { ma_say notfile; exit 0; }; fi
mkdir -p -- "$(dirname -- "$ma_p")" 2>/dev/null || { ma_say mkdir; exit 0; }
ma_d=$(realpath -e -- "$(dirname -- "$ma_p")") || { ma_say mkdir; exit 0; }
case "$ma_d/" in "$ma_root"/*) ;; *) ma_say outside; exit 0 ;; esac
`
)

// ReadCheck refuses a target that is missing, not a regular file or larger than max bytes;
// ma_n is its size.
func ReadCheck(max int) string {
	return `[ -e "$ma_p" ] || { ma_say notexist; exit 0; }
[ -d "$ma_p" ] && { ma_say isdir; exit 0; }
[ -f "$ma_p" ] || { ma_say notfile; exit 0; }
ma_n=$(wc -c < "$ma_p") || { ma_say notfile; exit 0; }
[ "$ma_n" -le ` + strconv.Itoa(max) + ` ] || { ma_say toolarge "$ma_n"; exit 0; }
`
}
