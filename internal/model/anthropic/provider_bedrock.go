package anthropic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/managed-agents/managed-agents/internal/model"
)

// Claude on Amazon Bedrock through InvokeModel and InvokeModelWithResponseStream:
//   - POST {runtime}/model/{modelId}/invoke, or /invoke-with-response-stream for a stream, where
//     runtime is https://bedrock-runtime.{region}.amazonaws.com and modelId a model ID, an
//     inference profile ID (us.anthropic.…) or an ARN, URL-escaped;
//   - the body is the Messages body without "model" and "stream", with
//     "anthropic_version": "bedrock-2023-05-31" and the anthropic-beta values in "anthropic_beta";
//   - a stream answers in the AWS event stream encoding (application/vnd.amazon.eventstream):
//     "chunk" events whose JSON payload's "bytes" is the base64 of one ordinary Messages
//     stream event, and exception events (throttlingException, modelStreamErrorException, …);
//   - requests are signed with AWS Signature Version 4 for the service "bedrock", or carry an
//     Amazon Bedrock API key as a bearer token.
//
// Sources: https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy
// (request shape, anthropic_version), https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
// (ResponseStream members and their HTTP statuses), and
// https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html (API keys as
// "Authorization: Bearer").

// BedrockVersion is the anthropic_version Bedrock requires in the body.
const BedrockVersion = "bedrock-2023-05-31"

// bedrockService is the SigV4 signing name of the Bedrock runtime.
const bedrockService = "bedrock"

var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$`)

// BedrockOptions configure the Bedrock provider.
type BedrockOptions struct {
	// Region is the AWS region of the runtime endpoint and of the signature, e.g. us-east-1.
	Region string
	// BaseURL replaces https://bedrock-runtime.{region}.amazonaws.com (a VPC endpoint or a
	// proxy); "/model/{modelId}/invoke" is appended to it.
	BaseURL string
	// APIKey is an Amazon Bedrock API key, sent as a bearer token instead of a signature.
	APIKey string
	// Credentials sign every request with SigV4 when there is no API key: typically the
	// standard AWS chain of github.com/aws/aws-sdk-go-v2/config, which caches and refreshes.
	Credentials aws.CredentialsProvider
}

type bedrockProvider struct {
	base        string
	region      string
	apiKey      string
	credentials aws.CredentialsProvider
	signer      *v4.Signer
}

// Bedrock returns the provider of Claude on Amazon Bedrock.
func Bedrock(o BedrockOptions) (Provider, error) {
	if !awsRegion.MatchString(o.Region) {
		return nil, fmt.Errorf("bedrock: region %q is not an AWS region such as us-east-1", o.Region)
	}
	if o.APIKey == "" && o.Credentials == nil {
		return nil, errors.New("bedrock: needs an API key or AWS credentials")
	}
	base := o.BaseURL
	if base == "" {
		base = "https://bedrock-runtime." + o.Region + ".amazonaws.com"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bedrock: base URL %q must be an absolute http or https URL", base)
	}
	return &bedrockProvider{
		base:        strings.TrimSuffix(u.String(), "/"),
		region:      o.Region,
		apiKey:      o.APIKey,
		credentials: o.Credentials,
		signer:      v4.NewSigner(),
	}, nil
}

func (p *bedrockProvider) Request(ctx context.Context, call Call) (*http.Request, error) {
	if !pathSegmentOK(call.Model) {
		return nil, invalidModel("bedrock", call.Model)
	}
	header := call.Header.Clone()
	set := map[string]any{"anthropic_version": BedrockVersion}
	if b := betas(header); len(b) > 0 {
		set["anthropic_beta"] = b
	}
	// The version travels in the body; the runtime does not know the header.
	header.Del("anthropic-version")
	body, err := rewriteBody(call.Body, []string{"model", "stream"}, set)
	if err != nil {
		return nil, err
	}
	action := "invoke"
	if call.Stream {
		action = "invoke-with-response-stream"
		// The Accept of InvokeModel is the type of the model's answer; a stream names it in
		// X-Amzn-Bedrock-Accept instead, and its own body is the event stream.
		header.Del("Accept")
		header.Set("X-Amzn-Bedrock-Accept", "application/json")
	}
	endpoint := p.base + "/model/" + url.PathEscape(call.Model) + "/" + action
	req, err := newPost(ctx, endpoint, body, header)
	if err != nil {
		return nil, err
	}
	if p.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.apiKey)
		return req, nil
	}
	creds, err := p.credentials.Retrieve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A metadata service or STS that failed may answer the next time: retryable.
		return nil, &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("bedrock: AWS credentials: %v", err)}
	}
	sum := sha256.Sum256(body)
	if err := p.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), bedrockService, p.region, time.Now()); err != nil {
		return nil, fmt.Errorf("bedrock: sign request: %w", err)
	}
	return req, nil
}

func (p *bedrockProvider) Response(resp *http.Response, stream bool) (*http.Response, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := bedrockStatusError(resp, time.Now())
		drainClose(resp.Body)
		return nil, err
	}
	if !stream {
		return resp, nil
	}
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != "application/vnd.amazon.eventstream" {
		// A proxy in front of Bedrock that already speaks server-sent events.
		return resp, nil
	}
	resp.Body = &eventStreamSSE{body: resp.Body, src: &readRecorder{r: resp.Body}, decoder: eventstream.NewDecoder()}
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return resp, nil
}

// bedrockFault is how the client treats one Bedrock exception.
type bedrockFault struct {
	status int
	kind   model.ErrorKind
}

// bedrockFaults classifies the runtime's exceptions, by their names in the API reference
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html#API_runtime_InvokeModel_Errors).
var bedrockFaults = map[string]bedrockFault{
	"ThrottlingException": {http.StatusTooManyRequests, model.ErrRateLimited},
	// "The model specified in the request is not ready to serve inference requests": the SDKs
	// retry it, as they do throttling.
	"ModelNotReadyException": {http.StatusTooManyRequests, model.ErrRateLimited},
	// A quota on the account's throughput: "You can resubmit your request later".
	"ServiceQuotaExceededException": {http.StatusBadRequest, model.ErrRateLimited},
	// Bedrock's way of saying it has no capacity now: the overloaded of the Anthropic API.
	"ServiceUnavailableException": {http.StatusServiceUnavailable, model.ErrOverloaded},
	"InternalServerException":     {http.StatusInternalServerError, model.ErrServer},
	// "An error occurred while streaming the response. Retry your request."
	"ModelStreamErrorException": {http.StatusFailedDependency, model.ErrServer},
	"ModelErrorException":       {http.StatusFailedDependency, model.ErrServer},
	"ModelTimeoutException":     {http.StatusRequestTimeout, model.ErrServer},
	"ValidationException":       {http.StatusBadRequest, model.ErrInvalid},
	"AccessDeniedException":     {http.StatusForbidden, model.ErrInvalid},
	"ResourceNotFoundException": {http.StatusNotFound, model.ErrInvalid},
	"ConflictException":         {http.StatusBadRequest, model.ErrInvalid},
}

// bedrockErrorBody is the JSON of an exception, in an error response or an exception event.
// The model's own status and message come with ModelStreamErrorException and ModelErrorException.
type bedrockErrorBody struct {
	Message            string `json:"message"`
	MessageUpper       string `json:"Message"`
	Type               string `json:"__type"`
	OriginalStatusCode int    `json:"originalStatusCode"`
	OriginalMessage    string `json:"originalMessage"`
}

// bedrockError classifies one exception. status is the HTTP status of an error response, or
// 0 for an exception inside a 200 stream.
func bedrockError(name string, status int, payload []byte, requestID string) *model.Error {
	var body bedrockErrorBody
	_ = json.Unmarshal(payload, &body) // a proxy's HTML page is no exception; the raw text is used instead
	if name == "" {
		name = body.Type
	}
	// "ThrottlingException:http://internal.amazon.com/coral/…" in x-amzn-ErrorType, a
	// lowerCamel member name in a stream, a namespaced shape ID in __type.
	name, _, _ = strings.Cut(name, ":")
	if i := strings.LastIndex(name, "#"); i >= 0 {
		name = name[i+1:]
	}
	if r, n := utf8.DecodeRuneInString(name); n > 0 {
		name = string(unicode.ToUpper(r)) + name[n:]
	}
	fault, known := bedrockFaults[name]
	switch {
	case body.OriginalStatusCode > 0:
		// The model's own answer, passed through: 529 overloaded, 429, 400, …
		fault = bedrockFault{status: body.OriginalStatusCode, kind: kindOf(body.OriginalStatusCode, "")}
	case !known && status > 0:
		fault.kind = kindOf(status, "")
	case !known:
		// Inside an accepted stream: not the request's fault.
		fault.kind = model.ErrServer
	}
	if status == 0 {
		status = fault.status
	}
	msg := body.Message
	if msg == "" {
		msg = body.MessageUpper
	}
	if body.OriginalMessage != "" {
		msg = strings.TrimSpace(msg + " (model: " + body.OriginalMessage + ")")
	}
	if msg == "" && status > 0 {
		msg = strings.TrimSpace(truncate(string(payload), 500))
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	if name != "" {
		msg = name + ": " + msg
	}
	if requestID != "" {
		msg += " (request " + requestID + ")"
	}
	return &model.Error{Kind: fault.kind, Status: status, Message: msg}
}

// bedrockStatusError reads a non-2xx response of the runtime.
func bedrockStatusError(resp *http.Response, now time.Time) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// An Anthropic-shaped error (a gateway in front of Bedrock) keeps its own reading.
	var anthropicShape errorBody
	if json.Unmarshal(raw, &anthropicShape) == nil && anthropicShape.Error.Type != "" {
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		return statusError(resp, now)
	}
	me := bedrockError(resp.Header.Get("X-Amzn-ErrorType"), resp.StatusCode, raw, resp.Header.Get("X-Amzn-RequestId"))
	me.Status = resp.StatusCode
	me.RetryAfter = retryAfter(resp.Header, now)
	return me
}

// eventStreamSSE turns the AWS event stream of InvokeModelWithResponseStream into the
// server-sent events of the Messages API, so the client's one stream reader reads both. An
// exception event becomes a *model.Error returned by Read once the events before it are read.
type eventStreamSSE struct {
	body    io.ReadCloser
	src     *readRecorder // body, remembering how its reads failed
	decoder *eventstream.Decoder
	buf     bytes.Buffer
	err     error
}

// readRecorder remembers the error of a read, to tell a connection that failed (or a deadline
// that passed) from a frame that does not decode.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		rr.err = err
	}
	return n, err
}

func (s *eventStreamSSE) Read(p []byte) (int, error) {
	for s.buf.Len() == 0 {
		if s.err != nil {
			return 0, s.err
		}
		msg, err := s.decoder.Decode(s.src, nil)
		switch {
		case errors.Is(err, io.EOF):
			s.err = io.EOF // the reader reports a stream that ends before message_stop
		case err != nil && s.src.err != nil:
			s.err = s.src.err // the connection's own failure, as on the SSE path
		case err != nil:
			s.err = protocolError("event stream frame: %v", err)
		default:
			s.err = s.translate(msg)
		}
	}
	return s.buf.Read(p)
}

func (s *eventStreamSSE) Close() error { return s.body.Close() }

// translate appends one frame's event to the buffer, or returns the error it carries.
func (s *eventStreamSSE) translate(msg eventstream.Message) error {
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	switch header(eventstreamapi.MessageTypeHeader) {
	case eventstreamapi.EventMessageType:
		if header(eventstreamapi.EventTypeHeader) != "chunk" {
			return nil // events added to the API later carry nothing the response needs
		}
		var chunk struct {
			Bytes []byte `json:"bytes"` // base64 in JSON, decoded by encoding/json
		}
		if err := json.Unmarshal(msg.Payload, &chunk); err != nil {
			return protocolError("chunk event: %v", err)
		}
		for line := range bytes.Lines(chunk.Bytes) {
			s.buf.WriteString("data: ")
			s.buf.Write(bytes.TrimRight(line, "\r\n"))
			s.buf.WriteByte('\n')
		}
		s.buf.WriteByte('\n')
		return nil
	case eventstreamapi.ExceptionMessageType:
		return bedrockError(header(eventstreamapi.ExceptionTypeHeader), 0, msg.Payload, "")
	case eventstreamapi.ErrorMessageType:
		payload, _ := json.Marshal(map[string]string{"message": header(eventstreamapi.ErrorMessageHeader)})
		return bedrockError(header(eventstreamapi.ErrorCodeHeader), 0, payload, "")
	default:
		return protocolError("event stream frame without a known %s header", eventstreamapi.MessageTypeHeader)
	}
}
