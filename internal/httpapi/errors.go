package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
	requestInfoKey
)

// requestInfo is what the access log says of a request beyond its method and path; handlers
// deeper in the chain fill it in.
type requestInfo struct {
	keyHint string
}

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey).(*requestInfo)
	return info
}

func newRequestID() string { return ids.New(ids.Request) }

func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func workspace(ctx context.Context) string { return principalOf(ctx).WorkspaceID }

// principalOf is the authenticated key of the request (zero before authentication).
func principalOf(ctx context.Context) sessions.Principal {
	p, _ := ctx.Value(principalKey).(sessions.Principal)
	return p
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Every response type marshals; reaching this is a programming error.
		status, body = http.StatusInternalServerError, []byte(`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes the error envelope of API.md §9.1. Permanent 409s carry
// x-should-retry: false, or the SDK would repeat the request twice (§9.3).
func writeError(w http.ResponseWriter, r *http.Request, status int, errType, msg, code string) {
	var details *wire.ErrorDetails
	if code != "" {
		details = &wire.ErrorDetails{ErrorCode: code}
	}
	writeErrorDetails(w, r, status, errType, msg, details)
}

// writeErrorDetails is writeError with the whole details object.
func writeErrorDetails(w http.ResponseWriter, r *http.Request, status int, errType, msg string, details *wire.ErrorDetails) {
	env := wire.ErrorEnvelope{Type: "error", Error: wire.ErrorObject{Type: errType, Message: capMessage(msg), Details: details}, RequestID: requestID(r.Context())}
	if status == http.StatusConflict {
		w.Header().Set("x-should-retry", "false")
	}
	writeJSON(w, status, env)
}

// setRetryAfter tells a client over a limit when to try again: retry-after in whole seconds
// (at least 1, as RFC 9110 has no fractions) and retry-after-ms exactly, which the official
// SDKs prefer, so a client waits no longer than the limit needs.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	ms := max(1, (d+time.Millisecond-1)/time.Millisecond)
	w.Header().Set("retry-after-ms", strconv.FormatInt(int64(ms), 10))
	w.Header().Set("retry-after", strconv.FormatInt(int64(max(1, (d+time.Second-1)/time.Second)), 10))
}

// apiError is a request error found by this package (decoding, query parsing).
type apiError struct {
	status  int
	errType string
	msg     string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(msg string) error {
	return &apiError{status: http.StatusBadRequest, errType: "invalid_request_error", msg: msg}
}

// respondError maps any error to its status and envelope; unexpected errors are logged with
// the request id and answered without detail.
func (s *Server) respondError(w http.ResponseWriter, r *http.Request, err error) {
	var se *sessions.Error
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeError(w, r, ae.status, ae.errType, ae.msg, "")
	case errors.As(err, &se):
		status, typ := http.StatusBadRequest, "invalid_request_error"
		switch se.Kind {
		case sessions.KindNotFound:
			status, typ = http.StatusNotFound, "not_found_error"
		case sessions.KindConflict:
			status, typ = http.StatusConflict, "conflict_error"
		case sessions.KindStaleVersion:
			status = http.StatusConflict
		case sessions.KindRateLimited:
			status, typ = http.StatusTooManyRequests, "rate_limit_error"
			setRetryAfter(w, se.RetryAfter)
		case sessions.KindPrecondition:
			status = http.StatusPreconditionFailed
		case sessions.KindForbidden:
			status, typ = http.StatusForbidden, "permission_error"
		case sessions.KindKeyReused:
			// 422, as the IETF Idempotency-Key draft answers a key reused with another
			// payload (its 409 is for a request still in flight, which cannot happen here: the
			// unique index and the session row lock serialise attempts). The SDKs do not retry
			// a 422, while they retry a 409 that lacks x-should-retry: false.
			status = http.StatusUnprocessableEntity
		}
		if se.CurrentState != nil {
			writeErrorDetails(w, r, status, typ, se.Message, &wire.ErrorDetails{ErrorCode: se.Code, CurrentState: se.CurrentState})
			return
		}
		writeError(w, r, status, typ, se.Message, se.Code)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.logger.ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "method", r.Method,
			"path", r.URL.Path, "error", err)
		writeError(w, r, http.StatusInternalServerError, "api_error", "Internal server error", "")
	}
}
