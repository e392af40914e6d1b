package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

// The inference platforms MANAGED_AGENT_MODEL=anthropic can run Claude on
// (MANAGED_AGENT_MODEL_PROVIDER, docs/model-providers.md). A separate variable rather than
// more values of MANAGED_AGENT_MODEL: the model stays "a real Claude or the fake one" (the
// sandbox guard, the docs and every deployment that sets anthropic keep their meaning), and
// the provider only says where that Claude is served, with the same client on all four.
const (
	providerAnthropic = "anthropic"
	providerBedrock   = "bedrock"
	providerVertex    = "vertex"
	providerFoundry   = "foundry"
)

var modelProviders = []string{providerAnthropic, providerBedrock, providerVertex, providerFoundry}

// ModelProviderConfig says where MANAGED_AGENT_MODEL=anthropic calls Claude, and with which
// credentials besides the MANAGED_AGENT_ANTHROPIC_* ones of Config. Without an API key,
// Bedrock, Vertex AI and Foundry take their platform's standard credential chain.
type ModelProviderConfig struct {
	// Provider is anthropic (default), bedrock, vertex or foundry (MANAGED_AGENT_MODEL_PROVIDER).
	Provider string
	// AnthropicHeaders are extra headers of every call to the anthropic provider, one
	// "Name: value" a line, for the gateways that want their own
	// (MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS).
	AnthropicHeaders string
	// BedrockRegion (MANAGED_AGENT_BEDROCK_REGION, else AWS_REGION), BedrockBaseURL
	// (MANAGED_AGENT_BEDROCK_BASE_URL: a VPC endpoint or a gateway) and BedrockAPIKey
	// (MANAGED_AGENT_BEDROCK_API_KEY, else AWS_BEARER_TOKEN_BEDROCK; without one, SigV4 with
	// the AWS default credential chain).
	BedrockRegion, BedrockBaseURL, BedrockAPIKey string
	// VertexRegion (MANAGED_AGENT_VERTEX_REGION), VertexProject (MANAGED_AGENT_VERTEX_PROJECT)
	// and VertexBaseURL (MANAGED_AGENT_VERTEX_BASE_URL); tokens come from Google's Application
	// Default Credentials.
	VertexRegion, VertexProject, VertexBaseURL string
	// FoundryResource (MANAGED_AGENT_FOUNDRY_RESOURCE) or FoundryBaseURL
	// (MANAGED_AGENT_FOUNDRY_BASE_URL), and FoundryAPIKey (MANAGED_AGENT_FOUNDRY_API_KEY;
	// without one, Microsoft Entra ID through azidentity's DefaultAzureCredential).
	FoundryResource, FoundryBaseURL, FoundryAPIKey string
}

func modelProviderFromLookup(p ModelProviderConfig, get func(string) string) ModelProviderConfig {
	set := func(dst *string, names ...string) {
		for _, name := range names {
			if v := get(name); v != "" {
				*dst = v
				return
			}
		}
	}
	set(&p.Provider, "MANAGED_AGENT_MODEL_PROVIDER")
	set(&p.AnthropicHeaders, "MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS")
	set(&p.BedrockRegion, "MANAGED_AGENT_BEDROCK_REGION", "AWS_REGION")
	set(&p.BedrockBaseURL, "MANAGED_AGENT_BEDROCK_BASE_URL")
	set(&p.BedrockAPIKey, "MANAGED_AGENT_BEDROCK_API_KEY", "AWS_BEARER_TOKEN_BEDROCK")
	set(&p.VertexRegion, "MANAGED_AGENT_VERTEX_REGION")
	set(&p.VertexProject, "MANAGED_AGENT_VERTEX_PROJECT")
	set(&p.VertexBaseURL, "MANAGED_AGENT_VERTEX_BASE_URL")
	set(&p.FoundryResource, "MANAGED_AGENT_FOUNDRY_RESOURCE")
	set(&p.FoundryBaseURL, "MANAGED_AGENT_FOUNDRY_BASE_URL")
	set(&p.FoundryAPIKey, "MANAGED_AGENT_FOUNDRY_API_KEY")
	return p
}

func (p ModelProviderConfig) name() string {
	if p.Provider == "" {
		return providerAnthropic
	}
	return p.Provider
}

var (
	awsRegionPattern      = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$`)
	gcpRegionPattern      = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]+|global|us|eu)$`)
	gcpProjectPattern     = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	azureResourcePattern  = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?$`)
	headerNamePattern     = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	reservedCustomHeaders = []string{"Authorization", "X-Api-Key", "Content-Type", "Content-Length", "Host", "Anthropic-Version"}
)

// validateProviderName checks MANAGED_AGENT_MODEL_PROVIDER whatever the model.
func (c Config) validateProviderName() error {
	if c.ModelProvider.Provider != "" && !slices.Contains(modelProviders, c.ModelProvider.Provider) {
		return fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=%q: must be %s", c.ModelProvider.Provider, strings.Join(modelProviders, ", "))
	}
	return nil
}

// validateClaude checks the variables of MANAGED_AGENT_MODEL=anthropic: those of the
// provider it names, and only those. Messages name the variable and never quote a secret.
func (c Config) validateClaude() error {
	if err := c.validateProviderName(); err != nil {
		return err
	}
	p := c.ModelProvider
	switch p.name() {
	case providerAnthropic:
		if c.AnthropicAPIKey == "" && c.AnthropicAuthToken == "" {
			return errors.New("MANAGED_AGENT_MODEL=anthropic needs MANAGED_AGENT_ANTHROPIC_API_KEY or MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN")
		}
		if c.AnthropicBaseURL != "" {
			if err := checkURL(c.AnthropicBaseURL); err != nil {
				return fmt.Errorf("MANAGED_AGENT_ANTHROPIC_BASE_URL=%q: must be an http or https URL such as https://api.anthropic.com", c.AnthropicBaseURL)
			}
		}
		_, err := parseCustomHeaders(p.AnthropicHeaders)
		return err
	case providerBedrock:
		if !awsRegionPattern.MatchString(p.BedrockRegion) {
			return fmt.Errorf("MANAGED_AGENT_BEDROCK_REGION=%q: must be an AWS region such as us-east-1 (or set AWS_REGION)", p.BedrockRegion)
		}
		if p.BedrockBaseURL != "" && checkURL(p.BedrockBaseURL) != nil {
			return fmt.Errorf("MANAGED_AGENT_BEDROCK_BASE_URL=%q: must be an http or https URL such as https://bedrock-runtime.us-east-1.amazonaws.com", p.BedrockBaseURL)
		}
	case providerVertex:
		if !gcpRegionPattern.MatchString(p.VertexRegion) {
			return fmt.Errorf("MANAGED_AGENT_VERTEX_REGION=%q: must be a Google Cloud region such as us-east5, or global, us or eu", p.VertexRegion)
		}
		if !gcpProjectPattern.MatchString(p.VertexProject) {
			return fmt.Errorf("MANAGED_AGENT_VERTEX_PROJECT=%q: must be a Google Cloud project ID such as my-project-123", p.VertexProject)
		}
		if p.VertexBaseURL != "" && checkURL(p.VertexBaseURL) != nil {
			return fmt.Errorf("MANAGED_AGENT_VERTEX_BASE_URL=%q: must be an http or https URL such as https://us-east5-aiplatform.googleapis.com", p.VertexBaseURL)
		}
	case providerFoundry:
		switch {
		case (p.FoundryResource == "") == (p.FoundryBaseURL == ""):
			return errors.New("MANAGED_AGENT_MODEL_PROVIDER=foundry needs exactly one of MANAGED_AGENT_FOUNDRY_RESOURCE and MANAGED_AGENT_FOUNDRY_BASE_URL")
		case p.FoundryResource != "" && !azureResourcePattern.MatchString(p.FoundryResource):
			return fmt.Errorf("MANAGED_AGENT_FOUNDRY_RESOURCE=%q: must be the name of a Foundry resource, as in https://NAME.services.ai.azure.com", p.FoundryResource)
		case p.FoundryBaseURL != "" && checkURL(p.FoundryBaseURL) != nil:
			return fmt.Errorf("MANAGED_AGENT_FOUNDRY_BASE_URL=%q: must be an http or https URL such as https://my-resource.services.ai.azure.com/anthropic", p.FoundryBaseURL)
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an http or https URL")
	}
	return nil
}

// parseCustomHeaders reads MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS: "Name: value" lines, the
// format of Claude Code's ANTHROPIC_CUSTOM_HEADERS (https://code.claude.com/docs/en/llm-gateway),
// so a gateway's instructions for one fit the other. The values are often secrets: messages
// name the line and the header, never the value.
func parseCustomHeaders(raw string) (http.Header, error) {
	h := http.Header{}
	for i, line := range strings.Split(raw, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || !headerNamePattern.MatchString(name) || value == "":
			return nil, fmt.Errorf("MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS: line %d must be \"Name: value\", one header a line", i+1)
		case slices.Contains(reservedCustomHeaders, http.CanonicalHeaderKey(name)):
			return nil, fmt.Errorf("MANAGED_AGENT_ANTHROPIC_CUSTOM_HEADERS: line %d sets %s, which the client sets itself (use MANAGED_AGENT_ANTHROPIC_API_KEY or _AUTH_TOKEN for credentials)", i+1, name)
		}
		h.Add(name, value)
	}
	return h, nil
}

// credentialTimeout bounds finding a platform's credentials at startup (a metadata server
// that does not answer must not hang the worker).
const credentialTimeout = 30 * time.Second

// newClaude builds the model client of MANAGED_AGENT_MODEL=anthropic for its provider. It
// finds the platform's credentials here, at startup, so a worker without any fails before it
// takes work; the tokens themselves are fetched, cached and refreshed per call.
func (c Config) newClaude() (model.Client, error) {
	p := c.ModelProvider
	var opts []anthropic.Option
	switch p.name() {
	case providerAnthropic:
		if c.AnthropicBaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(c.AnthropicBaseURL))
		}
		if c.AnthropicAPIKey != "" {
			opts = append(opts, anthropic.WithAPIKey(c.AnthropicAPIKey))
		} else {
			opts = append(opts, anthropic.WithBearerToken(c.AnthropicAuthToken))
		}
		headers, err := parseCustomHeaders(p.AnthropicHeaders)
		if err != nil {
			return nil, err
		}
		for name, values := range headers {
			for _, v := range values {
				opts = append(opts, anthropic.WithHeader(name, v))
			}
		}
	default:
		provider, err := c.platformProvider()
		if err != nil {
			return nil, err
		}
		opts = append(opts, anthropic.WithProvider(provider))
	}
	m, err := anthropic.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=%s: %w", p.name(), err)
	}
	return m, nil
}

// platformProvider builds the Bedrock, Vertex AI or Foundry provider.
func (c Config) platformProvider() (anthropic.Provider, error) {
	p := c.ModelProvider
	ctx, cancel := context.WithTimeout(context.Background(), credentialTimeout)
	defer cancel()
	switch p.name() {
	case providerBedrock:
		o := anthropic.BedrockOptions{Region: p.BedrockRegion, BaseURL: p.BedrockBaseURL, APIKey: p.BedrockAPIKey}
		if o.APIKey == "" {
			// The standard chain: environment, shared config and credentials files
			// (AWS_PROFILE), web identity (EKS), ECS and EC2 roles. It caches and refreshes.
			cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(p.BedrockRegion))
			if err != nil {
				return nil, fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=bedrock: load the AWS configuration: %w", err)
			}
			o.Credentials = cfg.Credentials
		}
		return anthropic.Bedrock(o)
	case providerVertex:
		// Not ctx: the token sources keep the context they are built with and fetch with it
		// later (external accounts' subject tokens and STS exchanges), long after the start.
		creds, err := google.FindDefaultCredentials(context.Background(), anthropic.VertexScope)
		if err != nil {
			return nil, fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=vertex: find Google Application Default Credentials: %w", err)
		}
		tokens := oauth2.ReuseTokenSource(nil, creds.TokenSource)
		return anthropic.Vertex(anthropic.VertexOptions{
			Region: p.VertexRegion, ProjectID: p.VertexProject, BaseURL: p.VertexBaseURL,
			Tokens: func(context.Context) (string, error) {
				t, err := tokens.Token()
				if err != nil {
					return "", err
				}
				return t.AccessToken, nil
			},
		})
	case providerFoundry:
		o := anthropic.FoundryOptions{Resource: p.FoundryResource, BaseURL: p.FoundryBaseURL, APIKey: p.FoundryAPIKey}
		if o.APIKey == "" {
			// Environment (a service principal), workload identity, managed identity, Azure
			// CLI: azidentity caches tokens and refreshes them before they expire.
			cred, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=foundry: Microsoft Entra ID credentials: %w", err)
			}
			o.Tokens = func(ctx context.Context) (string, error) {
				t, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{anthropic.FoundryScope}})
				return t.Token, err
			}
		}
		return anthropic.Foundry(o)
	}
	return nil, fmt.Errorf("MANAGED_AGENT_MODEL_PROVIDER=%q: must be %s", p.Provider, strings.Join(modelProviders, ", "))
}
