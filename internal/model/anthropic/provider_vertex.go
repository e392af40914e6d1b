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

// Claude on Google Vertex AI:
//   - POST {base}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict,
//     or :streamRawPredict for a stream, whose answer is the ordinary server-sent events;
//   - base is https://{region}-aiplatform.googleapis.com, https://aiplatform.googleapis.com
//     for the global endpoint, and https://aiplatform.{us|eu}.rep.googleapis.com for the
//     multi-region ones;
//   - the body is the Messages body without "model" (it is in the URL), with
//     "anthropic_version": "vertex-2023-10-16"; "stream" stays;
//   - authentication is a Google OAuth2 access token (Application Default Credentials, scope
//     https://www.googleapis.com/auth/cloud-platform) as a bearer token.
//
// Sources: https://platform.claude.com/docs/en/build-with-claude/claude-on-vertex-ai and
// https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude;
// errors come in Google's {"error":{"code","message","status"}} shape or the Anthropic one,
// and statusError reads the message of both.

// VertexVersion is the anthropic_version Vertex AI requires in the body.
const VertexVersion = "vertex-2023-10-16"

// VertexScope is the OAuth2 scope of the tokens Vertex AI takes.
const VertexScope = "https://www.googleapis.com/auth/cloud-platform"

var (
	gcpRegion  = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]+|global|us|eu)$`)
	gcpProject = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[a-z0-9.-]+:[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
)

// VertexOptions configure the Vertex AI provider.
type VertexOptions struct {
	// Region is the location: a region such as us-east5 or europe-west1, or global, us or eu.
	Region string
	// ProjectID is the Google Cloud project that enabled the Claude models.
	ProjectID string
	// BaseURL replaces the region's endpoint (Private Service Connect, a proxy).
	BaseURL string
	// Tokens returns access tokens for VertexScope.
	Tokens TokenFunc
}

type vertexProvider struct {
	models string // …/publishers/anthropic/models/
	tokens TokenFunc
}

// Vertex returns the provider of Claude on Google Vertex AI.
func Vertex(o VertexOptions) (Provider, error) {
	if !gcpRegion.MatchString(o.Region) {
		return nil, fmt.Errorf("vertex: region %q is not a Google Cloud region such as us-east5, nor global, us or eu", o.Region)
	}
	if !gcpProject.MatchString(o.ProjectID) {
		return nil, fmt.Errorf("vertex: project %q is not a Google Cloud project ID", o.ProjectID)
	}
	if o.Tokens == nil {
		return nil, errors.New("vertex: needs a source of access tokens")
	}
	base := o.BaseURL
	if base == "" {
		base = vertexBaseURL(o.Region)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vertex: base URL %q must be an absolute http or https URL", base)
	}
	return &vertexProvider{
		models: fmt.Sprintf("%s/v1/projects/%s/locations/%s/publishers/anthropic/models/",
			strings.TrimSuffix(u.String(), "/"), url.PathEscape(o.ProjectID), o.Region),
		tokens: o.Tokens,
	}, nil
}

// vertexBaseURL is the endpoint of a location.
func vertexBaseURL(region string) string {
	switch region {
	case "global":
		return "https://aiplatform.googleapis.com"
	case "us", "eu":
		return "https://aiplatform." + region + ".rep.googleapis.com"
	default:
		return "https://" + region + "-aiplatform.googleapis.com"
	}
}

func (p *vertexProvider) Request(ctx context.Context, call Call) (*http.Request, error) {
	if !pathSegmentOK(call.Model) {
		return nil, invalidModel("vertex", call.Model)
	}
	header := call.Header.Clone()
	header.Del("anthropic-version") // in the body instead
	body, err := rewriteBody(call.Body, []string{"model"}, map[string]any{"anthropic_version": VertexVersion})
	if err != nil {
		return nil, err
	}
	method := "rawPredict"
	if call.Stream {
		method = "streamRawPredict"
	}
	token, err := bearerToken(ctx, p.tokens, "vertex")
	if err != nil {
		return nil, err
	}
	req, err := newPost(ctx, p.models+url.PathEscape(call.Model)+":"+method, body, header)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req, nil
}

func (*vertexProvider) Response(resp *http.Response, _ bool) (*http.Response, error) {
	return resp, nil
}
