package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// The messages of envd's process.proto (spec/envd/process/process.proto) this client uses,
// as plain structs in protojson's field naming: lowerCamelCase names, bytes as base64
// (encoding/json's []byte), enums by name, oneofs as the one field set.
type (
	ProcessConfig struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  string            `json:"cwd,omitempty"`
	}
	StartRequest struct {
		Process ProcessConfig `json:"process"`
		Tag     string        `json:"tag,omitempty"`
	}
	StartResponse struct {
		Event *ProcessEvent `json:"event,omitempty"`
	}
	ProcessEvent struct {
		Start     *StartEvent `json:"start,omitempty"`
		Data      *DataEvent  `json:"data,omitempty"`
		End       *EndEvent   `json:"end,omitempty"`
		Keepalive *struct{}   `json:"keepalive,omitempty"`
	}
	StartEvent struct {
		Pid uint32 `json:"pid"`
	}
	DataEvent struct {
		Stdout []byte `json:"stdout,omitempty"`
		Stderr []byte `json:"stderr,omitempty"`
		Pty    []byte `json:"pty,omitempty"`
	}
	EndEvent struct {
		ExitCode int32  `json:"exitCode"`
		Exited   bool   `json:"exited"`
		Status   string `json:"status,omitempty"`
		Error    string `json:"error,omitempty"`
	}
	ProcessSelector struct {
		Pid uint32 `json:"pid,omitempty"`
		Tag string `json:"tag,omitempty"`
	}
	SendSignalRequest struct {
		Process ProcessSelector `json:"process"`
		Signal  string          `json:"signal"`
	}
	SendSignalResponse struct{}
)

// Signal names of process.proto's Signal enum.
const (
	SignalTerm = "SIGNAL_SIGTERM"
	SignalKill = "SIGNAL_SIGKILL"
)

// Procedures of envd's process service.
const (
	ProcedureStart      = "/process.Process/Start"
	ProcedureSendSignal = "/process.Process/SendSignal"
)

// JSONCodec is connect's "json" codec over plain structs: what envd's protojson reads and
// writes for the messages above. connect-go does the Connect protocol's framing; protojson
// accepts standard base64 and lowerCamelCase names, which encoding/json writes.
type JSONCodec struct{}

// Name implements connect.Codec.
func (JSONCodec) Name() string { return "json" }

// Marshal implements connect.Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements connect.Codec. protojson writes 64-bit integers as strings and may
// write an enum as its name; none of the fields read here are either.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Headers of the data plane.
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
	HeaderKeepalive   = "Keepalive-Ping-Interval"
)

// envd is the data-plane client of one sandbox.
type envd struct {
	base    string // scheme://host[:port]
	id      string
	proxied bool // base is a client-proxy: route by headers
	token   string
	user    string
	version string
	http    *http.Client
	start   *connect.Client[StartRequest, StartResponse]
	signal  *connect.Client[SendSignalRequest, SendSignalResponse]
}

// headerSetter puts the routing and auth headers on every data-plane request.
type headerSetter struct {
	e    *envd
	next http.RoundTripper
}

func (h headerSetter) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	h.e.setHeaders(req.Header)
	return h.next.RoundTrip(req)
}

func (e *envd) setHeaders(h http.Header) {
	if e.proxied {
		h.Set(HeaderSandboxID, e.id)
		h.Set(HeaderSandboxPort, strconv.Itoa(EnvdPort))
	}
	if e.token != "" {
		h.Set(HeaderAccessToken, e.token)
	}
	// envd before 0.4.0 has no default user and needs it on every request (CubeSandbox
	// reports 0.2.0); later ones take it the same way.
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(e.user+":")))
}

func newEnvd(base, id string, proxied bool, info sandboxInfo, user string, client *http.Client) *envd {
	e := &envd{base: strings.TrimRight(base, "/"), id: id, proxied: proxied, token: info.EnvdAccessToken, user: user,
		version: info.EnvdVersion}
	e.http = &http.Client{Transport: headerSetter{e: e, next: client.Transport}}
	e.start = connect.NewClient[StartRequest, StartResponse](e.http, e.base+ProcedureStart, connect.WithCodec(JSONCodec{}))
	e.signal = connect.NewClient[SendSignalRequest, SendSignalResponse](e.http, e.base+ProcedureSendSignal, connect.WithCodec(JSONCodec{}))
	return e
}

// health asks GET /health (204 when envd is up).
func (e *envd) health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return remote.Transport("envd health", err)
	}
	defer resp.Body.Close()
	return remote.Check(resp, "envd health", "")
}

// upload writes data to the absolute path p with POST /files: multipart part "file", or the
// raw body from envd 0.5.7 on. envd creates the parents.
func (e *envd) upload(ctx context.Context, p string, data []byte) error {
	q := url.Values{"path": {p}, "username": {e.user}}
	var body io.Reader
	contentType := "application/octet-stream"
	if versionAtLeast(e.version, 0, 5, 7) {
		body = bytes.NewReader(data)
	} else {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		part, err := w.CreateFormFile("file", p)
		if err != nil {
			return err
		}
		_, _ = part.Write(data)
		if err := w.Close(); err != nil {
			return err
		}
		body, contentType = &buf, w.FormDataContentType()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/files?"+q.Encode(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := e.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return remote.Transport("envd write file", err)
	}
	if err := remote.Check(resp, "envd write file", ""); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
}

// versionAtLeast compares a "major.minor.patch" version; an unparsable one is old.
func versionAtLeast(v string, major, minor, patch int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	want := []int{major, minor, patch}
	for i := range 3 {
		if i >= len(parts) {
			return false
		}
		n, err := strconv.Atoi(strings.SplitN(parts[i], "-", 2)[0])
		if err != nil {
			return false
		}
		if n != want[i] {
			return n > want[i]
		}
	}
	return true
}

// sendSignal signals the process pid (envd signals that process only, not its group).
func (e *envd) sendSignal(ctx context.Context, pid uint32, signal string) error {
	_, err := e.signal.CallUnary(ctx, connect.NewRequest(&SendSignalRequest{Process: ProcessSelector{Pid: pid}, Signal: signal}))
	if err != nil {
		return fmt.Errorf("envd send signal: %w", err)
	}
	return nil
}
