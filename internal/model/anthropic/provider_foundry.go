package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Claude in Microsoft Foundry serves the Messages API itself under
// https://{resource}.services.ai.azure.com/anthropic/v1/messages: the body is unchanged (its
// "model" is the deployment name) and anthropic-version and anthropic-beta stay headers. It
// takes either a Foundry API key in the api-key header or a Microsoft Entra ID access token
// as a bearer token.
//
// Source: https://platform.claude.com/docs/en/build-with-claude/claude-in-microsoft-foundry
// ("Use the api-key or x-api-key header"; Entra ID tokens for https://cognitiveservices.azure.com/.default
// or https://ai.azure.com/.default in "Authorization: Bearer").

// FoundryScope is the Entra ID scope of the tokens Foundry takes.
const FoundryScope = "https://cognitiveservices.azure.com/.default"

// An Azure resource name: letters, digits and hyphens, starting and ending alphanumeric.
var azureResource = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?$`)

// FoundryOptions configure the Foundry provider. Exactly one of Resource and BaseURL, and
// exactly one of APIKey and Tokens.
type FoundryOptions struct {
	// Resource is the Foundry resource name in https://{resource}.services.ai.azure.com/anthropic.
	Resource string
	// BaseURL replaces the resource's URL (a private endpoint, a proxy); it must include the
	// /anthropic path, and /v1/messages is appended to it.
	BaseURL string
	// APIKey is a key of the resource, sent in the api-key header.
	APIKey string
	// Tokens returns Entra ID access tokens for FoundryScope.
	Tokens TokenFunc
}

type foundryProvider struct {
	endpoint string
	apiKey   string
	tokens   TokenFunc
}

// Foundry returns the provider of Claude in Microsoft Foundry.
func Foundry(o FoundryOptions) (Provider, error) {
	if (o.APIKey == "") == (o.Tokens == nil) {
		return nil, errors.New("foundry: needs either an API key or an Entra ID token source, not both")
	}
	base := o.BaseURL
	switch {
	case o.Resource != "" && o.BaseURL != "":
		return nil, errors.New("foundry: a resource and a base URL are exclusive")
	case o.Resource != "":
		if !azureResource.MatchString(o.Resource) {
			return nil, fmt.Errorf("foundry: resource %q is not an Azure resource name", o.Resource)
		}
		base = "https://" + o.Resource + ".services.ai.azure.com/anthropic"
	case o.BaseURL == "":
		return nil, errors.New("foundry: needs a resource or a base URL")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("foundry: base URL %q must be an absolute http or https URL", base)
	}
	return &foundryProvider{
		endpoint: strings.TrimSuffix(u.String(), "/") + "/v1/messages",
		apiKey:   o.APIKey,
		tokens:   o.Tokens,
	}, nil
}

func (p *foundryProvider) Request(ctx context.Context, call Call) (*http.Request, error) {
	auth := "api-key"
	value := p.apiKey
	if p.tokens != nil {
		token, err := bearerToken(ctx, p.tokens, "foundry")
		if err != nil {
			return nil, err
		}
		auth, value = "Authorization", "Bearer "+token
	}
	req, err := newPost(ctx, p.endpoint, call.Body, call.Header)
	if err != nil {
		return nil, err
	}
	req.Header.Set(auth, value)
	return req, nil
}

func (*foundryProvider) Response(resp *http.Response, _ bool) (*http.Response, error) {
	return resp, nil
}
