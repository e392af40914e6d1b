// Package sandbox defines where built-in tools run: a Provider creates, re-attaches and
// destroys session-scoped sandboxes; a Sandbox runs commands and reads and writes files
// confined to its workspace. Every built-in tool is written on these three operations only,
// so tools behave the same on every provider.
//
// Providers live in sub-packages (local, later docker, kube and remote services). This
// package must never import runtime, store, httpapi, workflow, Temporal or Kubernetes
// packages.
package sandbox

import (
	"context"
	"errors"
	"time"
)

// Spec describes the sandbox a session needs.
type Spec struct {
	SessionID string
	// Env is added to every command's environment (the environment's declared variables).
	Env map[string]string
}

// Ref is the durable reference to a sandbox: what the database stores so a restarted worker
// can Attach again.
type Ref struct {
	Provider   string
	ExternalID string
}

// Provider manages sandboxes of one kind.
type Provider interface {
	Name() string
	Create(ctx context.Context, spec Spec) (Ref, error)
	// Attach returns a client for an existing sandbox; ErrGone if it no longer exists.
	Attach(ctx context.Context, ref Ref) (Sandbox, error)
	// Destroy removes the sandbox; destroying one already gone is not an error.
	Destroy(ctx context.Context, ref Ref) error
}

// ErrGone means the sandbox behind a Ref no longer exists.
var ErrGone = errors.New("sandbox no longer exists")

// ExecRequest is one command.
type ExecRequest struct {
	// Command is run by bash -c.
	Command string
	// Dir is the working directory, relative to the workspace root ("" = the root).
	Dir string
	// Timeout kills the whole process group when it expires; zero means the provider default.
	Timeout time.Duration
	// MaxOutput caps the captured combined output in bytes; zero means the provider default.
	MaxOutput int
}

// ExecResult is the outcome of a command that ran (a command that fails still has a result).
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved as written, cut at MaxOutput.
	Output    []byte
	Truncated bool
	TimedOut  bool
}

// Sandbox runs commands and file operations inside one session's workspace. Paths are
// relative to the workspace root; a path that would leave it is an error wrapping
// ErrOutsideWorkspace.
type Sandbox interface {
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
}

// ErrOutsideWorkspace is returned for a path that resolves outside the workspace.
var ErrOutsideWorkspace = errors.New("path is outside the workspace")

// ErrNotExist is returned by ReadFile for a missing file.
var ErrNotExist = errors.New("file does not exist")
