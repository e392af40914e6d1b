package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// ServerLimits bound what one client can hold of the HTTP server. http.Server's own
// ReadTimeout and WriteTimeout cannot be used: they cover the whole exchange, so they would
// cut every SSE stream (an expired read deadline even cancels the request's context).
// Instead each non-streaming request gets its own deadlines, and a stream only a per-write
// one.
type ServerLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a non-streaming request, body included: a client that
	// trickles its body is cut when it runs out.
	BodyTimeout time.Duration
	// RequestTimeout is the deadline of a non-streaming request's context, and so of every
	// database call it makes: a stalled database answers an error instead of hanging the
	// request.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing a non-streaming response, and each write of a stream: a
	// client that stops reading is dropped.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request in flight.
	IdleTimeout time.Duration
	// MaxConnections caps the connections served at once; more wait to be accepted.
	MaxConnections int
}

// DefaultServerLimits are the limits of serve and dev.
var DefaultServerLimits = ServerLimits{
	ReadHeaderTimeout: 10 * time.Second,
	BodyTimeout:       30 * time.Second,
	RequestTimeout:    60 * time.Second,
	WriteTimeout:      2 * time.Minute,
	IdleTimeout:       2 * time.Minute,
	MaxConnections:    4096,
}

// isStream reports whether r opens an SSE stream (GET /v1/sessions/{id}/events/stream): it
// lives as long as the client wants, so it gets no read or request deadline.
func isStream(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events/stream")
}

// withLimits applies the per-request deadlines of l to next.
func withLimits(next http.Handler, l ServerLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if isStream(r) {
			next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout}, r)
			return
		}
		now := time.Now()
		// The server resets the connection's deadlines for the next request; errors only
		// mean the connection cannot have deadlines (not the case for TCP).
		if l.BodyTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			// Only while the body is read: once it is, the server reads on in the background
			// to notice a client that hangs up, and a deadline there would cancel the
			// request's context. (Without a body that read starts before the handler.)
			_ = rc.SetReadDeadline(now.Add(l.BodyTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		if l.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(now.Add(l.WriteTimeout))
		}
		if l.RequestTimeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), l.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the read deadline when the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter moves a stream's write deadline forward before each write, so a stream may
// live for hours while one write to a client that stopped reading cannot block for longer
// than timeout.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 {
		_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	}
	return d.ResponseWriter.Write(p)
}

// Unwrap lets http.NewResponseController reach the connection's Flush and deadlines.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
