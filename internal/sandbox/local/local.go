// Package local is the sandbox provider that runs a session's tools directly on the host: one
// private work directory per session, commands run by the host's bash.
//
// It is NOT a security boundary. File operations are confined to the workspace with os.Root
// (`..`, absolute paths elsewhere and symlinks that leave the workspace are refused), commands
// get a cleared environment, their own process group, a timeout and an output cap — but a
// command is ordinary host code running as the server's user: it can read and write anything
// that user can, and a hard link it makes to a file outside is not told apart from any other
// file. Use it with the fake model or trusted agents only; the docker and kubernetes
// providers are the isolating ones (DESIGN.md §2, §6).
//
// Create is idempotent on the spec's name: the session directory is named after it, so a
// retried create adopts the directory an earlier attempt made. Workspaces offer the
// sandbox.FileSearcher capability (glob and grep in one call).
//
// The package imports only the sandbox interfaces; it must never import agent, store,
// httpapi, durable, Temporal or Kubernetes packages.
package local

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/workspace"
)

// Name is the provider name stored in sandbox refs.
const Name = "local"

// Defaults of a command's limits when the request leaves them zero.
const (
	DefaultTimeout   = 120 * time.Second
	DefaultMaxOutput = 1 << 20
)

// Layout of one session directory under the provider root: the workspace the tools see, and
// the spec beside it (outside the workspace, so commands do not trip over it).
const (
	workDirName  = "work"
	specFileName = "spec.json"
)

// defaultPath is the command PATH when the server itself has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var _ sandbox.Provider = (*Provider)(nil)

// Provider creates, attaches and destroys local sandboxes under one root directory.
type Provider struct {
	root       string
	timeout    time.Duration
	maxOutput  int
	path, lang string
}

// Option configures a Provider.
type Option func(*Provider)

// WithDefaultTimeout sets the timeout of commands whose request has none (default 120 s).
func WithDefaultTimeout(d time.Duration) Option { return func(p *Provider) { p.timeout = d } }

// WithDefaultMaxOutput sets the output cap of commands whose request has none (default 1 MiB).
func WithDefaultMaxOutput(n int) Option { return func(p *Provider) { p.maxOutput = n } }

// New returns a provider that keeps session work directories under root ("" means
// os.TempDir()/managed-agents-sandboxes). The directory is created on first use.
func New(root string, opts ...Option) *Provider {
	if root == "" {
		root = filepath.Join(os.TempDir(), "managed-agents-sandboxes")
	}
	// Tools see absolute workspace paths (pwd); they must not depend on the server's cwd.
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	p := &Provider{
		root:      root,
		timeout:   DefaultTimeout,
		maxOutput: DefaultMaxOutput,
		// Commands see the server's PATH and LANG so the host's tools work as usual; nothing
		// else of the server's environment (credentials, database URLs) reaches them.
		path: cmp.Or(os.Getenv("PATH"), defaultPath),
		lang: cmp.Or(os.Getenv("LANG"), "C.UTF-8"),
	}
	for _, o := range opts {
		o(p)
	}
	if p.timeout <= 0 {
		p.timeout = DefaultTimeout
	}
	if p.maxOutput <= 0 {
		p.maxOutput = DefaultMaxOutput
	}
	return p
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return Name }

// storedSpec is what a session directory remembers of its Spec, so Attach after a restart
// gives commands the same environment.
type storedSpec struct {
	Name      string            `json:"name"`
	SessionID string            `json:"session_id"`
	Env       map[string]string `json:"env,omitempty"`
}

// Create makes the session directory of spec.Name with an empty workspace, or returns the
// one a previous Create of that name made. The directory is prepared under a temporary name
// and renamed into place, so a crash leaves either nothing or a complete sandbox, and of two
// concurrent creates one wins and the other adopts its directory.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Ref{}, err
	}
	if spec.Name == "" {
		return sandbox.Ref{}, errors.New("create local sandbox: the spec has no name")
	}
	if err := spec.CheckEnv(); err != nil {
		return sandbox.Ref{}, err
	}
	ref := sandbox.Ref{Provider: Name, ExternalID: dirName(spec.Name)}
	dir := filepath.Join(p.root, ref.ExternalID)
	if _, err := os.Stat(filepath.Join(dir, specFileName)); err == nil {
		return ref, nil
	}
	if err := os.MkdirAll(p.root, 0o700); err != nil {
		return sandbox.Ref{}, fmt.Errorf("create sandbox root %s: %w", p.root, err)
	}
	tmp, err := os.MkdirTemp(p.root, ".creating-")
	if err != nil {
		return sandbox.Ref{}, fmt.Errorf("create session directory: %w", err)
	}
	if err := initSessionDir(tmp, spec); err != nil {
		_ = os.RemoveAll(tmp)
		return sandbox.Ref{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(dir, specFileName)); statErr == nil {
			return ref, nil // a concurrent Create of the same name won
		}
		return sandbox.Ref{}, fmt.Errorf("create session directory %s: %w", ref.ExternalID, err)
	}
	return ref, nil
}

// dirName is the session directory of a sandbox name: readable in `ls`, with a hash of the
// whole name so names that sanitise alike still get their own directories.
func dirName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sess-" + safeName(name) + "-" + hex.EncodeToString(sum[:6])
}

func initSessionDir(dir string, spec sandbox.Spec) error {
	if err := os.Mkdir(filepath.Join(dir, workDirName), 0o755); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	data, err := json.Marshal(storedSpec{Name: spec.Name, SessionID: spec.SessionID, Env: spec.Env})
	if err != nil {
		return fmt.Errorf("encode sandbox spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, specFileName), data, 0o600); err != nil {
		return fmt.Errorf("write sandbox spec: %w", err)
	}
	return nil
}

// Attach returns the sandbox of an existing session directory; sandbox.ErrGone if it was
// removed.
func (p *Provider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := p.sessionDir(ref)
	if err != nil {
		return nil, err
	}
	work := filepath.Join(dir, workDirName)
	info, err := os.Stat(work)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("attach local sandbox %s: %w", ref.ExternalID, sandbox.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("attach local sandbox %s: %w", ref.ExternalID, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("attach local sandbox %s: workspace is not a directory", ref.ExternalID)
	}
	spec, err := readSpec(filepath.Join(dir, specFileName))
	if err != nil {
		return nil, fmt.Errorf("attach local sandbox %s: %w", ref.ExternalID, err)
	}
	ws, err := workspace.New(work, workspace.Config{
		Env:       sandbox.Spec{Env: spec.Env}.Environ(map[string]string{"PATH": p.path, "HOME": work, "LANG": p.lang}),
		Timeout:   p.timeout,
		MaxOutput: p.maxOutput,
	})
	if err != nil {
		return nil, fmt.Errorf("attach local sandbox %s: %w", ref.ExternalID, err)
	}
	return shellless{ws}, nil
}

// ErrNoBash is what a command in a local sandbox answers where the worker has no bash: the
// container image the Helm chart runs the worker in is FROM scratch, and its default sandbox
// provider is this one, so the bare exec error ("executable file not found") would be the
// first thing a new user's agent sees, with no hint of what to change.
var ErrNoBash = errors.New("bash is not available: the local sandbox runs tools in the worker's own container, whose image has no shell; " +
	"use the kubernetes or docker sandbox provider (docs/kubernetes.md). The read, write, edit, glob and grep tools work here")

// shellless is a workspace whose Exec turns a missing bash into ErrNoBash. Embedding keeps
// the workspace's optional capabilities (file search), which need no shell.
type shellless struct{ *workspace.Workspace }

// Exec implements sandbox.Sandbox.
func (s shellless) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := s.Workspace.Exec(ctx, req)
	if errors.Is(err, exec.ErrNotFound) {
		return res, ErrNoBash
	}
	return res, err
}

func readSpec(path string) (storedSpec, error) {
	var spec storedSpec
	data, err := os.ReadFile(path)
	if err != nil {
		return spec, fmt.Errorf("read sandbox spec: %w", err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return spec, fmt.Errorf("decode sandbox spec %s: %w", path, err)
	}
	return spec, nil
}

// Destroy removes the session directory and everything in it. Destroying one that is already
// gone is not an error. Processes a command left running outside its process group are not
// tracked and keep running.
func (p *Provider) Destroy(ctx context.Context, ref sandbox.Ref) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, err := p.sessionDir(ref)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	// Tools such as `go mod download` leave read-only directories whose entries cannot be
	// unlinked; make every directory writable and try again.
	if err := makeDirsWritable(dir); err != nil {
		return fmt.Errorf("destroy local sandbox %s: %w", ref.ExternalID, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("destroy local sandbox %s: %w", ref.ExternalID, err)
	}
	return nil
}

// Workspace returns the absolute path of a sandbox's workspace directory on the host (for
// logs and the dev command; tools must go through the Sandbox).
func (p *Provider) Workspace(ref sandbox.Ref) (string, error) {
	dir, err := p.sessionDir(ref)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, workDirName), nil
}

// makeDirsWritable adds owner write and search permission to every directory under dir. It
// works through os.Root so a symlink swapped in during the walk cannot redirect a chmod to a
// directory outside.
func makeDirsWritable(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	// WalkDir calls fn for a directory before reading it, so the chmod also makes an
	// unreadable directory listable in time.
	return fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // best effort: RemoveAll reports what is still in the way
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if err := root.Chmod(path, info.Mode().Perm()|0o700); err != nil {
			return fmt.Errorf("make %s writable: %w", path, err)
		}
		return nil
	})
}

// sessionDir maps a ref to its directory, refusing ids that are not a plain name under the
// root: the id comes from the database, and a tampered one must not make Destroy remove an
// arbitrary directory.
func (p *Provider) sessionDir(ref sandbox.Ref) (string, error) {
	if ref.Provider != "" && ref.Provider != Name {
		return "", fmt.Errorf("sandbox ref of provider %q given to the %s provider: %w", ref.Provider, Name, sandbox.ErrForeignRef)
	}
	id := ref.ExternalID
	if !strings.HasPrefix(id, "sess-") || strings.ContainsAny(id, `/\`) || !filepath.IsLocal(id) {
		return "", fmt.Errorf("local sandbox id %q: %w", id, sandbox.ErrInvalidRef)
	}
	return filepath.Join(p.root, id), nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// safeName turns a sandbox name into a short directory-name fragment.
func safeName(id string) string {
	s := unsafeChars.ReplaceAllString(id, "_")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
