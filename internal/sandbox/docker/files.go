package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// MaxFileSize bounds what ReadFile loads into memory; larger files are read with commands.
const MaxFileSize = 64 << 20

// Exit statuses of the file scripts, each a refusal ReadFile and WriteFile map to an error.
const (
	statusOutside  = 90
	statusNotExist = 91
	statusIsDir    = 92
	statusSpecial  = 93
	statusTooLarge = 94
	statusNotDir   = 95
)

// resolveScript resolves $1 inside the container, following every symlink that exists, and
// refuses a result outside the workspace. Both file scripts start with it, after the trap
// that reports their exit status as the last line of stderr (see execScript). Resolution and
// use are separate steps: a command left running in the container could swap a symlink in
// between, but it could reach that file itself anyway; the container, not this check, is
// the boundary.
const resolveScript = `trap 'echo "` + exitTrailer + `$?" >&2' EXIT
d=$(realpath -m -- "$1" 2>/dev/null) || exit 91
case $d in /workspace|/workspace/*) ;; *) exit 90 ;; esac
`

// readScript prints the regular file $1 if it is no larger than $2 bytes.
const readScript = resolveScript + `[ -e "$d" ] || exit 91
[ -d "$d" ] && exit 92
[ -f "$d" ] || exit 93
size=$(stat -c %s -- "$d") || exit 1
[ "$size" -le "$2" ] || { echo "$size" >&2; exit 94; }
cat -- "$d"`

// writeScript replaces the content of the regular file $1 (creating it and its parents) with
// its standard input.
const writeScript = resolveScript + `[ -d "$d" ] && exit 92
[ -e "$d" ] && { [ -f "$d" ] || exit 93; }
p=$(dirname -- "$d")
[ -d "$p" ] || mkdir -p -- "$p" 2>/dev/null || exit 95
cat > "$d"`

// ReadFile implements sandbox.Sandbox. Only regular files are read.
func (b *box) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	var out, errOut bytes.Buffer
	status, err := b.runScript(ctx, readScript, nil, &out, &errOut, path.Join(Workspace, r), strconv.Itoa(MaxFileSize))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	if status == statusTooLarge {
		return nil, fmt.Errorf("read %q: file is too large (%s bytes, the limit is %d); read parts of it with bash", p, strings.TrimSpace(errOut.String()), MaxFileSize)
	}
	if err := statusError("read", p, status, errOut.String()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// WriteFile implements sandbox.Sandbox: it creates missing parent directories inside the
// workspace and replaces the file's content.
func (b *box) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := rel(p)
	if err != nil {
		return err
	}
	if r == "." {
		return fmt.Errorf("write %q: is a directory", p)
	}
	var errOut bytes.Buffer
	status, err := b.runScript(ctx, writeScript, data, io.Discard, &errOut, path.Join(Workspace, r))
	if err != nil {
		return fmt.Errorf("write %q: %w", p, err)
	}
	return statusError("write", p, status, errOut.String())
}

// runScript runs a file script with args, feeding stdin when it is not nil, and returns its
// exit status. Output beyond what the scripts produce is not expected, so nothing is capped
// here but the read size the script checks itself.
func (b *box) runScript(ctx context.Context, script string, stdin []byte, stdout, stderr io.Writer, args ...string) (int, error) {
	run, err := b.start(ctx, append([]string{"bash", "-c", script, "ma-file"}, args...), stdin != nil)
	if err != nil {
		return 0, err
	}
	defer run.attach.Close()
	if stdin != nil {
		// A script that refuses exits without reading; the write then fails, and the status
		// tells why.
		go func() {
			_, _ = run.attach.Conn.Write(stdin)
			_ = run.attach.CloseWrite()
		}()
	}
	var errOut bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, &errOut, run.attach.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		run.attach.Close()
		<-copied
		return 0, ctx.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("docker sandbox %s: %w: %w", b.id, sandbox.ErrUnavailable, err)
	}
	code, rest, ok := cutTrailer(errOut.Bytes())
	if _, err := stderr.Write(rest); err != nil {
		return 0, err
	}
	if ok {
		return code, nil
	}
	return b.exitCode(run.id)
}

// statusError maps a file script's exit status onto the sandbox's errors.
func statusError(op, p string, status int, stderr string) error {
	switch status {
	case 0:
		return nil
	case statusOutside:
		return fmt.Errorf("%s %q: %w", op, p, sandbox.ErrOutsideWorkspace)
	case statusNotExist:
		return fmt.Errorf("%s %q: %w", op, p, sandbox.ErrNotExist)
	case statusIsDir:
		return fmt.Errorf("%s %q: is a directory", op, p)
	case statusSpecial:
		return fmt.Errorf("%s %q: not a regular file", op, p)
	case statusNotDir:
		return fmt.Errorf("%s %q: a parent is not a directory", op, p)
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = "exit status " + strconv.Itoa(status)
	}
	return fmt.Errorf("%s %q: %w", op, p, errors.New(msg))
}
