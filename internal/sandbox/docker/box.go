package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// MaxFileSize bounds what ReadFile loads into memory (the runner's limit); larger files are
// read with commands.
const MaxFileSize = 64 << 20

var (
	_ sandbox.Sandbox      = (*box)(nil)
	_ sandbox.FileSearcher = (*box)(nil)
)

// daemon is what box uses of the runner's client (internal/sandboxd).
type daemon interface {
	sandbox.Sandbox
	sandbox.FileSearcher
}

// box is one session's container, served by its runner: every operation is a request to
// `managed-agents sandboxd` inside the container (runner.go, conn.go), which runs the same
// code as the local provider against /workspace, so commands, files and searches behave
// exactly as they do there (os.Root confinement, process-group kill, output caps).
type box struct {
	daemon
	p    *Provider
	name string
}

// Exec implements sandbox.Sandbox, with the provider's default timeout and output cap for a
// request that sets none.
func (b *box) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.Timeout <= 0 {
		req.Timeout = b.p.cfg.Timeout
	}
	if req.MaxOutput <= 0 {
		req.MaxOutput = b.p.cfg.MaxOutput
	}
	res, err := b.daemon.Exec(ctx, req)
	return res, b.check(ctx, err)
}

// ReadFile implements sandbox.Sandbox.
func (b *box) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := b.daemon.ReadFile(ctx, path)
	return data, b.check(ctx, err)
}

// WriteFile implements sandbox.Sandbox.
func (b *box) WriteFile(ctx context.Context, path string, data []byte) error {
	return b.check(ctx, b.daemon.WriteFile(ctx, path, data))
}

// FindFiles implements sandbox.FileSearcher.
func (b *box) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	res, err := b.daemon.FindFiles(ctx, req)
	return res, b.check(ctx, err)
}

// GrepFiles implements sandbox.FileSearcher.
func (b *box) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	res, err := b.daemon.GrepFiles(ctx, req)
	return res, b.check(ctx, err)
}

// check tells a container that is gone from a runner that went away: the connection ends
// the same way when the container is removed, stopped, or its runner dies, and only the
// engine knows which. A removed container is ErrGone, never silently replaced.
func (b *box) check(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrGone) {
		return err
	}
	// Asked even when the call was canceled, but bounded: the answer only refines the error.
	check, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	info, ierr := b.p.engine.ContainerInspect(check, b.name, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(ierr):
		return fmt.Errorf("docker sandbox %s: %w", b.name, sandbox.ErrGone)
	case ierr == nil && (info.Container.State == nil || !info.Container.State.Running):
		return fmt.Errorf("docker sandbox %s is not running: %w", b.name, err)
	}
	return err
}
