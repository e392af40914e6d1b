package sessions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func ptr[T any](v T) *T { return &v }

func TestPatchMetadata(t *testing.T) {
	t.Parallel()
	base := map[string]string{"keep": "1", "drop": "2", "empty": "3"}
	tests := []struct {
		name        string
		patch       wire.MetadataPatch
		deleteEmpty bool
		want        map[string]string
		wantErr     string
	}{
		{"upsert and null delete", wire.MetadataPatch{"new": ptr("x"), "drop": nil}, false, map[string]string{"keep": "1", "empty": "3", "new": "x"}, ""},
		{"empty string kept for agents", wire.MetadataPatch{"empty": ptr("")}, false, map[string]string{"keep": "1", "drop": "2", "empty": ""}, ""},
		{"empty string deletes for environments", wire.MetadataPatch{"empty": ptr("")}, true, map[string]string{"keep": "1", "drop": "2"}, ""},
		{"value too long", wire.MetadataPatch{"k": ptr(strings.Repeat("v", maxMetadataValue+1))}, false, nil, "metadata.k: value must be at most 512 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := patchMetadata("metadata", base, tt.patch, tt.deleteEmpty)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, map[string]string{"keep": "1", "drop": "2", "empty": "3"}, base, "the base is not modified")
}

func TestResolveModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      wire.ModelParam
		want    wire.Model
		wantErr string
	}{
		{"bare id", wire.ModelParam{ID: "claude-opus-5"}, wire.Model{ID: "claude-opus-5", Speed: "standard"}, ""},
		{"effort and fast", wire.ModelParam{ID: "m", Effort: &wire.Effort{Type: "high"}, Speed: "fast"}, wire.Model{ID: "m", Effort: &wire.Effort{Type: "high"}, Speed: "fast"}, ""},
		{"empty id", wire.ModelParam{}, wire.Model{}, "model.id: must not be empty"},
		{"bad effort", wire.ModelParam{ID: "m", Effort: &wire.Effort{Type: "extreme"}}, wire.Model{}, "model.effort: must be one of low, medium, high, xhigh, max"},
		{"bad speed", wire.ModelParam{ID: "m", Speed: "warp"}, wire.Model{}, "model.speed: must be standard or fast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := resolveModel("model", tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestResolveEnvironmentConfig(t *testing.T) {
	t.Parallel()
	limited := &wire.EnvironmentConfigParam{Type: "cloud", Networking: &wire.NetworkingParam{Type: "limited", AllowedHosts: []string{"*.example.com"}}}
	cur, err := resolveEnvironmentConfig(limited, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"*.example.com"}, cur.Networking.AllowedHosts)
	require.False(t, *cur.Networking.AllowPackageManagers)

	tests := []struct {
		name    string
		in      *wire.EnvironmentConfigParam
		cur     *wire.EnvironmentConfig
		wantErr string
	}{
		{"type change", &wire.EnvironmentConfigParam{Type: "self_hosted"}, &cur, "config.type: cannot change from cloud to self_hosted"},
		{"host with scheme", &wire.EnvironmentConfigParam{Type: "cloud", Networking: &wire.NetworkingParam{Type: "limited", AllowedHosts: []string{"https://a.com"}}}, nil,
			`config.networking.allowed_hosts[0]: "https://a.com" must be a bare hostname or *.domain wildcard (no scheme, port or path)`},
		{"packages under limited networking need package managers", &wire.EnvironmentConfigParam{Type: "cloud", Packages: &wire.PackagesParam{Pip: []string{"pandas"}}}, &cur,
			"config.packages: limited networking needs allow_package_managers: true to install packages"},
		{"a pip spec read as an option", &wire.EnvironmentConfigParam{Type: "cloud", Packages: &wire.PackagesParam{Pip: []string{"pandas", "--index-url=http://10.0.0.1/simple"}}}, nil,
			`config.packages.pip[1]: "--index-url=http://10.0.0.1/simple": must not start with '-' (a package manager would read it as an option)`},
		{"an apt spec with a space", &wire.EnvironmentConfigParam{Type: "cloud", Packages: &wire.PackagesParam{Apt: []string{"jq curl"}}}, nil,
			`config.packages.apt[0]: "jq curl": must not hold spaces or control characters`},
		{"self_hosted takes nothing else", &wire.EnvironmentConfigParam{Type: "self_hosted", Packages: &wire.PackagesParam{}}, nil, "config: a self_hosted config has no other fields"},
		{"unknown type", &wire.EnvironmentConfigParam{Type: "moon"}, nil, "config.type: must be cloud or self_hosted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := resolveEnvironmentConfig(tt.in, tt.cur)
			require.EqualError(t, err, tt.wantErr)
		})
	}

	// Omitted sub-fields keep their stored values on update.
	merged, err := resolveEnvironmentConfig(&wire.EnvironmentConfigParam{Type: "cloud", Packages: &wire.PackagesParam{Apt: []string{"jq"}}},
		&wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "unrestricted"}, Packages: emptyPackages()})
	require.NoError(t, err)
	require.Equal(t, "unrestricted", merged.Networking.Type)
	require.Equal(t, []string{"jq"}, merged.Packages.Apt)
}

func TestBuildClientEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		raw        string
		selfHosted bool
		wantBody   string
		processed  bool
		wantErr    string
	}{
		{"user message queued", `{"type":"user.message","content":[{"type":"text","text":"hi"}]}`, false,
			`{"content":[{"type":"text","text":"hi"}]}`, false, ""},
		{"confirmation applies on receipt", `{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"deny","deny_message":"no"}`, false,
			`{"tool_use_id":"sevt_1","result":"deny","deny_message":"no","session_thread_id":null}`, true, ""},
		{"custom result", `{"type":"user.custom_tool_result","custom_tool_use_id":"sevt_2","is_error":true}`, false,
			`{"custom_tool_use_id":"sevt_2","is_error":true,"session_thread_id":null}`, true, ""},
		{"deny message with allow", `{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"allow","deny_message":"x"}`, false,
			"", false, "events[0].deny_message: only allowed with result deny"},
		{"tool result needs self_hosted", `{"type":"user.tool_result","tool_use_id":"sevt_1"}`, false,
			"", false, "events[0].type: user.tool_result is only accepted on self_hosted environments"},
		{"field of another type", `{"type":"user.message","content":[{"type":"text","text":"x"}],"result":"allow"}`, false,
			"", false, "events[0].result: not a field of user.message"},
		{"empty content", `{"type":"user.message","content":[]}`, false, "", false, "events[0].content: must have at least one block"},
		{"unknown type", `{"type":"user.dance"}`, false, "", false, `events[0].type: unknown client event type "user.dance"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := decodeClientEvent("events[0]", json.RawMessage(tt.raw))
			require.NoError(t, err)
			p, err := buildClientEvent("events[0]", ev, tt.selfHosted)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tt.wantBody, string(p.Body))
			require.Equal(t, tt.processed, p.Processed)
		})
	}
}

func TestPrimaryThreadIDIsStable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "sthr_011CabcDEF", ids.PrimaryThread("sesn_011CabcDEF"))
}
