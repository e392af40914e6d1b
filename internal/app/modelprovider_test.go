package app

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
)

func TestModelProviderFromLookup(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	}
	c := FromLookup(Config{}, env(map[string]string{
		"MANAGED_AGENT_MODEL_PROVIDER":           "bedrock",
		"MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS": "X-Team: agents",
		"MANAGED_AGENT_BEDROCK_REGION":           "eu-west-3",
		"AWS_REGION":                             "us-east-1", // ours wins
		"AWS_BEARER_TOKEN_BEDROCK":               "aws-standard-key",
		"MANAGED_AGENT_VERTEX_REGION":            "us-east5",
		"MANAGED_AGENT_VERTEX_PROJECT":           "proj-123",
		"MANAGED_AGENT_VERTEX_BASE_URL":          "https://psc.example",
		"MANAGED_AGENT_FOUNDRY_RESOURCE":         "res",
		"MANAGED_AGENT_FOUNDRY_BASE_URL":         "https://res.example/anthropic",
		"MANAGED_AGENT_FOUNDRY_API_KEY":          "fk",
		"MANAGED_AGENT_BEDROCK_BASE_URL":         "https://vpce.example",
	}))
	require.Equal(t, ModelProviderConfig{
		Provider: "bedrock", AnthropicHeaders: "X-Team: agents",
		BedrockRegion: "eu-west-3", BedrockBaseURL: "https://vpce.example", BedrockAPIKey: "aws-standard-key",
		VertexRegion: "us-east5", VertexProject: "proj-123", VertexBaseURL: "https://psc.example",
		FoundryResource: "res", FoundryBaseURL: "https://res.example/anthropic", FoundryAPIKey: "fk",
	}, c.ModelProvider)

	// The platform's standard variables fill in, and ours override them.
	c = FromLookup(Config{}, env(map[string]string{"AWS_REGION": "us-west-2", "AWS_BEARER_TOKEN_BEDROCK": "std",
		"MANAGED_AGENT_BEDROCK_API_KEY": "ours"}))
	require.Equal(t, "us-west-2", c.ModelProvider.BedrockRegion)
	require.Equal(t, "ours", c.ModelProvider.BedrockAPIKey)
}

func TestValidateModelProvider(t *testing.T) {
	t.Parallel()
	claude := func(p ModelProviderConfig) Config {
		return Config{Model: "anthropic", ModelProvider: p, Sandbox: "docker"}
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // empty: valid
		notErr  string
	}{
		{name: "an unknown provider names the allowed values", cfg: claude(ModelProviderConfig{Provider: "openai"}),
			wantErr: `MANAGED_AGENT_MODEL_PROVIDER="openai": must be anthropic, bedrock, vertex, foundry`},
		{name: "an unknown provider is refused with the fake model too", cfg: Config{ModelProvider: ModelProviderConfig{Provider: "azure"}},
			wantErr: `MANAGED_AGENT_MODEL_PROVIDER="azure"`},
		{name: "the fake model ignores the platforms' variables", cfg: Config{ModelProvider: ModelProviderConfig{Provider: "bedrock"}}},
		{name: "anthropic is the default and needs its key", cfg: claude(ModelProviderConfig{}),
			wantErr: "MANAGED_AGENT_ANTHROPIC_API_KEY or MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN"},
		{name: "a gateway: base URL, bearer and headers",
			cfg: func() Config {
				c := claude(ModelProviderConfig{AnthropicHeaders: "X-Team: agents\ncf-aig-authorization: Bearer secret-gw\n"})
				c.AnthropicBaseURL, c.AnthropicAuthToken = "https://gateway.example/anthropic", "t"
				return c
			}()},
		{name: "a custom header line that is no header, without echoing values",
			cfg: func() Config {
				c := claude(ModelProviderConfig{AnthropicHeaders: "X-Team: agents\nsecret-value-without-name"})
				c.AnthropicAPIKey = "k"
				return c
			}(),
			wantErr: `MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS: line 2 must be "Name: value"`, notErr: "secret-value"},
		{name: "a custom header the client owns",
			cfg: func() Config {
				c := claude(ModelProviderConfig{AnthropicHeaders: "authorization: Bearer secret-value"})
				c.AnthropicAPIKey = "k"
				return c
			}(),
			wantErr: "line 1 sets authorization, which the client sets itself", notErr: "secret-value"},
		{name: "bedrock needs no Anthropic key", cfg: claude(ModelProviderConfig{Provider: "bedrock", BedrockRegion: "us-east-1"})},
		{name: "bedrock needs a region", cfg: claude(ModelProviderConfig{Provider: "bedrock"}),
			wantErr: `MANAGED_AGENT_BEDROCK_REGION="": must be an AWS region such as us-east-1 (or set AWS_REGION)`},
		{name: "bedrock region", cfg: claude(ModelProviderConfig{Provider: "bedrock", BedrockRegion: "Frankfurt"}),
			wantErr: `MANAGED_AGENT_BEDROCK_REGION="Frankfurt"`},
		{name: "bedrock base URL", cfg: claude(ModelProviderConfig{Provider: "bedrock", BedrockRegion: "us-east-1", BedrockBaseURL: "vpce.example"}),
			wantErr: `MANAGED_AGENT_BEDROCK_BASE_URL="vpce.example": must be an http or https URL`},
		{name: "vertex", cfg: claude(ModelProviderConfig{Provider: "vertex", VertexRegion: "global", VertexProject: "my-project-123"})},
		{name: "vertex region", cfg: claude(ModelProviderConfig{Provider: "vertex", VertexProject: "my-project-123"}),
			wantErr: `MANAGED_AGENT_VERTEX_REGION="": must be a Google Cloud region such as us-east5, or global, us or eu`},
		{name: "vertex project", cfg: claude(ModelProviderConfig{Provider: "vertex", VertexRegion: "us-east5", VertexProject: "My Project"}),
			wantErr: `MANAGED_AGENT_VERTEX_PROJECT="My Project": must be a Google Cloud project ID`},
		{name: "vertex base URL", cfg: claude(ModelProviderConfig{Provider: "vertex", VertexRegion: "us-east5", VertexProject: "my-project-123", VertexBaseURL: "ftp://x"}),
			wantErr: `MANAGED_AGENT_VERTEX_BASE_URL="ftp://x"`},
		{name: "foundry by resource", cfg: claude(ModelProviderConfig{Provider: "foundry", FoundryResource: "my-resource"})},
		{name: "foundry by base URL", cfg: claude(ModelProviderConfig{Provider: "foundry", FoundryBaseURL: "https://pl.example/anthropic", FoundryAPIKey: "k"})},
		{name: "foundry needs an endpoint", cfg: claude(ModelProviderConfig{Provider: "foundry", FoundryAPIKey: "k"}),
			wantErr: "MANAGED_AGENT_MODEL_PROVIDER=foundry needs exactly one of MANAGED_AGENT_FOUNDRY_RESOURCE and MANAGED_AGENT_FOUNDRY_BASE_URL"},
		{name: "foundry takes one endpoint", cfg: claude(ModelProviderConfig{Provider: "foundry", FoundryResource: "r", FoundryBaseURL: "https://x.example"}),
			wantErr: "exactly one of"},
		{name: "foundry resource", cfg: claude(ModelProviderConfig{Provider: "foundry", FoundryResource: "my.resource"}),
			wantErr: `MANAGED_AGENT_FOUNDRY_RESOURCE="my.resource"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			if tt.notErr != "" {
				require.NotContains(t, err.Error(), tt.notErr)
			}
		})
	}
}

// seenCall is what a stand-in platform saw of one call.
type seenCall struct {
	path   string
	header http.Header
	body   map[string]any
}

// platformStub answers every POST with a one-text message and records it.
func platformStub(t *testing.T) (*httptest.Server, func() []seenCall) {
	t.Helper()
	var mu sync.Mutex
	var seen []seenCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		seen = append(seen, seenCall{path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seenCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenCall(nil), seen...)
	}
}

func oneCall(t *testing.T, c Config, modelName string) {
	t.Helper()
	require.NoError(t, c.validateModel())
	m, err := NewModel(c)
	require.NoError(t, err)
	resp, err := m.Create(t.Context(), model.Request{Model: modelName, MaxTokens: 8,
		Messages: []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "hi"}}}}})
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Content[0].Text)
}

// TestNewModelProviders wires each provider from its variables and sends one call to a
// stand-in, to see that the configuration reaches the wire: URL, body, credentials, headers.
func TestNewModelProviders(t *testing.T) {
	t.Parallel()

	t.Run("gateway", func(t *testing.T) {
		t.Parallel()
		srv, seen := platformStub(t)
		oneCall(t, Config{Model: "anthropic", AnthropicBaseURL: srv.URL + "/gw", AnthropicAuthToken: "gw-token",
			ModelProvider: ModelProviderConfig{AnthropicHeaders: "X-Team: agents\ncf-aig-authorization: Bearer gw-2"}}, "claude-x")
		s := seen()
		require.Len(t, s, 1)
		require.Equal(t, "/gw/v1/messages", s[0].path)
		require.Equal(t, "Bearer gw-token", s[0].header.Get("Authorization"))
		require.Equal(t, "agents", s[0].header.Get("X-Team"))
		require.Equal(t, "Bearer gw-2", s[0].header.Get("cf-aig-authorization"))
	})

	t.Run("bedrock with an API key", func(t *testing.T) {
		t.Parallel()
		srv, seen := platformStub(t)
		oneCall(t, Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "bedrock",
			BedrockRegion: "us-east-1", BedrockBaseURL: srv.URL, BedrockAPIKey: "bedrock-key"}}, "us.anthropic.claude-x-v1:0")
		s := seen()
		require.Len(t, s, 1)
		require.Equal(t, "/model/us.anthropic.claude-x-v1:0/invoke", s[0].path)
		require.Equal(t, "Bearer bedrock-key", s[0].header.Get("Authorization"))
		require.Equal(t, "bedrock-2023-05-31", s[0].body["anthropic_version"])
		require.NotContains(t, s[0].body, "model")
	})

	t.Run("foundry with an API key", func(t *testing.T) {
		t.Parallel()
		srv, seen := platformStub(t)
		oneCall(t, Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "foundry",
			FoundryBaseURL: srv.URL + "/anthropic", FoundryAPIKey: "foundry-key"}}, "my-deployment")
		s := seen()
		require.Len(t, s, 1)
		require.Equal(t, "/anthropic/v1/messages", s[0].path)
		require.Equal(t, "foundry-key", s[0].header.Get("api-key"))
		require.Equal(t, "my-deployment", s[0].body["model"])
	})
}

// TestNewModelBedrockSigV4 takes the AWS default chain's credentials from the environment.
func TestNewModelBedrockSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	srv, seen := platformStub(t)
	oneCall(t, Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "bedrock",
		BedrockRegion: "eu-central-1", BedrockBaseURL: srv.URL}}, "anthropic.claude-x-v1:0")
	s := seen()
	require.Len(t, s, 1)
	auth := s[0].header.Get("Authorization")
	require.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDFROMENV/"), auth)
	require.Contains(t, auth, "/eu-central-1/bedrock/aws4_request")
}

// TestNewModelVertexWithoutCredentials fails at startup, naming the provider, when Google's
// Application Default Credentials cannot be found.
func TestNewModelVertexWithoutCredentials(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	_, err := NewModel(Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "vertex",
		VertexRegion: "us-east5", VertexProject: "my-project-123"}})
	require.ErrorContains(t, err, "MANAGED_AGENT_MODEL_PROVIDER=vertex: find Google Application Default Credentials")
}

// TestNewModelVertexWithServiceAccount goes through Google's Application Default Credentials
// for real: a service account key file whose token_uri is a local token endpoint, which must
// be asked for a cloud-platform token that then reaches the stand-in Vertex AI as the bearer.
func TestNewModelVertexWithServiceAccount(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	var tokenRequests atomic.Int32
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenRequests.Add(1)
		_ = r.ParseForm()
		// The assertion is a JWT signed with the key; its claims carry the scope.
		parts := strings.Split(r.PostForm.Get("assertion"), ".")
		claims, _ := base64.RawURLEncoding.DecodeString(parts[min(1, len(parts)-1)])
		if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" ||
			!strings.Contains(string(claims), "https://www.googleapis.com/auth/cloud-platform") {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"ya29.from-adc","expires_in":3600,"token_type":"Bearer"}`)
	}))
	t.Cleanup(tokenSrv.Close)
	keyFile, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "my-project-123", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "agents@my-project-123.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": tokenSrv.URL + "/token",
	})
	path := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(path, keyFile, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)

	srv, seen := platformStub(t)
	c := Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "vertex",
		VertexRegion: "europe-west1", VertexProject: "my-project-123", VertexBaseURL: srv.URL}}
	oneCall(t, c, "claude-x@20260101")
	oneCall(t, c, "claude-x@20260101") // a second client, a second token: each NewModel finds its own
	s := seen()
	require.Len(t, s, 2)
	require.Equal(t, "/v1/projects/my-project-123/locations/europe-west1/publishers/anthropic/models/claude-x@20260101:rawPredict", s[0].path)
	require.Equal(t, "Bearer ya29.from-adc", s[0].header.Get("Authorization"))
	require.Equal(t, "vertex-2023-10-16", s[0].body["anthropic_version"])
	require.EqualValues(t, 2, tokenRequests.Load())
}

// TestNewModelVertexWithWorkloadIdentity uses an external account (workload identity
// federation, as on GKE, EKS or AKS): its token source keeps the context it was built with
// and fetches the subject token and the STS exchange later, per call, so that context must
// outlive the worker's start.
func TestNewModelVertexWithWorkloadIdentity(t *testing.T) {
	var exchanges atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/subject":
			_, _ = io.WriteString(w, "subject-jwt")
		case "/sts":
			_ = r.ParseForm()
			if r.PostForm.Get("subject_token") != "subject-jwt" {
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
				return
			}
			exchanges.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"ya29.federated","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(idp.Close)
	cfg, _ := json.Marshal(map[string]any{
		"type":               "external_account",
		"audience":           "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/test",
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"token_url":          idp.URL + "/sts",
		"credential_source":  map[string]any{"url": idp.URL + "/subject"},
	})
	path := filepath.Join(t.TempDir(), "wif.json")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)

	srv, seen := platformStub(t)
	oneCall(t, Config{Model: "anthropic", ModelProvider: ModelProviderConfig{Provider: "vertex",
		VertexRegion: "global", VertexProject: "my-project-123", VertexBaseURL: srv.URL}}, "claude-x")
	s := seen()
	require.Len(t, s, 1)
	require.Equal(t, "Bearer ya29.federated", s[0].header.Get("Authorization"))
	require.EqualValues(t, 1, exchanges.Load())
}
