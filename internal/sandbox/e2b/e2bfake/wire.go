package e2bfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// The fake's own copies of the wire types, written from E2B's spec/openapi.yml and envd's
// process.proto (protojson naming), so that the client's types are checked against them on
// the wire rather than shared. Requests are decoded strictly: an unknown field is a 400, as
// protojson and the API's validation refuse it.

// newSandbox is openapi.yml's NewSandbox.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *json.RawMessage  `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	MCP                 *json.RawMessage  `json:"mcp,omitempty"`
	// Lifecycle is CubeAPI's: onTimeout "pause" is its autoPause.
	Lifecycle *struct {
		OnTimeout  string `json:"onTimeout"`
		AutoResume bool   `json:"autoResume,omitempty"`
	} `json:"lifecycle,omitempty"`
}

type networkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	MaskRequestHost    *string  `json:"maskRequestHost,omitempty"`
}

// sandboxJSON is Sandbox (create, connect).
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    *string `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detailJSON is SandboxDetail and ListedSandbox.
type detailJSON struct {
	TemplateID          string            `json:"templateID"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	EnvdVersion         string            `json:"envdVersion"`
	Metadata            map[string]string `json:"metadata"`
	State               string            `json:"state"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// process.proto.
type (
	processConfig struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  *string           `json:"cwd,omitempty"`
	}
	startRequest struct {
		Process processConfig    `json:"process"`
		Pty     *json.RawMessage `json:"pty,omitempty"`
		Tag     *string          `json:"tag,omitempty"`
		Stdin   *bool            `json:"stdin,omitempty"`
	}
	startResponse struct {
		Event processEvent `json:"event"`
	}
	processEvent struct {
		Start     *startEvent `json:"start,omitempty"`
		Data      *dataEvent  `json:"data,omitempty"`
		End       *endEvent   `json:"end,omitempty"`
		Keepalive *struct{}   `json:"keepalive,omitempty"`
	}
	startEvent struct {
		Pid uint32 `json:"pid"`
	}
	dataEvent struct {
		Stdout []byte `json:"stdout,omitempty"`
		Stderr []byte `json:"stderr,omitempty"`
	}
	endEvent struct {
		ExitCode int32   `json:"exitCode"`
		Exited   bool    `json:"exited"`
		Status   string  `json:"status"`
		Error    *string `json:"error,omitempty"`
	}
	processSelector struct {
		Pid *uint32 `json:"pid,omitempty"`
		Tag *string `json:"tag,omitempty"`
	}
	sendSignalRequest struct {
		Process processSelector `json:"process"`
		// Signal is the enum by name (protojson's form) or number.
		Signal json.RawMessage `json:"signal"`
	}
	sendSignalResponse struct{}
)

// strictCodec is connect's "json" codec refusing unknown fields, as protojson does.
type strictCodec struct{}

func (strictCodec) Name() string                  { return "json" }
func (strictCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }
func (strictCodec) Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("protojson: %w", err)
	}
	return nil
}

// signalNumber reads process.proto's Signal: 9 and 15 by name or number.
func signalNumber(raw json.RawMessage) (int, bool) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch name {
		case "SIGNAL_SIGKILL":
			return 9, true
		case "SIGNAL_SIGTERM":
			return 15, true
		}
		return 0, false
	}
	var n int
	if json.Unmarshal(raw, &n) == nil && (n == 9 || n == 15) {
		return n, true
	}
	return 0, false
}
