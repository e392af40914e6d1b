// Package daytonafake is a fake Daytona for tests, built from Daytona's published API: the
// control plane (/api/sandbox…) and the toolbox (/toolbox/<sandboxId>/…) on one 127.0.0.1
// listener, Bearer auth checked on both. Every sandbox is a temporary directory in which
// /process/execute really runs the command (split into words and run without a shell, with
// the toolbox's 10 s default timeout, its output merged, 408 on its own timeout), and the
// files endpoints read and write. Knobs: a slow start (polls answering "creating"), stop and
// start, expiry (the sandbox vanishes: 404), injected error answers, a create whose answer is
// lost, an exec whose connection drops mid-command; and per-route request counters.
package daytonafake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one fake Daytona.
type Server struct {
	// APIURL is the control plane's base (…/api); ToolboxURL the toolboxProxyUrl it answers.
	APIURL, ToolboxURL string
	// APIKey is the one Bearer token accepted.
	APIKey string

	srv  *httptest.Server
	root string

	mu        sync.Mutex
	sandboxes map[string]*box
	counts    map[string]int
	// knobs
	slowStart   int
	failStatus  int
	failLeft    int
	loseCreate  bool
	dropExec    bool
	omitToolbox bool
}

type box struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels"`
	Env       map[string]string `json:"env"`
	CreatedAt string            `json:"createdAt"`
	// Create is what the client asked for, as sent.
	Create  map[string]any `json:"-"`
	dir     string
	pending int // polls still answering creating/starting
}

// New starts a fake on 127.0.0.1, closed when t ends.
func New(t testing.TB) *Server {
	s := &Server{APIKey: "dtn_test_" + token(), root: t.TempDir(), sandboxes: map[string]*box{}, counts: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.APIURL = s.srv.URL + "/api"
	s.ToolboxURL = s.srv.URL + "/toolbox"
	return s
}

func token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SlowStart makes every new or started sandbox answer "creating"/"starting" for n polls.
func (s *Server) SlowStart(n int) { s.mu.Lock(); s.slowStart = n; s.mu.Unlock() }

// Fail answers the next n requests with status (429 gets a Retry-After).
func (s *Server) Fail(status, n int) {
	s.mu.Lock()
	s.failStatus, s.failLeft = status, n
	s.mu.Unlock()
}

// LoseNextCreate makes the next POST /sandbox create the sandbox and then drop the
// connection without answering.
func (s *Server) LoseNextCreate() { s.mu.Lock(); s.loseCreate = true; s.mu.Unlock() }

// DropNextExec makes the next /process/execute start its command and drop the connection
// before it finishes.
func (s *Server) DropNextExec() { s.mu.Lock(); s.dropExec = true; s.mu.Unlock() }

// OmitToolboxURL leaves toolboxProxyUrl out of sandboxes (older APIs): clients ask
// GET /sandbox/{id}/toolbox-proxy-url.
func (s *Server) OmitToolboxURL() { s.mu.Lock(); s.omitToolbox = true; s.mu.Unlock() }

// Expire deletes a sandbox behind the client's back (auto-delete): it answers 404 after.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sandboxes[id]; ok {
		delete(s.sandboxes, id)
		_ = os.RemoveAll(b.dir)
	}
}

// SetState forces a sandbox's state (stopped, archived, error…).
func (s *Server) SetState(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sandboxes[id]; ok {
		b.State = state
	}
}

// State is a sandbox's state, "" when it does not exist.
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sandboxes[id]; ok {
		return b.State
	}
	return ""
}

// Sandboxes are the ids of the sandboxes that exist.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

// CreateRequest is the CreateSandbox body the sandbox was made from.
func (s *Server) CreateRequest(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sandboxes[id]; ok {
		return b.Create
	}
	return nil
}

// Requests counts the requests answered per route ("POST /process/execute"), and the total
// under "".
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// ResetRequests zeroes the counters.
func (s *Server) ResetRequests() { s.mu.Lock(); s.counts = map[string]int{}; s.mu.Unlock() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	route := routeOf(r)
	s.mu.Lock()
	s.counts[r.Method+" "+route]++
	s.counts[""]++
	injected := 0
	if s.failLeft > 0 {
		s.failLeft--
		injected = s.failStatus
	}
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		fail(w, http.StatusUnauthorized, "Invalid credentials")
		return
	}
	if injected != 0 {
		if injected == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		fail(w, injected, "injected failure")
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		s.api(w, r, strings.TrimPrefix(r.URL.Path, "/api"))
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/toolbox/"), "/")
		s.toolbox(w, r, id, "/"+rest)
	default:
		fail(w, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

// routeOf names a request's route with the ids taken out.
func routeOf(r *http.Request) string {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/toolbox/"); ok {
		_, tail, _ := strings.Cut(rest, "/")
		return "/" + tail
	}
	parts := strings.Split(strings.TrimPrefix(p, "/api"), "/")
	if len(parts) > 2 {
		parts[2] = "{id}"
	}
	return strings.Join(parts, "/")
}

func (s *Server) view(b *box) map[string]any {
	v := map[string]any{"id": b.ID, "name": b.Name, "state": b.State, "labels": b.Labels, "env": b.Env,
		"createdAt": b.CreatedAt, "organizationId": "org-fake", "target": "us", "user": "daytona", "public": false,
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3}
	if !s.omitToolbox {
		v["toolboxProxyUrl"] = s.ToolboxURL
	}
	return v
}

func (s *Server) api(w http.ResponseWriter, r *http.Request, p string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if parts[0] != "sandbox" {
		fail(w, http.StatusNotFound, "Cannot "+r.Method+" "+p)
		return
	}
	if len(parts) == 1 {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r)
		case http.MethodPost:
			s.create(w, r)
		default:
			fail(w, http.StatusMethodNotAllowed, "method not allowed")
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookup(parts[1])
	if b == nil {
		fail(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", parts[1]))
		return
	}
	switch action := strings.Join(parts[2:], "/"); {
	case action == "" && r.Method == http.MethodGet:
		if b.pending > 0 {
			b.pending--
			if b.pending == 0 {
				b.State = "started"
			}
		}
		writeJSON(w, http.StatusOK, s.view(b))
	case action == "" && r.Method == http.MethodDelete:
		delete(s.sandboxes, b.ID)
		_ = os.RemoveAll(b.dir)
		w.WriteHeader(http.StatusOK)
	case action == "start" && r.Method == http.MethodPost:
		if b.State == "stopped" || b.State == "archived" {
			b.State, b.pending = "starting", s.slowStart+1
		}
		writeJSON(w, http.StatusOK, s.view(b))
	case action == "stop" && r.Method == http.MethodPost:
		if b.State != "started" {
			fail(w, http.StatusBadRequest, "Sandbox is not started")
			return
		}
		b.State = "stopped"
		w.WriteHeader(http.StatusOK)
	case action == "toolbox-proxy-url" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"url": s.ToolboxURL})
	default:
		fail(w, http.StatusNotFound, "Cannot "+r.Method+" "+p)
	}
}

func (s *Server) lookup(idOrName string) *box {
	if b, ok := s.sandboxes[idOrName]; ok {
		return b
	}
	for _, b := range s.sandboxes {
		if b.Name == idOrName {
			return b
		}
	}
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	var want map[string]string
	if l := r.URL.Query().Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			fail(w, http.StatusBadRequest, "labels must be a JSON object")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, b := range s.sandboxes {
		ok := true
		for k, v := range want {
			ok = ok && b.Labels[k] == v
		}
		if ok {
			out = append(out, s.view(b))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req struct {
		Name   string            `json:"name"`
		Env    map[string]string `json:"env"`
		Labels map[string]string `json:"labels"`
	}
	var asSent map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err == nil {
		err = json.Unmarshal(raw, &asSent)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid body")
		return
	}
	s.mu.Lock()
	if req.Name != "" && s.lookup(req.Name) != nil {
		s.mu.Unlock()
		fail(w, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		return
	}
	id := uuid()
	b := &box{ID: id, Name: req.Name, State: "creating", Labels: req.Labels, Env: req.Env, Create: asSent,
		CreatedAt: time.Now().UTC().Add(-time.Hour).Format(time.RFC3339Nano), dir: filepath.Join(s.root, id), pending: s.slowStart + 1}
	if b.Name == "" {
		b.Name = id
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "home", "daytona"), 0o700); err != nil {
		s.mu.Unlock()
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.sandboxes[id] = b
	lose := s.loseCreate
	s.loseCreate = false
	view := s.view(b)
	s.mu.Unlock()
	if lose {
		hangUp(w)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// SetCreatedAt backdates (or postdates) a sandbox, for the orphan sweep's grace.
func (s *Server) SetCreatedAt(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.sandboxes[id]; ok {
		b.CreatedAt = at.UTC().Format(time.RFC3339Nano)
	}
}

func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
		}
	}
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// toolbox serves the daemon's API of one sandbox, through the proxy.
func (s *Server) toolbox(w http.ResponseWriter, r *http.Request, id, p string) {
	s.mu.Lock()
	b, ok := s.sandboxes[id]
	var state, dir string
	var env map[string]string
	if ok {
		state, dir, env = b.State, b.dir, b.Env
	}
	drop := false
	if ok && p == "/process/execute" {
		drop, s.dropExec = s.dropExec, false
	}
	s.mu.Unlock()
	switch {
	case !ok:
		fail(w, http.StatusNotFound, "sandbox not found")
		return
	case state != "started":
		fail(w, http.StatusBadRequest, "sandbox is not started")
		return
	}
	switch {
	case p == "/work-dir" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"dir": filepath.Join(dir, "home", "daytona")})
	case p == "/process/execute" && r.Method == http.MethodPost:
		s.execute(w, r, dir, env, drop)
	case p == "/files/download" && r.Method == http.MethodGet:
		path, ok := inside(dir, r.URL.Query().Get("path"))
		if !ok {
			fail(w, http.StatusBadRequest, "path outside the fake sandbox")
			return
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			fail(w, http.StatusNotFound, "file not found")
			return
		case err != nil:
			fail(w, http.StatusBadRequest, err.Error())
			return
		case !info.Mode().IsRegular():
			fail(w, http.StatusBadRequest, "not a regular file")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeFile(w, r, path)
	case p == "/files/upload" && r.Method == http.MethodPost:
		path, ok := inside(dir, r.URL.Query().Get("path"))
		if !ok {
			fail(w, http.StatusBadRequest, "path outside the fake sandbox")
			return
		}
		if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
			fail(w, http.StatusBadRequest, "not a regular file")
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			fail(w, http.StatusBadRequest, "multipart part file is required")
			return
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"message": "File uploaded successfully"})
	default:
		fail(w, http.StatusNotFound, "404 page not found")
	}
}

// inside maps a sandbox path onto the host: the fake only touches its sandbox's directory.
func inside(dir, p string) (string, bool) {
	c := filepath.Clean(p)
	return c, filepath.IsAbs(c) && (c == dir || strings.HasPrefix(c, dir+string(filepath.Separator)))
}

// execute runs ExecuteRequest as the daemon does: words split, no shell, its own process
// group, the timeout (10 s unless given) killing the group, stdout and stderr merged into one
// buffer, so the answer waits until every process holding the output has closed it.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, dir string, env map[string]string, drop bool) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout *int              `json:"timeout"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil || req.Command == "" {
		fail(w, http.StatusBadRequest, "command is required")
		return
	}
	words, err := splitWords(req.Command)
	if err != nil || len(words) == 0 {
		fail(w, http.StatusBadRequest, "invalid command")
		return
	}
	timeout := 10 * time.Second
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, words[0], words[1:]...)
	cmd.Dir = filepath.Join(dir, "home", "daytona")
	if req.Cwd != "" {
		cmd.Dir = req.Cwd
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home", "daytona"), "LANG=C.UTF-8"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range req.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if drop {
		_ = cmd.Start()
		hangUp(w)
		go func() { _ = cmd.Wait() }()
		return
	}
	err = cmd.Run()
	if ctx.Err() != nil {
		fail(w, http.StatusRequestTimeout, "command execution timeout")
		return
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		code = -1
	}
	writeJSON(w, http.StatusOK, map[string]any{"exitCode": code, "result": out.String()})
}

// splitWords splits a command line into words as the daemon's parseCommand does: words end
// at spaces outside quotes, a quote (' or ") opens a quoted run ended by the same quote, the
// other quote inside it is literal, and nothing escapes (a backslash is a plain character).
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case (r == '"' || r == '\'') && quote == 0:
			quote = r
		case r == quote:
			quote = 0
		case r == ' ' && quote == 0:
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if quote != 0 {
		// The daemon keeps what it has; refusing is clearer and no client of ours sends it.
		return nil, errors.New("unterminated quote")
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words, nil
}
