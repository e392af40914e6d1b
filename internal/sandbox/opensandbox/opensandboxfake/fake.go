// Package opensandboxfake is a local OpenSandbox for tests: the lifecycle API
// (specs/sandbox-lifecycle.yml) and, behind the server proxy, each sandbox's execd
// (specs/execd-api.yaml), on 127.0.0.1. It speaks the published wire format (paths, the
// OPEN-SANDBOX-API-KEY and X-EXECD-ACCESS-TOKEN headers, JSON field names, status codes, and
// execd's command stream: one JSON ServerStreamEvent per line followed by a blank line, as
// execd writes it, or SSE `data:` frames when SSEData is set). Each sandbox is a temporary
// directory (its HOME) where commands run for real with bash, in their own process group.
//
// Failure knobs: FailNext (answers of the lifecycle API), FailExecd, DropCreates (a sandbox is
// made but the connection is closed before the answer), DropCommands (the command stream is
// cut after its first output), Expire (the sandbox is gone: 404), StartDelay (Pending, and
// Pausing/Resuming, last that long). Count tells how many requests of each kind arrived.
//
// It is a test double: commands run unconfined as the test's user.
package opensandboxfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RouteHeader is the header the endpoint API tells clients to send with every execd
// request (the server proxy routes on it, as the Kubernetes ingress does).
const RouteHeader = "OpenSandbox-Ingress-To"

// Options configure a Server.
type Options struct {
	// APIKey is required as OPEN-SANDBOX-API-KEY when set; ExecdToken as
	// X-EXECD-ACCESS-TOKEN.
	APIKey, ExecdToken string
	// StartDelay is how long a new sandbox stays Pending (and a pause or resume in progress).
	StartDelay time.Duration
	// SSEData frames command events as SSE `data:` lines instead of bare JSON lines.
	SSEData bool
}

// Server is the fake.
type Server struct {
	opts Options
	root string
	srv  *httptest.Server

	mu           sync.Mutex
	boxes        map[string]*box
	counts       map[string]int
	failNext     []int
	failExecd    map[string][]int
	dropCreates  int
	dropCommands int
}

type box struct {
	id        string
	metadata  map[string]string
	env       map[string]string
	policy    json.RawMessage
	limits    map[string]string
	created   time.Time
	expires   *time.Time
	state     string
	next      string
	until     time.Time
	dir       string
	running   map[string]*exec.Cmd
	destroyed bool
}

// Start starts a fake on 127.0.0.1 whose sandboxes live under a temporary directory of t;
// it is stopped when t ends.
func Start(t testing.TB, o Options) *Server {
	s := &Server{opts: o, root: t.TempDir(), boxes: map[string]*box{}, counts: map[string]int{}, failExecd: map[string][]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", s.lifecycle("POST /sandboxes", s.create))
	mux.HandleFunc("GET /v1/sandboxes", s.lifecycle("GET /sandboxes", s.list))
	mux.HandleFunc("GET /v1/sandboxes/{id}", s.lifecycle("GET /sandboxes/{id}", s.get))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", s.lifecycle("DELETE /sandboxes/{id}", s.delete))
	mux.HandleFunc("POST /v1/sandboxes/{id}/pause", s.lifecycle("POST /sandboxes/{id}/pause", s.pause))
	mux.HandleFunc("POST /v1/sandboxes/{id}/resume", s.lifecycle("POST /sandboxes/{id}/resume", s.resume))
	mux.HandleFunc("POST /v1/sandboxes/{id}/renew-expiration", s.lifecycle("POST /sandboxes/{id}/renew-expiration", s.renew))
	mux.HandleFunc("GET /v1/sandboxes/{id}/endpoints/{port}", s.lifecycle("GET /sandboxes/{id}/endpoints/{port}", s.endpoint))
	mux.HandleFunc("/sandboxes/{id}/port/{port}/{rest...}", s.execd)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// URL is the lifecycle API's base (…/v1).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server and kills every command still running.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.boxes {
		b.killAll()
	}
}

// Count is how many requests of kind ("POST /sandboxes", "POST /command", "GET
// /files/download", …) arrived, refused ones included.
func (s *Server) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// Counts returns every count.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

// Total is the number of requests of every kind.
func (s *Server) Total() int {
	n := 0
	for _, c := range s.Counts() {
		n += c
	}
	return n
}

// FailNext answers the next lifecycle requests with these statuses, one each.
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = append(s.failNext, statuses...)
}

// FailExecd answers the next execd requests of kind ("POST /command", "GET
// /files/download", …) with these statuses, one each.
func (s *Server) FailExecd(kind string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failExecd[kind] = append(s.failExecd[kind], statuses...)
}

// DropCreates makes the next n creates make their sandbox and hang up without an answer.
func (s *Server) DropCreates(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropCreates += n
}

// DropCommands cuts the stream of the next n commands after their first output event.
func (s *Server) DropCommands(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropCommands += n
}

// Expire makes the sandbox expire now: it is gone (404) from then on.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.boxes[id]; b != nil {
		past := time.Now().Add(-time.Second)
		b.expires = &past
	}
}

// Sandbox is what a test may inspect of a sandbox.
type Sandbox struct {
	ID, State, Dir string
	Metadata, Env  map[string]string
	Limits         map[string]string
	NetworkPolicy  json.RawMessage
	Expires        *time.Time
}

// Sandboxes lists the sandboxes that exist, oldest first.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sandbox
	for _, b := range s.live() {
		out = append(out, Sandbox{ID: b.id, State: b.state, Dir: b.dir, Metadata: maps.Clone(b.metadata), Env: maps.Clone(b.env),
			Limits: maps.Clone(b.limits), NetworkPolicy: b.policy, Expires: b.expires})
	}
	return out
}

// live advances every sandbox's state and drops the expired ones (mu held).
func (s *Server) live() []*box {
	now := time.Now()
	var out []*box
	for id, b := range s.boxes {
		if b.expires != nil && now.After(*b.expires) {
			b.killAll()
			_ = os.RemoveAll(b.dir)
			delete(s.boxes, id)
			continue
		}
		if b.next != "" && !now.Before(b.until) {
			b.state, b.next = b.next, ""
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *box) int { return a.created.Compare(b.created) })
	return out
}

// lookup returns the live sandbox of id (mu held).
func (s *Server) lookup(id string) *box {
	for _, b := range s.live() {
		if b.id == id {
			return b
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	writeJSON(w, status, map[string]string{"code": code, "message": fmt.Sprintf(format, args...)})
}

// lifecycle counts, authenticates and applies the failure knob before h.
func (s *Server) lifecycle(kind string, h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[kind]++
		fail := 0
		if len(s.failNext) > 0 {
			fail, s.failNext = s.failNext[0], s.failNext[1:]
		}
		s.mu.Unlock()
		if s.opts.APIKey != "" && r.Header.Get("OPEN-SANDBOX-API-KEY") != s.opts.APIKey {
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or invalid API key")
			return
		}
		if fail != 0 {
			writeError(w, fail, "INJECTED", "injected failure %d", fail)
			return
		}
		h(w, r)
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

type sandboxJSON struct {
	ID         string            `json:"id"`
	Status     map[string]string `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
}

func (b *box) json() sandboxJSON {
	return sandboxJSON{ID: b.id, Status: map[string]string{"state": b.state}, Metadata: b.metadata,
		Entrypoint: []string{"tail", "-f", "/dev/null"}, ExpiresAt: b.expires, CreatedAt: b.created}
}

func validMetadata(m map[string]string) error {
	for k, v := range m {
		if strings.HasPrefix(k, "opensandbox.io/") {
			return fmt.Errorf("metadata key %q is reserved", k)
		}
		if len(v) > 63 || strings.ContainsAny(v, " /=&") {
			return fmt.Errorf("metadata value %q is not a label value", v)
		}
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Image *struct {
			URI string `json:"uri"`
		} `json:"image"`
		Entrypoint     []string          `json:"entrypoint"`
		Timeout        *int64            `json:"timeout"`
		ResourceLimits map[string]string `json:"resourceLimits"`
		Env            map[string]string `json:"env"`
		Metadata       map[string]string `json:"metadata"`
		NetworkPolicy  json.RawMessage   `json:"networkPolicy"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "invalid body: %v", err)
		return
	}
	switch {
	case req.Image == nil || req.Image.URI == "":
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "image.uri is required")
		return
	case len(req.Entrypoint) == 0:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "entrypoint is required with image")
		return
	case len(req.ResourceLimits) == 0:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "resourceLimits is required")
		return
	case req.Timeout != nil && *req.Timeout < 60:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "timeout must be at least 60 seconds")
		return
	}
	if err := validMetadata(req.Metadata); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "%v", err)
		return
	}
	id := newID()
	dir := filepath.Join(s.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "%v", err)
		return
	}
	now := time.Now()
	b := &box{id: id, metadata: req.Metadata, env: req.Env, policy: req.NetworkPolicy, limits: req.ResourceLimits,
		created: now, state: "Pending", next: "Running", until: now.Add(s.opts.StartDelay), dir: dir, running: map[string]*exec.Cmd{}}
	if req.Timeout != nil {
		exp := now.Add(time.Duration(*req.Timeout) * time.Second)
		b.expires = &exp
	}
	s.mu.Lock()
	s.boxes[id] = b
	drop := s.dropCreates > 0
	if drop {
		s.dropCreates--
	}
	out := b.json()
	s.mu.Unlock()
	if drop {
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, http.StatusAccepted, out)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "metadata filter: %v", err)
		return
	}
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("pageSize"))
	page, size = max(page, 1), max(size, 1)
	if size == 1 && q.Get("pageSize") == "" {
		size = 20
	}
	states := q["state"]
	s.mu.Lock()
	var items []sandboxJSON
	for _, b := range s.live() {
		ok := len(states) == 0 || slices.Contains(states, b.state)
		for k := range filter {
			if b.metadata[k] != filter.Get(k) {
				ok = false
			}
		}
		if ok {
			items = append(items, b.json())
		}
	}
	s.mu.Unlock()
	total := len(items)
	from, to := min((page-1)*size, total), min(page*size, total)
	writeJSON(w, http.StatusOK, map[string]any{
		"items": append([]sandboxJSON{}, items[from:to]...),
		"pagination": map[string]any{"page": page, "pageSize": size, "totalItems": total,
			"totalPages": (total + size - 1) / size, "hasNextPage": to < total},
	})
}

func (s *Server) withBox(w http.ResponseWriter, r *http.Request, fn func(*box) (int, any)) {
	s.mu.Lock()
	b := s.lookup(r.PathValue("id"))
	if b == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "NOT_FOUND", "sandbox %s not found", r.PathValue("id"))
		return
	}
	status, body := fn(b)
	s.mu.Unlock()
	if body == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) (int, any) { return http.StatusOK, b.json() })
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.withBox(w, r, func(b *box) (int, any) {
		b.killAll()
		b.destroyed = true
		_ = os.RemoveAll(b.dir)
		delete(s.boxes, b.id)
		return http.StatusNoContent, nil
	})
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request, from, via, to string) {
	s.withBox(w, r, func(b *box) (int, any) {
		if b.state != from {
			return http.StatusConflict, map[string]string{"code": "CONFLICT", "message": "sandbox is " + b.state}
		}
		b.state, b.next, b.until = via, to, time.Now().Add(s.opts.StartDelay)
		return http.StatusAccepted, nil
	})
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.transition(w, r, "Running", "Pausing", "Paused")
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	s.transition(w, r, "Paused", "Resuming", "Running")
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.ExpiresAt.After(time.Now()) {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "expiresAt must be a time in the future")
		return
	}
	s.withBox(w, r, func(b *box) (int, any) {
		b.expires = &req.ExpiresAt
		return http.StatusOK, map[string]any{"expiresAt": req.ExpiresAt}
	})
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) {
	host := strings.TrimPrefix(s.srv.URL, "http://")
	s.withBox(w, r, func(b *box) (int, any) {
		port := r.PathValue("port")
		return http.StatusOK, map[string]any{
			"endpoint": host + "/sandboxes/" + b.id + "/port/" + port,
			"headers":  map[string]string{RouteHeader: b.id + "-" + port},
		}
	})
}

// execd serves the execd API of one sandbox behind the proxy path.
func (s *Server) execd(w http.ResponseWriter, r *http.Request) {
	id, port, rest := r.PathValue("id"), r.PathValue("port"), r.PathValue("rest")
	kind := r.Method + " /" + rest
	s.mu.Lock()
	s.counts[kind]++
	fail := 0
	if q := s.failExecd[kind]; len(q) > 0 {
		fail, s.failExecd[kind] = q[0], q[1:]
	}
	b := s.lookup(id)
	state := ""
	if b != nil {
		state = b.state
	}
	s.mu.Unlock()
	switch {
	case r.Header.Get(RouteHeader) != id+"-"+port:
		writeError(w, http.StatusBadRequest, "NO_ROUTE", "missing or wrong %s header", RouteHeader)
		return
	case b == nil:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "sandbox %s not found", id)
		return
	case port != "44772":
		writeError(w, http.StatusBadGateway, "BAD_GATEWAY", "nothing listens on port %s", port)
		return
	case state != "Running":
		writeError(w, http.StatusBadGateway, "BAD_GATEWAY", "sandbox %s is %s", id, state)
		return
	case s.opts.ExecdToken != "" && r.Header.Get("X-EXECD-ACCESS-TOKEN") != s.opts.ExecdToken:
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or invalid access token")
		return
	case fail != 0:
		writeError(w, fail, "INJECTED", "injected failure %d", fail)
		return
	}
	switch kind {
	case "GET /ping":
		w.WriteHeader(http.StatusOK)
	case "POST /command":
		s.runCommand(w, r, b)
	case "DELETE /command":
		s.mu.Lock()
		cmd := b.running[r.URL.Query().Get("id")]
		s.mu.Unlock()
		if cmd != nil {
			killGroup(cmd)
		}
		w.WriteHeader(http.StatusOK)
	case "GET /files/download":
		download(w, r)
	case "POST /files/upload":
		upload(w, r)
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no route %s", kind)
	}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (b *box) killAll() {
	for _, cmd := range b.running {
		killGroup(cmd)
	}
}

type event struct {
	Type          string         `json:"type,omitempty"`
	Text          string         `json:"text,omitempty"`
	ExecutionTime int64          `json:"execution_time,omitempty"`
	Timestamp     int64          `json:"timestamp,omitempty"`
	Error         map[string]any `json:"error,omitempty"`
}

func (s *Server) runCommand(w http.ResponseWriter, r *http.Request, b *box) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Timeout int64             `json:"timeout"`
		Envs    map[string]string `json:"envs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "exactly one of non-empty command or argv is required")
		return
	}
	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Millisecond)
		defer cancel()
	}
	cmd := exec.Command("bash", "-c", req.Command)
	cmd.Dir = b.dir
	if req.Cwd != "" {
		cmd.Dir = req.Cwd
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": b.dir, "LANG": "C.UTF-8"}
	maps.Copy(env, b.env)
	maps.Copy(env, req.Envs)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
		return
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	start := time.Now()
	startErr := cmd.Start()
	_ = outW.Close()
	_ = errW.Close()
	commandID := newID()
	s.mu.Lock()
	drop := s.dropCommands > 0
	if drop {
		s.dropCommands--
	}
	if startErr == nil {
		b.running[commandID] = cmd
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(e event) {
		e.Timestamp = time.Now().UnixMilli()
		data, _ := json.Marshal(e)
		if s.opts.SSEData {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		} else {
			_, _ = w.Write(append(data, '\n', '\n'))
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(event{Type: "init", Text: commandID})
	if startErr != nil {
		send(event{Type: "error", Error: map[string]any{"ename": "CommandExecError", "evalue": startErr.Error(), "traceback": []string{startErr.Error()}}})
		return
	}
	defer func() {
		s.mu.Lock()
		delete(b.running, commandID)
		s.mu.Unlock()
	}()
	type chunk struct {
		kind string
		data []byte
	}
	chunks := make(chan chunk)
	stop := make(chan struct{})
	defer close(stop)
	var readers sync.WaitGroup
	for kind, f := range map[string]*os.File{"stdout": outR, "stderr": errR} {
		readers.Go(func() {
			defer f.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := f.Read(buf)
				if n > 0 {
					select {
					case chunks <- chunk{kind, append([]byte(nil), buf[:n]...)}:
					case <-stop:
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		// Children that outlive the command may hold the pipes: read what is there, then stop
		// (execd stops tailing the output when the command exits). A deadline that has passed
		// fails a read before it looks at the pipe, so it allows for a reader not scheduled at
		// once on a loaded machine (100 ms lost a command's whole output once in CI).
		_ = outR.SetReadDeadline(time.Now().Add(time.Second))
		_ = errR.SetReadDeadline(time.Now().Add(time.Second))
		waited <- err
	}()
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	var waitErr error
	exited := false
	for !exited || readersDone != nil {
		select {
		case c := <-chunks:
			send(event{Type: c.kind, Text: string(c.data)})
			if drop {
				killGroup(cmd)
				panic(http.ErrAbortHandler)
			}
		case waitErr = <-waited:
			exited = true
		case <-readersDone:
			readersDone = nil
		case <-ctx.Done():
			killGroup(cmd)
			ctx = context.Background()
		}
	}
	if waitErr == nil {
		send(event{Type: "execution_complete", ExecutionTime: time.Since(start).Milliseconds()})
		return
	}
	code := 1
	if ee, ok := waitErr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	send(event{Type: "error", Error: map[string]any{"ename": "CommandExecError", "evalue": strconv.Itoa(code), "traceback": []string{waitErr.Error()}}})
}

func download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	info, err := os.Stat(p)
	switch {
	case p == "":
		writeError(w, http.StatusBadRequest, "MISSING_QUERY", "missing query parameter 'path'")
		return
	case os.IsNotExist(err):
		writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found. %s", p)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
		return
	case !info.Mode().IsRegular():
		writeError(w, http.StatusBadRequest, "INVALID_FILE", "%s is not a regular file", p)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	_, _ = io.Copy(w, f)
}

func upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_FILE", "multipart form is empty")
		return
	}
	metas, files := r.MultipartForm.File["metadata"], r.MultipartForm.File["file"]
	if len(metas) == 0 || len(files) == 0 || len(metas) != len(files) {
		writeError(w, http.StatusBadRequest, "INVALID_FILE", "metadata and file parts must come in pairs")
		return
	}
	for i := range metas {
		mf, err := metas[i].Open()
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_FILE_METADATA", "%v", err)
			return
		}
		var meta struct {
			Path string `json:"path"`
			Mode int    `json:"mode"`
		}
		err = json.NewDecoder(mf).Decode(&meta)
		mf.Close()
		if err != nil || meta.Path == "" {
			writeError(w, http.StatusBadRequest, "INVALID_FILE_METADATA", "invalid metadata: %v", err)
			return
		}
		if err := os.MkdirAll(filepath.Dir(meta.Path), 0o755); err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error creating target directory: %v", err)
			return
		}
		src, err := files[i].Open()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
			return
		}
		dst, err := os.OpenFile(meta.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			_, err = io.Copy(dst, src)
			_ = dst.Close()
		}
		src.Close()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error writing %s: %v", meta.Path, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
