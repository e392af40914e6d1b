// Package e2bfake is a local fake of E2B's service for tests: the control plane of
// spec/openapi.yml (create, get, list v2 with metadata filters, kill, connect/resume, pause,
// timeout) and envd's data plane in the client-proxy form (one address routing by the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers): GET /health, GET/POST /files and the
// Connect-RPC process service (Start streaming, SendSignal) served by connect-go with a
// strict JSON codec. Each sandbox is a temporary directory standing in for the workspace
// directory; commands run there for real (bash, their own session, stdout and stderr
// streamed as written), as the sandbox's user would run them.
//
// Auth is checked (X-API-Key, or Bearer for the CubeSandbox flavour; X-Access-Token for
// secure sandboxes; the Basic-auth user envd before 0.4.0 requires), time to live expires
// (a killed sandbox is 404, an auto-paused one paused), and knobs inject failures: answers
// with a status, a slow start, a dropped exec stream, a lost create answer. Every request is
// counted by route.
package e2bfake

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// Options configure a Fake.
type Options struct {
	// APIKey is the key the control plane accepts.
	APIKey string
	// Bearer accepts the key as `Authorization: Bearer` too (CubeAPI).
	Bearer bool
	// EnvdVersion is what sandboxes report ("0.2.0" for CubeSandbox); default "0.5.7".
	EnvdVersion string
	// Workspace is the absolute directory of the sandboxes the temporary directories stand
	// for (default /home/user): envd paths and working directories are read under it.
	Workspace string
	// Dir holds the sandboxes' directories.
	Dir string
	// Domain is reported in Sandbox.domain.
	Domain string
}

// Fake is the fake service. Its exported methods are safe for concurrent use.
type Fake struct {
	opts Options
	api  *httptest.Server
	envd *httptest.Server

	mu        sync.Mutex
	sandboxes map[string]*sbox
	counts    map[string]int
	users     map[string]int
	faults    []fault
	slowStart int
	dropExec  int
	loseNext  int
	now       func() time.Time
}

type fault struct {
	match  string
	status int
	left   int
}

type sbox struct {
	id, template string
	dir          string
	token        string
	envdVersion  string
	metadata     map[string]string
	env          map[string]string
	state        string
	autoPause    bool
	started, end time.Time
	slowLeft     int
	allowNet     *bool
	network      *networkConfig
	procs        map[uint32]*exec.Cmd
	sessions     []int
}

// New starts the fake on 127.0.0.1; Close stops it and every command it runs.
func New(opts Options) *Fake {
	if opts.EnvdVersion == "" {
		opts.EnvdVersion = "0.5.7"
	}
	if opts.Workspace == "" {
		opts.Workspace = "/home/user"
	}
	if opts.Domain == "" {
		opts.Domain = "e2b.local"
	}
	f := &Fake{opts: opts, sandboxes: map[string]*sbox{}, counts: map[string]int{}, users: map[string]int{}, now: time.Now}
	f.api = httptest.NewServer(http.HandlerFunc(f.serveAPI))
	mux := http.NewServeMux()
	mux.Handle("/process.Process/Start", connect.NewServerStreamHandler("/process.Process/Start", f.start, connect.WithCodec(strictCodec{})))
	mux.Handle("/process.Process/SendSignal", connect.NewUnaryHandler("/process.Process/SendSignal", f.sendSignal, connect.WithCodec(strictCodec{})))
	mux.HandleFunc("GET /health", f.health)
	mux.HandleFunc("GET /files", f.readFile)
	mux.HandleFunc("POST /files", f.writeFile)
	f.envd = httptest.NewServer(f.routeEnvd(mux))
	return f
}

// URL is the control plane's base URL.
func (f *Fake) URL() string { return f.api.URL }

// EnvdURL is the data plane's client-proxy base URL.
func (f *Fake) EnvdURL() string { return f.envd.URL }

// Close kills every sandbox's commands and stops the servers.
func (f *Fake) Close() {
	f.mu.Lock()
	for _, s := range f.sandboxes {
		s.killAll()
	}
	f.mu.Unlock()
	f.api.CloseClientConnections()
	f.envd.CloseClientConnections()
	f.api.Close()
	f.envd.Close()
}

// Count is how many requests route got ("POST /sandboxes", "GET /v2/sandboxes",
// "POST /sandboxes/{id}/connect", "POST /process.Process/Start", "POST /files", ...).
func (f *Fake) Count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[route]
}

// Counts is a copy of every route's count.
func (f *Fake) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// Total is the number of requests so far, both planes.
func (f *Fake) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.counts {
		n += v
	}
	return n
}

// Users counts the envd users the data plane saw (Basic auth), "" for none.
func (f *Fake) Users() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.users {
		out[k] = v
	}
	return out
}

// Fail makes the next n requests whose route starts with match answer status (with
// Retry-After: 0 for 429).
func (f *Fake) Fail(match string, status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault{match: match, status: status, left: n})
}

// SlowStart makes every sandbox created from now on answer 503 to its first n health checks.
func (f *Fake) SlowStart(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slowStart = n
}

// DropExec cuts the next n Start streams right after their start event; the command runs on,
// as envd's does when its client goes.
func (f *Fake) DropExec(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropExec += n
}

// LoseCreate makes the next n creates make their sandbox and then close the connection
// without an answer.
func (f *Fake) LoseCreate(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseNext += n
}

// Expire runs out sandbox id's time to live now: it is paused if it was created with
// autoPause, else killed.
func (f *Fake) Expire(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[id]; ok && s.state == "running" {
		s.end = f.now().Add(-time.Second)
		f.expireLocked()
	}
}

// Sandbox is what a test may inspect of a sandbox.
type Sandbox struct {
	ID, Template, State string
	Dir                 string
	Metadata, Env       map[string]string
	AutoPause           bool
	End                 time.Time
	AllowInternetAccess *bool
	AllowOut, DenyOut   []string
}

// Sandboxes lists the sandboxes that exist (running or paused), by id.
func (f *Fake) Sandboxes() []Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expireLocked()
	var out []Sandbox
	for _, s := range f.sandboxes {
		sb := Sandbox{ID: s.id, Template: s.template, State: s.state, Dir: s.dir, Metadata: s.metadata, Env: s.env,
			AutoPause: s.autoPause, End: s.end, AllowInternetAccess: s.allowNet}
		if s.network != nil {
			sb.AllowOut, sb.DenyOut = s.network.AllowOut, s.network.DenyOut
		}
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Put makes a sandbox directly (an orphan of another worker, say) and returns its id.
func (f *Fake) Put(metadata map[string]string, started time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.newSandboxLocked("base", metadata, nil, false)
	s.started = started
	return s.id
}

var idPattern = regexp.MustCompile(`^/sandboxes/([a-z0-9]+)(/[a-z]+)?$`)

// route names a request for the counters.
func route(method, p string) string {
	if m := idPattern.FindStringSubmatch(p); m != nil {
		return method + " /sandboxes/{id}" + m[2]
	}
	return method + " " + p
}

// take counts the request and returns an injected failure for it, if any.
func (f *Fake) take(r *http.Request) int {
	name := route(r.Method, r.URL.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[name]++
	for i := range f.faults {
		if fl := &f.faults[i]; fl.left > 0 && strings.HasPrefix(name, fl.match) {
			fl.left--
			return fl.status
		}
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "0")
	}
	writeJSON(w, status, apiError{Code: status, Message: fmt.Sprintf(format, args...)})
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (f *Fake) authorized(r *http.Request) bool {
	if f.opts.APIKey == "" {
		return true
	}
	if r.Header.Get("X-API-Key") == f.opts.APIKey {
		return true
	}
	return f.opts.Bearer && r.Header.Get("Authorization") == "Bearer "+f.opts.APIKey
}

func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request) {
	if st := f.take(r); st != 0 {
		writeError(w, st, "injected failure")
		return
	}
	if !f.authorized(r) {
		writeError(w, http.StatusUnauthorized, "Invalid API key")
		return
	}
	switch m := idPattern.FindStringSubmatch(r.URL.Path); {
	case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
		f.create(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sandboxes":
		f.list(w, r)
	case m != nil:
		f.sandboxOp(w, r, m[1], strings.TrimPrefix(m[2], "/"))
	default:
		writeError(w, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *Fake) newSandboxLocked(template string, metadata, env map[string]string, autoPause bool) *sbox {
	id := "i" + randomHex(10)
	dir := filepath.Join(f.opts.Dir, id)
	_ = os.MkdirAll(dir, 0o700)
	now := f.now()
	s := &sbox{id: id, template: template, dir: dir, token: randomHex(16), envdVersion: f.opts.EnvdVersion,
		metadata: metadata, env: env, state: "running", autoPause: autoPause, started: now, end: now.Add(5 * time.Minute),
		slowLeft: f.slowStart, procs: map[uint32]*exec.Cmd{}}
	f.sandboxes[id] = s
	return s
}

func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid body: %v", err)
		return
	}
	if req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	if req.TemplateID == "missing" {
		writeError(w, http.StatusNotFound, "template '%s' not found", req.TemplateID)
		return
	}
	f.mu.Lock()
	autoPause := req.AutoPause != nil && *req.AutoPause || req.Lifecycle != nil && req.Lifecycle.OnTimeout == "pause"
	s := f.newSandboxLocked(req.TemplateID, req.Metadata, req.EnvVars, autoPause)
	if req.Timeout != nil {
		s.end = s.started.Add(time.Duration(*req.Timeout) * time.Second)
	} else {
		s.end = s.started.Add(15 * time.Second)
	}
	if req.Secure != nil && !*req.Secure {
		s.token = ""
	}
	s.allowNet, s.network = req.AllowInternetAccess, req.Network
	lose := f.loseNext > 0
	if lose {
		f.loseNext--
	}
	body := f.sandboxJSON(s)
	f.mu.Unlock()
	if lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	writeJSON(w, http.StatusCreated, body)
}

func (f *Fake) sandboxJSON(s *sbox) sandboxJSON {
	out := sandboxJSON{TemplateID: s.template, SandboxID: s.id, ClientID: "fake", EnvdVersion: s.envdVersion, Domain: &f.opts.Domain}
	if s.token != "" {
		tok := s.token
		out.EnvdAccessToken = &tok
	}
	return out
}

func (f *Fake) detailJSON(s *sbox) detailJSON {
	return detailJSON{TemplateID: s.template, SandboxID: s.id, ClientID: "fake", StartedAt: s.started, EndAt: s.end,
		CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024, EnvdVersion: s.envdVersion, Metadata: s.metadata, State: s.state,
		AllowInternetAccess: s.allowNet, Network: s.network}
}

// expireLocked applies every running sandbox's time to live.
func (f *Fake) expireLocked() {
	now := f.now()
	for id, s := range f.sandboxes {
		if s.state != "running" || now.Before(s.end) {
			continue
		}
		if s.autoPause {
			s.state = "paused"
			continue
		}
		s.killAll()
		_ = os.RemoveAll(s.dir)
		delete(f.sandboxes, id)
	}
}

// lookupLocked is the sandbox id after expiry, or nil.
func (f *Fake) lookupLocked(id string) *sbox {
	f.expireLocked()
	return f.sandboxes[id]
}

func (f *Fake) sandboxOp(w http.ResponseWriter, r *http.Request, id, op string) {
	var body struct {
		Timeout *int  `json:"timeout,omitempty"`
		Memory  *bool `json:"memory,omitempty"`
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		if err := decodeStrict(r, &body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "invalid body: %v", err)
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.lookupLocked(id)
	if s == nil {
		writeError(w, http.StatusNotFound, "sandbox '%s' not found", id)
		return
	}
	switch {
	case r.Method == http.MethodGet && op == "":
		writeJSON(w, http.StatusOK, f.detailJSON(s))
	case r.Method == http.MethodDelete && op == "":
		s.killAll()
		_ = os.RemoveAll(s.dir)
		delete(f.sandboxes, id)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && op == "connect":
		if body.Timeout == nil {
			writeError(w, http.StatusBadRequest, "timeout is required")
			return
		}
		status := http.StatusOK
		if s.state == "paused" {
			s.state, s.slowLeft, status = "running", f.slowStart, http.StatusCreated
		}
		s.end = f.now().Add(time.Duration(*body.Timeout) * time.Second)
		writeJSON(w, status, f.sandboxJSON(s))
	case r.Method == http.MethodPost && op == "timeout":
		if body.Timeout == nil {
			writeError(w, http.StatusBadRequest, "timeout is required")
			return
		}
		if s.state != "running" {
			writeError(w, http.StatusNotFound, "sandbox '%s' is not running", id)
			return
		}
		s.end = f.now().Add(time.Duration(*body.Timeout) * time.Second)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && op == "pause":
		if s.state == "paused" {
			writeError(w, http.StatusConflict, "sandbox '%s' is already paused", id)
			return
		}
		s.state = "paused"
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
	}
}

// list is GET /v2/sandboxes: metadata is "k=v&k2=v2" with each key and value URL-encoded,
// state an array; pages of limit by id, X-Next-Token the next page's start.
func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want := map[string]string{}
	if m := q.Get("metadata"); m != "" {
		for pair := range strings.SplitSeq(m, "&") {
			k, v, ok := strings.Cut(pair, "=")
			ku, err1 := url.QueryUnescape(k)
			vu, err2 := url.QueryUnescape(v)
			if !ok || err1 != nil || err2 != nil {
				writeError(w, http.StatusBadRequest, "invalid metadata query %q", m)
				return
			}
			want[ku] = vu
		}
	}
	// state is an exploded form array (state=running&state=paused); a comma list is read too.
	var states []string
	for _, v := range q["state"] {
		states = append(states, strings.Split(v, ",")...)
	}
	if len(states) == 0 {
		states = []string{"running", "paused"}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "invalid limit %q", l)
			return
		}
		limit = n
	}
	f.mu.Lock()
	f.expireLocked()
	var out []detailJSON
	for _, s := range f.sandboxes {
		if !slices.Contains(states, s.state) {
			continue
		}
		match := true
		for k, v := range want {
			if s.metadata[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, f.detailJSON(s))
		}
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b detailJSON) int { return strings.Compare(a.SandboxID, b.SandboxID) })
	if next := q.Get("nextToken"); next != "" {
		i, _ := slices.BinarySearchFunc(out, next, func(d detailJSON, id string) int { return strings.Compare(d.SandboxID, id) })
		out = out[i:]
	}
	if len(out) > limit {
		w.Header().Set("X-Next-Token", out[limit].SandboxID)
		out = out[:limit]
	}
	if out == nil {
		out = []detailJSON{}
	}
	writeJSON(w, http.StatusOK, out)
}

// sandboxKey carries the sandbox a data-plane request was routed to.
type sandboxKey struct{}

// routeEnvd is the client-proxy: it routes by headers to a running sandbox and checks its
// access token and user, as envd does.
func (f *Fake) routeEnvd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st := f.take(r); st != 0 {
			writeError(w, st, "injected failure")
			return
		}
		id := r.Header.Get("E2b-Sandbox-Id")
		if r.Header.Get("E2b-Sandbox-Port") != "49983" {
			writeError(w, http.StatusBadGateway, "no port %q on sandbox %q", r.Header.Get("E2b-Sandbox-Port"), id)
			return
		}
		f.mu.Lock()
		s := f.lookupLocked(id)
		var state, token, version string
		if s != nil {
			state, token, version = s.state, s.token, s.envdVersion
		}
		f.mu.Unlock()
		switch {
		case s == nil:
			writeError(w, http.StatusBadGateway, "The sandbox %s was not found", id)
			return
		case state != "running":
			writeError(w, http.StatusBadGateway, "The sandbox %s is paused", id)
			return
		case token != "" && r.Header.Get("X-Access-Token") != token:
			writeError(w, http.StatusUnauthorized, "invalid access token")
			return
		}
		user := ""
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic "); ok {
			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil || !strings.HasSuffix(string(raw), ":") {
				writeError(w, http.StatusUnauthorized, "invalid basic auth")
				return
			}
			user = strings.TrimSuffix(string(raw), ":")
		}
		f.mu.Lock()
		f.users[user]++
		f.mu.Unlock()
		if user == "" && !versionAtLeast(version, 0, 4, 0) {
			// envd before 0.4.0 has no default user.
			writeError(w, http.StatusUnauthorized, "user not specified")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, s)))
	})
}

// versionAtLeast compares "major.minor.patch" versions.
func versionAtLeast(v string, want ...int) bool {
	parts := strings.Split(v, ".")
	for i, w := range want {
		n := 0
		if i < len(parts) {
			n, _ = strconv.Atoi(parts[i])
		}
		if n != w {
			return n > w
		}
	}
	return true
}

func (f *Fake) health(w http.ResponseWriter, r *http.Request) {
	s := r.Context().Value(sandboxKey{}).(*sbox)
	f.mu.Lock()
	slow := s.slowLeft > 0
	if slow {
		s.slowLeft--
	}
	f.mu.Unlock()
	if slow {
		writeError(w, http.StatusServiceUnavailable, "envd is starting")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// hostPath maps an envd path (absolute under the workspace, or relative to it as to the
// user's home) onto the sandbox's directory. Paths elsewhere are refused: the fake has no
// file system besides the workspace.
func (f *Fake) hostPath(s *sbox, p string) (string, bool) {
	if !path.IsAbs(p) {
		p = path.Join(f.opts.Workspace, p)
	}
	p = path.Clean(p)
	if p == f.opts.Workspace {
		return s.dir, true
	}
	rel, ok := strings.CutPrefix(p, f.opts.Workspace+"/")
	if !ok {
		return "", false
	}
	return filepath.Join(s.dir, filepath.FromSlash(rel)), true
}

func (f *Fake) readFile(w http.ResponseWriter, r *http.Request) {
	s := r.Context().Value(sandboxKey{}).(*sbox)
	p, ok := f.hostPath(s, r.URL.Query().Get("path"))
	if !ok {
		writeError(w, http.StatusBadRequest, "path %q is outside the fake's file system", r.URL.Query().Get("path"))
		return
	}
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		writeError(w, http.StatusNotFound, "path '%s' does not exist", r.URL.Query().Get("path"))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	case info.IsDir():
		writeError(w, http.StatusBadRequest, "path '%s' is a directory", r.URL.Query().Get("path"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeFile(w, r, p)
}

func (f *Fake) writeFile(w http.ResponseWriter, r *http.Request) {
	s := r.Context().Value(sandboxKey{}).(*sbox)
	raw := r.URL.Query().Get("path")
	p, ok := f.hostPath(s, raw)
	if !ok {
		writeError(w, http.StatusBadRequest, "path %q is outside the fake's file system", raw)
		return
	}
	var data io.Reader
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case ct == "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				writeError(w, http.StatusBadRequest, "no part named file")
				return
			}
			if part.FormName() == "file" {
				data = part
				break
			}
		}
	case ct == "application/octet-stream" && versionAtLeast(s.envdVersion, 0, 5, 7):
		data = r.Body
	default:
		writeError(w, http.StatusBadRequest, "unsupported content type %q for envd %s", ct, s.envdVersion)
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	_, err = io.Copy(out, io.LimitReader(data, 100<<20))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, []map[string]string{{"path": raw, "name": path.Base(raw), "type": "file"}})
}
