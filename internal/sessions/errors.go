// Package sessions is the client-facing service: the business rules of agents, environments,
// vaults and their credentials, sessions, sends, streams and auth, the one door for the HTTP
// API and (next) the controllers. The worker's side (turn lifecycle, emitter, sandbox
// bindings) is package turns.
//
// It imports store, wire, tools/config, and secretbox and mcpurl for vault credentials (whose
// secrets it seals and never returns); never the agent loop, turns, sandbox, durable,
// Temporal or Kubernetes (internal/archtest enforces it), so a controller can use it without
// dragging in the worker. It reaches the durable runner only through the Runner interface it
// declares. Callers see its rules only through the *Error values it returns.
package sessions

import (
	"errors"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/store"
)

// Kind classifies a rule violation; the HTTP layer maps each kind to a status and error type.
type Kind int

// Kinds of errors.
const (
	// KindInvalid is bad input or an operation the current state does not allow (400).
	KindInvalid Kind = iota + 1
	// KindNotFound is an unknown id, or one of another workspace (404).
	KindNotFound
	// KindConflict is a permanent conflict with stored state (409, not worth retrying).
	KindConflict
	// KindStaleVersion is an optimistic-concurrency failure on an agent update (409; the
	// hosted service reports it as invalid_request_error, API.md §17).
	KindStaleVersion
	// KindKeyReused is an idempotency key sent again with a different request (422: the
	// request is well-formed but cannot be processed; unlike a 409 the SDKs do not retry it).
	KindKeyReused
	// KindRateLimited is a request over a key's rate limit or a workspace's quota (429, with
	// RetryAfter); nothing was written.
	KindRateLimited
	// KindPrecondition is a request whose precondition does not hold (412): a work heartbeat
	// whose expected_last_heartbeat is not the lease's; CurrentState says what is.
	KindPrecondition
	// KindForbidden is a key that may not do this (403 permission_error): an environment key
	// or a session token outside what it authorises.
	KindForbidden
)

// Error is a rule violation with a message meant for API clients.
type Error struct {
	Kind    Kind
	Message string
	// Code is the optional stable error_code of API.md §9.2.
	Code string
	// RetryAfter is how long a KindRateLimited client should wait before trying again.
	RetryAfter time.Duration
	// CurrentState is the details' current_state of a KindPrecondition error.
	CurrentState any
}

func (e *Error) Error() string { return e.Message }

func invalidf(format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflictf(format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

// withCode sets the stable error code.
func (e *Error) withCode(code string) *Error {
	e.Code = code
	return e
}

// notFoundAs turns store.ErrNotFound into a client-facing not-found error and wraps the rest.
func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFoundf(format, args...)
	}
	return err
}
