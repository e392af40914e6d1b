// Package sandbox defines where built-in tools run: a Provider creates, re-attaches and
// destroys session-scoped sandboxes; a Sandbox runs commands and reads and writes files
// confined to its workspace, with optional capabilities (FileSearcher) a remote provider
// offers to save round trips. Every built-in tool works on the three required operations,
// so tools behave the same on every provider.
//
// It also owns the sandbox lifecycle of a session: the Spec built from the session's
// environment (SpecFor), the Registry of the deployment's providers, and the session-scoped
// Manager that acquires (pending binding first, then an idempotent Create, then ready),
// reuses, re-attaches and tears down a session's sandbox over a BindingStore it declares.
//
// Providers live in sub-packages (local, later docker, kube and remote services);
// sandboxtest is the contract suite every provider runs. This package imports only wire; it
// must never import agent, store, turns, httpapi, durable, Temporal or Kubernetes packages.
package sandbox

import (
	"context"
	"errors"
	"time"
)

// Ref is the durable reference to a sandbox: what the database stores so a restarted worker
// can Attach again.
type Ref struct {
	Provider   string
	ExternalID string
}

// Provider manages sandboxes of one kind. sandboxtest.Run holds an implementation to this
// contract.
type Provider interface {
	// Name is the provider name stored in every Ref it makes (the Registry key).
	Name() string
	// Create makes the sandbox spec describes, idempotent on spec.Name (required): a second
	// Create with the same name returns the Ref of the sandbox the first one made, so a
	// retried acquisition adopts what a lost attempt created instead of leaking it.
	Create(ctx context.Context, spec Spec) (Ref, error)
	// Attach returns a client for an existing sandbox; ErrGone if it no longer exists,
	// ErrForeignRef for a Ref of another provider, ErrInvalidRef for one this provider never
	// made the shape of.
	Attach(ctx context.Context, ref Ref) (Sandbox, error)
	// Destroy removes the sandbox; destroying one already gone is not an error. Foreign and
	// invalid references are refused like in Attach.
	Destroy(ctx context.Context, ref Ref) error
}

// Errors of the provider contract.
var (
	// ErrGone means the sandbox behind a Ref no longer exists.
	ErrGone = errors.New("sandbox no longer exists")
	// ErrForeignRef is a Ref that names another provider.
	ErrForeignRef = errors.New("sandbox reference belongs to another provider")
	// ErrInvalidRef is a Ref whose external id this provider could never have made (a
	// tampered or corrupted binding): refused before anything is touched.
	ErrInvalidRef = errors.New("invalid sandbox reference")
	// ErrUnavailable marks a transport failure talking to a sandbox (a remote provider wraps
	// its network errors with it): the client may be stale, so the Manager drops it.
	ErrUnavailable = errors.New("sandbox unreachable")
	// ErrSetup is a sandbox that could not be set up from its spec (an environment's packages
	// failed to install): permanent, since a retry runs the same setup on the same input; the
	// error's message says what failed (the installer's output). A provider returns it only
	// from a Create that made nothing of the sandbox, so a teardown has nothing to destroy.
	ErrSetup = errors.New("sandbox setup failed")
	// ErrQuota is a new sandbox refused by its workspace's quota on sandboxes (a BindingStore
	// refuses to record it): nothing was made, and the acquisition may succeed once another
	// session of the workspace has let its sandbox go.
	ErrQuota = errors.New("workspace sandbox quota reached")
)

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
