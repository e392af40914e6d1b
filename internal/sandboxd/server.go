package sandboxd

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// Defaults of the server's ceilings.
const (
	// DefaultMaxTimeout is the longest a command may run, whatever its request asks.
	DefaultMaxTimeout = time.Hour
	// DefaultMaxOutput is the largest output cap a request may ask for: what one exec
	// response can hold in memory.
	DefaultMaxOutput = 16 << 20
	// MinTokenBytes is the shortest token the server accepts to be configured with.
	MinTokenBytes = 16
)

// Config configures a Server.
type Config struct {
	// Sandbox is what the daemon serves: the pod's workspace (sandbox/workspace).
	Sandbox sandbox.Sandbox
	// Token is the per-sandbox secret every call must carry; at least MinTokenBytes.
	Token string
	// NoSearch hides the sandbox's FileSearcher capability (find and grep answer 404 and
	// health does not list it), so clients take the tools' fallback paths.
	NoSearch bool
	// MaxTimeout and MaxOutput clamp what a command's request may ask for; zero means
	// DefaultMaxTimeout and DefaultMaxOutput.
	MaxTimeout time.Duration
	MaxOutput  int
	// Logger receives one debug line per call and the failures; never the token.
	Logger *slog.Logger
}

// Server serves one sandbox.
type Server struct {
	cfg      Config
	searcher sandbox.FileSearcher // nil without the capability
	mux      *http.ServeMux
	paths    map[string]bool // those with a 405 answer registered
}

// New validates c and returns the server.
func New(c Config) (*Server, error) {
	if c.Sandbox == nil {
		return nil, errors.New("sandboxd: no sandbox to serve")
	}
	if len(c.Token) < MinTokenBytes {
		return nil, fmt.Errorf("sandboxd: the token must have at least %d bytes", MinTokenBytes)
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: c, mux: http.NewServeMux(), paths: map[string]bool{}}
	if fs, ok := c.Sandbox.(sandbox.FileSearcher); ok && !c.NoSearch {
		s.searcher = fs
	}
	s.handle(RouteHealth, http.MethodGet, s.health)
	s.handle(RouteExec, http.MethodPost, s.exec)
	s.handle(RouteFile, http.MethodGet, s.read)
	s.handle(RouteFile, http.MethodPut, s.write)
	if s.searcher != nil {
		s.handle(RouteFind, http.MethodPost, s.find)
		s.handle(RouteGrep, http.MethodPost, s.grep)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errTypeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// handle registers fn for method on path behind the token check; any other method on the
// path gets a JSON 405 (the mux's own answer would be plain text).
func (s *Server) handle(path, method string, fn func(http.ResponseWriter, *http.Request)) {
	s.mux.HandleFunc(method+" "+path, s.authorized(fn))
	if s.paths[path] {
		return
	}
	s.paths[path] = true
	s.mux.HandleFunc(path, s.authorized(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, errTypeInvalid, fmt.Sprintf("method %s not allowed on %s", r.Method, path))
	}))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	s.cfg.Logger.Debug("sandboxd call", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) authorized(fn http.HandlerFunc) http.HandlerFunc {
	want := []byte(s.cfg.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
			writeError(w, http.StatusUnauthorized, errTypeUnauthorized, "missing or wrong sandbox token")
			return
		}
		fn(w, r)
	}
}

// Serve answers on ln until ctx ends, then shuts down, letting calls in flight finish for a
// short grace (a command still running after it is cut by its context).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer(ctx)
	return run(ctx, srv, func() error { return srv.Serve(ln) })
}

// run calls serve until it returns or ctx ends, then shuts srv down. serve returning nil is
// a normal end (ServeConn's peer hung up); an error fails the call.
func run(ctx context.Context, srv *http.Server, serve func() error) error {
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("sandboxd serve: %w", err)
		}
		done <- nil // for the wait below
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	<-done
	if err != nil {
		return fmt.Errorf("sandboxd shutdown: %w", err)
	}
	return nil
}

// httpServer is the HTTP server of Serve and ServeConn, its requests' contexts derived from ctx.
func (s *Server) httpServer(ctx context.Context) *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// A body is at most MaxWriteBody; two minutes is a slow link's worth of it.
		ReadTimeout: 2 * time.Minute,
		// The longest response is an exec that ran for MaxTimeout.
		WriteTimeout:   s.cfg.MaxTimeout + time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	caps := []string{}
	if s.searcher != nil {
		caps = append(caps, CapabilitySearch)
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok", Capabilities: caps})
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if !decode(w, r, &req) {
		return
	}
	if req.TimeoutMS < 0 || req.MaxOutput < 0 {
		writeError(w, http.StatusBadRequest, errTypeInvalid, "timeout_ms and max_output must not be negative")
		return
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout > s.cfg.MaxTimeout || req.TimeoutMS > int64(s.cfg.MaxTimeout/time.Millisecond) {
		timeout = s.cfg.MaxTimeout
	}
	res, err := s.cfg.Sandbox.Exec(r.Context(), sandbox.ExecRequest{
		Command:   req.Command,
		Dir:       req.Dir,
		Timeout:   timeout,
		MaxOutput: min(req.MaxOutput, s.cfg.MaxOutput),
	})
	// A command that did not start (a bad Dir, a gone workspace) has no result at all; one
	// that ran and was then cut has its exit status and output, which the caller gets too.
	if err != nil && res.Output == nil && res.ExitCode == 0 {
		s.fail(w, r, err)
		return
	}
	out := execResponse{ExitCode: res.ExitCode, Output: res.Output, Truncated: res.Truncated, TimedOut: res.TimedOut}
	if err != nil {
		_, typ, msg := classify(r, err)
		out.Error = &errorDetail{Type: typ, Message: msg}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	data, err := s.cfg.Sandbox.ReadFile(r.Context(), path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	if r.ContentLength > MaxWriteBody {
		writeError(w, http.StatusRequestEntityTooLarge, errTypeTooLarge, fmt.Sprintf("write %q: %d bytes, the limit is %d", path, r.ContentLength, MaxWriteBody))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWriteBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, errTypeTooLarge, fmt.Sprintf("write %q: the body is over the limit of %d bytes", path, MaxWriteBody))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, errTypeInvalid, fmt.Sprintf("write %q: reading the body: %v", path, err))
		return
	}
	if err := s.cfg.Sandbox.WriteFile(r.Context(), path, data); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) find(w http.ResponseWriter, r *http.Request) {
	var req findRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := s.searcher.FindFiles(r.Context(), req.sandbox())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, findResponse{Paths: res.Paths, Cut: res.Cut})
}

func (s *Server) grep(w http.ResponseWriter, r *http.Request) {
	var req grepRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := s.searcher.GrepFiles(r.Context(), req.sandbox())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := grepResponse{Total: res.Total, Files: res.Files, Skipped: res.Skipped, Cut: res.Cut, Matches: make([]grepMatch, len(res.Matches))}
	for i, m := range res.Matches {
		out.Matches[i] = grepMatch{Path: m.Path, Line: m.Line, Text: m.Text}
	}
	writeJSON(w, http.StatusOK, out)
}

// fail answers an operation's error with its status and type.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, typ, msg := classify(r, err)
	if status == http.StatusGone {
		s.cfg.Logger.Warn("sandboxd: the workspace is gone", "path", r.URL.Path, "error", err)
	}
	writeError(w, status, typ, msg)
}

// classify maps an operation's error onto the protocol's status and type.
func classify(r *http.Request, err error) (int, string, string) {
	msg := err.Error()
	switch {
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return http.StatusForbidden, errTypeOutside, msg
	case errors.Is(err, sandbox.ErrNotExist):
		return http.StatusNotFound, errTypeNotFound, msg
	case errors.Is(err, sandbox.ErrGone):
		return http.StatusGone, errTypeGone, msg
	case r.Context().Err() != nil:
		return 499, errTypeCanceled, msg
	}
	return http.StatusUnprocessableEntity, errTypeFailed, msg
}

func pathParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query()
	if len(q["path"]) != 1 {
		writeError(w, http.StatusBadRequest, errTypeInvalid, `exactly one query parameter "path" is required`)
		return "", false
	}
	return q.Get("path"), true
}

// decode reads one JSON object of at most MaxJSONBody bytes with no unknown fields.
func decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxJSONBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, errTypeTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", MaxJSONBody))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, errTypeInvalid, fmt.Sprintf("invalid request body: %v", err))
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody{Error: &errorDetail{Type: typ, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
