// Package sandboxd is the daemon that runs inside a sandbox pod and serves its workspace over
// HTTP, and the client that makes it a sandbox.Sandbox again on the worker's side. The server
// runs the same code as the local provider (sandbox/workspace) against the pod's workspace
// directory; the client maps the daemon's errors back onto the sandbox package's sentinel
// errors, so tools see no difference between a pod and the host. The protocol is documented
// in docs/sandboxd.md.
//
// Every call carries the sandbox's token (Authorization: Bearer), compared in constant time.
// Request bodies are bounded (MaxJSONBody, MaxWriteBody) and command limits are clamped to the
// server's ceilings, so a caller cannot make the daemon hold more than it was configured for.
//
// It imports only sandbox and sandbox/workspace; never store, turns, agent, durable,
// Temporal or Kubernetes packages.
package sandboxd

import (
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/workspace"
)

// Routes of the protocol (docs/sandboxd.md).
const (
	RouteHealth = "/v1/health"
	RouteExec   = "/v1/exec"
	RouteFile   = "/v1/file" // GET reads, PUT writes; the path is the query parameter "path"
	RouteFind   = "/v1/find"
	RouteGrep   = "/v1/grep"
)

// Body limits. A JSON request (a command, a search) is small; a write carries one file, up to
// what ReadFile would read back.
const (
	MaxJSONBody  = 4 << 20
	MaxWriteBody = workspace.MaxFileSize
)

// MaxJSONResponse bounds a JSON answer the client reads: an exec's output at the server's
// largest cap (base64, a third larger) with room for the rest.
const MaxJSONResponse = DefaultMaxOutput*4/3 + 1<<20

// ExecAnswerGrace is how long past a command's timeout the client waits for its answer.
const ExecAnswerGrace = 30 * time.Second

// CapabilitySearch is the health capability of a daemon that serves find and grep
// (sandbox.FileSearcher).
const CapabilitySearch = "search"

// Error types of the error body, each mapped back to a sentinel by the client.
const (
	errTypeInvalid      = "invalid_request"   // 400: malformed body, unknown field, bad method
	errTypeUnauthorized = "unauthorized"      // 401: missing or wrong token
	errTypeOutside      = "outside_workspace" // 403: sandbox.ErrOutsideWorkspace
	errTypeNotFound     = "not_found"         // 404: sandbox.ErrNotExist, or an unknown route
	errTypeGone         = "gone"              // 410: sandbox.ErrGone (the workspace is gone)
	errTypeTooLarge     = "too_large"         // 413: a body over its limit
	errTypeFailed       = "failed"            // 422: the operation failed (a directory read, a bad pattern)
	errTypeCanceled     = "canceled"          // 499: the caller went away
)

// errorBody is every non-2xx response, and the error of an exec that has a result.
type errorBody struct {
	Error *errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// healthResponse is GET /v1/health.
type healthResponse struct {
	Status       string   `json:"status"`
	Capabilities []string `json:"capabilities"`
}

// execRequest is POST /v1/exec: sandbox.ExecRequest with the timeout in milliseconds.
type execRequest struct {
	Command   string `json:"command"`
	Dir       string `json:"dir,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	MaxOutput int    `json:"max_output,omitempty"`
}

// execResponse is the result of a command that ran; Error is set when it ran but the call
// still failed (the daemon's wait failed), like Exec returning both.
type execResponse struct {
	ExitCode  int          `json:"exit_code"`
	Output    []byte       `json:"output"`
	Truncated bool         `json:"truncated,omitempty"`
	TimedOut  bool         `json:"timed_out,omitempty"`
	Error     *errorDetail `json:"error,omitempty"`
}

// The search bodies are the sandbox types themselves with JSON names.
type findRequest struct {
	Dir       string   `json:"dir,omitempty"`
	Pattern   string   `json:"pattern"`
	Prune     []string `json:"prune,omitempty"`
	MaxListed int      `json:"max_listed,omitempty"`
}

type findResponse struct {
	Paths []string `json:"paths"`
	Cut   bool     `json:"cut,omitempty"`
}

type grepRequest struct {
	Dir         string   `json:"dir,omitempty"`
	Pattern     string   `json:"pattern"`
	Prune       []string `json:"prune,omitempty"`
	MaxFileSize int64    `json:"max_file_size,omitempty"`
	MaxFiles    int      `json:"max_files,omitempty"`
	MaxMatches  int      `json:"max_matches,omitempty"`
}

type grepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type grepResponse struct {
	Matches []grepMatch `json:"matches"`
	Total   int         `json:"total"`
	Files   int         `json:"files"`
	Skipped int         `json:"skipped"`
	Cut     bool        `json:"cut,omitempty"`
}

func (r findRequest) sandbox() sandbox.FindRequest {
	return sandbox.FindRequest{Dir: r.Dir, Pattern: r.Pattern, Prune: r.Prune, MaxListed: r.MaxListed}
}

func (r grepRequest) sandbox() sandbox.GrepRequest {
	return sandbox.GrepRequest{Dir: r.Dir, Pattern: r.Pattern, Prune: r.Prune, MaxFileSize: r.MaxFileSize, MaxFiles: r.MaxFiles, MaxMatches: r.MaxMatches}
}
