package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/managed-agents/managed-agents/internal/model"
)

// Provider adapts a Messages call to one inference platform: where the request goes, how its
// body and headers differ from the Anthropic API's, how it is authenticated, and how the
// answer is framed. The client owns everything else (encoding, the SSE reader, timeouts and
// error classification), so a provider stays a small translation at the edge.
//
// The default is the Anthropic API (or any Anthropic-shaped endpoint, such as an LLM gateway);
// Bedrock, Vertex and Foundry build the others. A provider is safe for concurrent use.
type Provider interface {
	// Request builds the HTTP request of one call. An error that is a *model.Error keeps its
	// kind; any other error (a credential source that failed) counts as a server error.
	Request(ctx context.Context, call Call) (*http.Request, error)
	// Response adapts a response before the client reads it: a 2xx stream whose framing is not
	// server-sent events is turned into them, an error status the platform describes in its
	// own way into a *model.Error. It returns resp unchanged when there is nothing to adapt,
	// and closes resp.Body when it returns an error.
	Response(resp *http.Response, stream bool) (*http.Response, error)
}

// Call is one Messages call as the client prepared it for the Anthropic API.
type Call struct {
	// Model is the request's model: a model ID, a Bedrock model or inference profile ID or
	// ARN, a Vertex model name, or a Foundry deployment name.
	Model string
	// Stream reports a streaming call.
	Stream bool
	// Body is the JSON request body of POST /v1/messages, "model" and (when streaming)
	// "stream": true included.
	Body []byte
	// Header holds Content-Type, Accept, anthropic-version, and the headers of WithHeader
	// (anthropic-beta among them). The provider adds its credentials.
	Header http.Header
}

// anthropicProvider is POST {base}/v1/messages with x-api-key or a bearer token: the Anthropic
// API itself and every gateway that speaks its shape.
type anthropicProvider struct {
	endpoint, apiKey, bearer string
}

func (p anthropicProvider) Request(ctx context.Context, call Call) (*http.Request, error) {
	req, err := newPost(ctx, p.endpoint, call.Body, call.Header)
	if err != nil {
		return nil, err
	}
	if p.apiKey != "" {
		req.Header.Set("x-api-key", p.apiKey)
	}
	if p.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+p.bearer)
	}
	return req, nil
}

func (anthropicProvider) Response(resp *http.Response, _ bool) (*http.Response, error) {
	return resp, nil
}

// newPost builds a POST of body with a copy of header.
func newPost(ctx context.Context, endpoint string, body []byte, header http.Header) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header = header.Clone()
	return req, nil
}

// TokenFunc returns a current OAuth2 access token (Google, Microsoft Entra ID). It is called
// once per call, so it must cache and refresh on its own, as golang.org/x/oauth2 token
// sources and azidentity credentials do.
type TokenFunc func(ctx context.Context) (string, error)

// bearerToken calls tokens and says which platform failed if it does.
func bearerToken(ctx context.Context, tokens TokenFunc, platform string) (string, error) {
	token, err := tokens(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// A token endpoint or metadata server that failed may answer the next time: retryable.
		return "", &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("%s: get an access token: %v", platform, err)}
	}
	if token == "" {
		return "", &model.Error{Kind: model.ErrServer, Message: platform + ": the token source returned an empty access token"}
	}
	return token, nil
}

// rewriteBody removes the named fields from a Messages body and sets others. The body's
// fields are kept as raw JSON, so nothing but the changed fields is re-encoded.
func rewriteBody(body []byte, drop []string, set map[string]any) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("rewrite request body: %w", err)
	}
	for _, k := range drop {
		delete(fields, k)
	}
	for k, v := range set {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("rewrite request body: %s: %w", k, err)
		}
		fields[k] = raw
	}
	return json.Marshal(fields)
}

// betas takes the anthropic-beta values out of header (repeated or comma-separated), for the
// platforms that want them in the body.
func betas(header http.Header) []string {
	var out []string
	for _, v := range header.Values("anthropic-beta") {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	header.Del("anthropic-beta")
	return out
}

// invalidModel is the error of a call whose model cannot be put in the platform's URL.
func invalidModel(platform, name string) error {
	if name == "" {
		return &model.Error{Kind: model.ErrInvalid, Message: platform + ": the request names no model"}
	}
	return &model.Error{Kind: model.ErrInvalid, Message: fmt.Sprintf("%s: model %q cannot be part of the request URL", platform, name)}
}

// pathSegmentOK refuses model names that would change which URL is requested once escaped:
// the dot segments, which escaping leaves as they are.
func pathSegmentOK(s string) bool {
	return s != "" && s != "." && s != ".."
}

// drainClose reads what is left of a body (a little) so the connection can be reused.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	_ = body.Close()
}
