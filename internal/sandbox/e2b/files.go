package e2b

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// MaxFileSize bounds what ReadFile loads and WriteFile sends, like the other providers.
const MaxFileSize = 64 << 20

// confineScript is the part of the file scripts that resolves $1 in the workspace (the
// working directory), symbolic links followed, and refuses what leaves it: envd reads and
// writes any path it is given, so the check is made in the sandbox, on every call.
const confineScript = `ws=$(pwd -P) || exit 95
r=$(realpath -m -- "$1" 2>/dev/null) || { echo "ma-e2b:outside" >&2; exit 95; }
case $r in "$ws"|"$ws"/*) ;; *) echo "ma-e2b:outside" >&2; exit 95 ;; esac
`

// readScript prints the file $1 (at most $2 bytes) on stdout.
const readScript = confineScript + `[ -e "$r" ] || { echo "ma-e2b:missing" >&2; exit 95; }
[ -d "$r" ] && { echo "ma-e2b:isdir" >&2; exit 95; }
[ -f "$r" ] || { echo "ma-e2b:special" >&2; exit 95; }
s=$(stat -L -c %s -- "$r") || exit 1
[ "$s" -le "$2" ] || { echo "ma-e2b:toolarge:$s" >&2; exit 95; }
exec cat -- "$r"`

// writeCheckScript prints where in the workspace a write of $1 lands (symbolic links
// resolved), or refuses it; the upload then goes to that path.
const writeCheckScript = confineScript + `[ "$r" = "$ws" ] || [ -d "$r" ] && { echo "ma-e2b:isdir" >&2; exit 95; }
[ -e "$r" ] && [ ! -f "$r" ] && { echo "ma-e2b:special" >&2; exit 95; }
printf '%s' "${r#"$ws"/}"`

// confine checks p lexically: relative, NUL-free and not climbing out. It returns p cleaned
// ("" for the workspace root).
func confine(op, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q: the path contains a NUL byte", op, p)
	}
	if path.IsAbs(p) {
		return "", fmt.Errorf("%s %q: %w", op, p, sandbox.ErrOutsideWorkspace)
	}
	c := path.Clean("/" + p)
	if c == "/" {
		if p != "" && path.Clean(p) != "." {
			return "", fmt.Errorf("%s %q: %w", op, p, sandbox.ErrOutsideWorkspace)
		}
		return "", nil
	}
	if rel := path.Clean(p); rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s %q: %w", op, p, sandbox.ErrOutsideWorkspace)
	}
	return strings.TrimPrefix(c, "/"), nil
}

// scriptRefusal maps a script's "ma-e2b:" complaint onto the sandbox errors; nil if stderr
// holds none (the status was the command's own).
func scriptRefusal(op, p string, stderr []byte) error {
	for line := range strings.SplitSeq(strings.TrimSpace(string(stderr)), "\n") {
		reason, ok := strings.CutPrefix(line, "ma-e2b:")
		if !ok {
			continue
		}
		words := strings.Split(reason, ":")
		if w, known := refusals[words[0]]; known {
			words[0] = w
			return pathCheck.Error(words, op, p)
		}
	}
	return nil
}

// refusals are the scripts' complaints in the words of remote.PathCheck.
var refusals = map[string]string{"outside": "outside", "missing": "notexist", "notdir": "notdir",
	"special": "notfile", "isdir": "isdir", "toolarge": "toolarge"}

// pathCheck reads the scripts' refusals.
var pathCheck = remote.PathCheck{MaxFileSize: MaxFileSize}

// helper runs one of this package's scripts (not a login shell: nothing of the profile may
// reach its output) with args, bounded like any command.
func (b *box) helper(ctx context.Context, op, p, script string, maxOut int, args ...string) (run, error) {
	if err := b.keepAlive(ctx, time.Minute); err != nil {
		return run{}, err
	}
	r, err := b.start(ctx, op, append([]string{"-c", script, "ma-" + strings.Fields(op)[0]}, args...), 5*time.Minute, maxOut, nil)
	if err != nil {
		return run{}, err
	}
	if r.timedOut {
		return run{}, fmt.Errorf("%s %q: took longer than 5 minutes", op, p)
	}
	if r.exitCode == scriptFailure {
		if err := scriptRefusal(op, p, r.stderr); err != nil {
			return run{}, err
		}
	}
	if r.exitCode != 0 {
		return run{}, fmt.Errorf("%s %q: %s (status %d)", op, p, strings.TrimSpace(string(r.stderr)), r.exitCode)
	}
	return r, nil
}

// ReadFile implements sandbox.Sandbox: one command that checks the path and prints the file
// (envd's GET /files would follow a symbolic link out of the workspace, and a check first
// would cost a second round trip).
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rel, err := confine("read", p)
	if err != nil {
		return nil, err
	}
	if rel == "" {
		return nil, fmt.Errorf("read %q: %w", p, syscall.EISDIR)
	}
	r, err := b.helper(ctx, "read", p, readScript, MaxFileSize+1, rel, strconv.Itoa(MaxFileSize))
	if err != nil {
		return nil, err
	}
	if r.truncated {
		return nil, fmt.Errorf("read %q: file grew past the limit of %d bytes while being read", p, MaxFileSize)
	}
	if r.stdout == nil {
		r.stdout = []byte{}
	}
	return r.stdout, nil
}

// WriteFile implements sandbox.Sandbox: a command resolves where the path lands in the
// workspace (or refuses it), then POST /files writes there (parents created).
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	rel, err := confine("write", p)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("write %q: %w", p, syscall.EISDIR)
	}
	if len(data) > MaxFileSize {
		return fmt.Errorf("write %q: %d bytes, the limit is %d", p, len(data), MaxFileSize)
	}
	r, err := b.helper(ctx, "write", p, writeCheckScript, 64<<10, rel)
	if err != nil {
		return err
	}
	target := path.Join(b.p.cfg.Workspace, string(r.stdout))
	if len(r.stdout) == 0 || !strings.HasPrefix(target, b.p.cfg.Workspace+"/") {
		return fmt.Errorf("write %q: the sandbox resolved it to %q", p, r.stdout)
	}
	if err := b.envd.upload(ctx, target, data); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("write %q: %w", p, ctx.Err())
		}
		return b.check(ctx, fmt.Errorf("write %q: %w", p, err))
	}
	return nil
}
