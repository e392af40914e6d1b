package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// MaxFileSize bounds what ReadFile loads into memory; larger files are read with commands.
const MaxFileSize = 64 << 20

// Workspace is one session's sandbox: its work directory on the host and the command settings.
type Workspace struct {
	dir       string // absolute, cleaned
	realDir   string // dir with symlinks resolved: what pwd prints when /tmp is a link
	env       []string
	timeout   time.Duration
	maxOutput int
}

// Config is what a Workspace needs besides its directory.
type Config struct {
	// Env is the complete environment of commands (nothing else is inherited).
	Env []string
	// Timeout and MaxOutput apply to commands whose request leaves them zero; both must be
	// positive.
	Timeout   time.Duration
	MaxOutput int
}

// New returns the workspace of the existing directory dir. ErrGone if it does not exist.
func New(dir string, c Config) (*Workspace, error) {
	if c.Timeout <= 0 || c.MaxOutput <= 0 {
		return nil, fmt.Errorf("workspace %s: the default timeout and output cap must be positive", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	info, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("workspace %s: %w", dir, sandbox.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Workspace{dir: abs, realDir: real, env: c.Env, timeout: c.Timeout, maxOutput: c.MaxOutput}, nil
}

// Dir is the absolute path of the workspace (what commands start in).
func (w *Workspace) Dir() string { return w.dir }

// rel turns a tool's path into one relative to the workspace. Absolute paths are accepted only
// when they name something inside the workspace (what `pwd` prints there); everything else
// that is not local is refused before os.Root sees it, so the error is ours and clear.
// os.Root then does the real confinement, including symlinks.
func (w *Workspace) rel(path string) (string, error) {
	if path == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(path, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	if filepath.IsAbs(path) {
		for _, base := range []string{w.dir, w.realDir} {
			if r, err := filepath.Rel(base, filepath.Clean(path)); err == nil && (r == "." || filepath.IsLocal(r)) {
				return r, nil
			}
		}
		return "", fmt.Errorf("%q: %w", path, sandbox.ErrOutsideWorkspace)
	}
	clean := filepath.Clean(path)
	if clean != "." && !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%q: %w", path, sandbox.ErrOutsideWorkspace)
	}
	return clean, nil
}

// open resolves path and opens the workspace root; the caller closes the root.
func (w *Workspace) open(path string) (*os.Root, string, error) {
	rel, err := w.rel(path)
	if err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("workspace %s: %w", w.dir, sandbox.ErrGone)
		}
		return nil, "", fmt.Errorf("open workspace: %w", err)
	}
	return root, rel, nil
}

// ReadFile implements sandbox.Sandbox. Only regular files are read: a FIFO or device could
// block or never end.
func (w *Workspace) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, rel, err := w.open(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// O_NONBLOCK keeps the open of a FIFO from waiting for a writer; it has no effect on the
	// reads of a regular file.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, describe("read", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, describe("read", path, err)
	}
	if err := checkRegular(path, info); err != nil {
		return nil, err
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("read %q: file is too large (%d bytes, the limit is %d); read parts of it with bash", path, info.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, describe("read", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read %q: file grew past the limit of %d bytes while being read", path, MaxFileSize)
	}
	return data, nil
}

// WriteFile implements sandbox.Sandbox: it creates missing parent directories inside the
// workspace and replaces the file's content.
func (w *Workspace) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	root, rel, err := w.open(path)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." {
		return fmt.Errorf("write %q: is a directory", path)
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return describe("write", path, err)
		}
	}
	// Open without truncating first: only a regular file may be written, and O_NONBLOCK makes
	// the open of a FIFO without a reader fail instead of hanging.
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return describe("write", path, err)
	}
	if err := writeRegular(f, path, data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return describe("write", path, err)
	}
	return nil
}

func writeRegular(f *os.File, path string, data []byte) error {
	info, err := f.Stat()
	if err != nil {
		return describe("write", path, err)
	}
	if err := checkRegular(path, info); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return describe("write", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return describe("write", path, err)
	}
	return nil
}

func checkRegular(path string, info fs.FileInfo) error {
	switch {
	case info.IsDir():
		return fmt.Errorf("%q: is a directory", path)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%q: not a regular file (%s)", path, info.Mode().Type())
	}
	return nil
}

// describe maps the errors of os.Root onto the sandbox's sentinel errors.
func describe(op, path string, err error) error {
	switch {
	case isEscape(err):
		return fmt.Errorf("%s %q: %w", op, path, sandbox.ErrOutsideWorkspace)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %q: %w", op, path, sandbox.ErrNotExist)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s %q: is a directory", op, path)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s %q: a parent is not a directory", op, path)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %q: too many levels of symbolic links", op, path)
	case errors.Is(err, syscall.ENXIO):
		return fmt.Errorf("%s %q: not a regular file", op, path)
	}
	return fmt.Errorf("%s %q: %w", op, path, err)
}

// isEscape reports whether err is os.Root's refusal of a path that leaves the root. The
// standard library keeps that error unexported, so it is captured once by provoking it.
func isEscape(err error) bool {
	sentinel := rootEscapeErr()
	return sentinel != nil && errors.Is(err, sentinel)
}

var rootEscapeErr = sync.OnceValue(func() error {
	root, err := os.OpenRoot(os.TempDir())
	if err != nil {
		return nil
	}
	defer root.Close()
	_, err = root.Stat("..")
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	return nil
})
