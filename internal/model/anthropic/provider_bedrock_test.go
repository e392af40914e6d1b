package anthropic_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

const (
	bedrockRegion = "eu-west-3"
	bedrockKey    = "ABSKbedrock-api-key-test"
	// An inference profile ARN: its "/" and ":" must survive as one path segment.
	bedrockModel = "arn:aws:bedrock:eu-west-3:123456789012:inference-profile/eu.anthropic.claude-test-v1:0"
)

var bedrockCreds = aws.Credentials{AccessKeyID: "AKIDTESTBEDROCK", SecretAccessKey: "secret-test-key", SessionToken: "session-token-test"}

// bedrockAPI is a local stand-in for the Bedrock runtime's InvokeModel and
// InvokeModelWithResponseStream: it takes an API key as a bearer token, or else verifies the
// SigV4 signature by signing the received request again with the AWS SDK's own signer and the
// test's credentials; it answers errors the runtime's way (x-amzn-ErrorType, {"message"}).
type bedrockAPI struct {
	apiKey string // the bearer it accepts; when empty it wants a signature by bedrockCreds
	betas  []string
	reply  func(w http.ResponseWriter, stream bool)
	platformLog
}

func newBedrock(t *testing.T, api *bedrockAPI) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv
}

func (a *bedrockAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	prefix := "/model/" + url.PathEscape(bedrockModel) + "/"
	action, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok || (action != "invoke" && action != "invoke-with-response-stream") || r.Method != http.MethodPost {
		writeBedrockError(w, http.StatusNotFound, "UnknownOperationException", "no such operation: "+r.Method+" "+r.URL.EscapedPath())
		return
	}
	stream := action == "invoke-with-response-stream"
	if a.apiKey != "" {
		if r.Header.Get("Authorization") != "Bearer "+a.apiKey {
			writeBedrockError(w, http.StatusForbidden, "AccessDeniedException", "Authentication failed: invalid API key")
			return
		}
	} else if err := verifySigV4(r, body, bedrockCreds); err != nil {
		writeBedrockError(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	for _, h := range []string{"anthropic-version", "anthropic-beta", "x-api-key"} {
		if v := r.Header.Get(h); v != "" {
			writeBedrockError(w, http.StatusBadRequest, "ValidationException", "unexpected header "+h+": "+v)
			return
		}
	}
	if r.Header.Get("Content-Type") != "application/json" {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "Content-Type must be application/json")
		return
	}
	// The type of the model's answer inside the chunks: optional, application/json by default.
	if v := r.Header.Get("X-Amzn-Bedrock-Accept"); stream && v != "" && v != "application/json" {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", "X-Amzn-Bedrock-Accept must be application/json, got "+v)
		return
	}
	fields, _, err := platformBody(body, bedrockModel, anthropic.BedrockVersion, false, stream)
	if err == nil {
		want, _ := json.Marshal(a.betas)
		got, ok := fields["anthropic_beta"]
		if (len(a.betas) > 0) != ok || (ok && !bytes.Equal(want, got)) {
			err = fmt.Errorf("anthropic_beta: want %s, got %s", want, got)
		}
	}
	if err != nil {
		writeBedrockError(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	a.add(r, fields)
	a.reply(w, stream)
}

// signedHeaders reads the SignedHeaders of a SigV4 Authorization header.
var signedHeaders = regexp.MustCompile(`SignedHeaders=([^,]+)`)

// verifySigV4 signs again, with the AWS SDK's signer and the test's credentials, a copy of
// the received request holding only what the client signed, and compares the signatures.
func verifySigV4(r *http.Request, body []byte, creds aws.Credentials) error {
	got := r.Header.Get("Authorization")
	m := signedHeaders.FindStringSubmatch(got)
	if !strings.HasPrefix(got, "AWS4-HMAC-SHA256 ") || m == nil {
		return fmt.Errorf("missing SigV4 authorization, got %q", got)
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	again, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	again.Host = r.Host
	for _, h := range strings.Split(m[1], ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), "bedrock", bedrockRegion, when); err != nil {
		return err
	}
	if want := again.Header.Get("Authorization"); want != got {
		return fmt.Errorf("The request signature we calculated does not match the signature you provided")
	}
	return nil
}

func writeBedrockError(w http.ResponseWriter, status int, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", name+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-RequestId", "aws-req-1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg})
}

// eventStream writes AWS event stream frames, flushed one by one like the runtime.
type eventStream struct {
	w   http.ResponseWriter
	enc *eventstream.Encoder
}

func newEventStream(w http.ResponseWriter) eventStream {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("X-Amzn-Bedrock-Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	return eventStream{w: w, enc: eventstream.NewEncoder()}
}

func (s eventStream) frame(headers eventstream.Headers, payload []byte) {
	if err := s.enc.Encode(s.w, eventstream.Message{Headers: headers, Payload: payload}); err != nil {
		panic(err)
	}
	s.w.(http.Flusher).Flush()
}

// chunk sends one Messages stream event as the runtime does: base64 in a chunk's "bytes".
func (s eventStream) chunk(data map[string]any) {
	event, _ := json.Marshal(data)
	payload, _ := json.Marshal(map[string][]byte{"bytes": event}) // []byte marshals as base64
	s.frame(eventstream.Headers{
		{Name: ":message-type", Value: eventstream.StringValue("event")},
		{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
	}, payload)
}

func (s eventStream) exception(name string, payload map[string]any) {
	body, _ := json.Marshal(payload)
	s.frame(eventstream.Headers{
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
		{Name: ":exception-type", Value: eventstream.StringValue(name)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
	}, body)
}

// bedrockReply answers with m: JSON, or its events in chunks.
func bedrockReply(m message) func(http.ResponseWriter, bool) {
	return func(w http.ResponseWriter, stream bool) {
		if !stream {
			messageBody(w, m, bedrockModel)
			return
		}
		s := newEventStream(w)
		for _, ev := range m.events(bedrockModel) {
			s.chunk(ev.data)
		}
	}
}

func newBedrockClient(t *testing.T, srv *httptest.Server, o anthropic.BedrockOptions, opts ...anthropic.Option) *anthropic.Client {
	t.Helper()
	o.Region, o.BaseURL = bedrockRegion, srv.URL
	p, err := anthropic.Bedrock(o)
	require.NoError(t, err)
	c, err := anthropic.New(append([]anthropic.Option{anthropic.WithProvider(p), anthropic.WithHTTPClient(srv.Client())}, opts...)...)
	require.NoError(t, err)
	return c
}

func bedrockRequest() model.Request {
	req := simpleRequest()
	req.Model = bedrockModel
	return req
}

func TestBedrockReplies(t *testing.T) {
	t.Parallel()
	auths := []struct {
		name   string
		apiKey string // the key the stand-in takes; none: a signature
		opts   anthropic.BedrockOptions
	}{
		{name: "SigV4", opts: anthropic.BedrockOptions{Credentials: credentials.NewStaticCredentialsProvider(
			bedrockCreds.AccessKeyID, bedrockCreds.SecretAccessKey, bedrockCreds.SessionToken)}},
		{name: "API key", apiKey: bedrockKey, opts: anthropic.BedrockOptions{APIKey: bedrockKey}},
	}
	for _, auth := range auths {
		for _, tt := range scripted {
			t.Run(auth.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				api := &bedrockAPI{apiKey: auth.apiKey, betas: []string{"beta-one", "beta-two"}, reply: bedrockReply(tt.msg)}
				srv := newBedrock(t, api)
				c := newBedrockClient(t, srv, auth.opts, anthropic.WithHeader("anthropic-beta", "beta-one, beta-two"))

				created, err := c.Create(t.Context(), bedrockRequest())
				require.NoError(t, err)
				require.Equal(t, tt.want, created)

				var deltas []model.Delta
				streamed, err := c.Stream(t.Context(), bedrockRequest(), func(d model.Delta) { deltas = append(deltas, d) })
				require.NoError(t, err)
				require.Equal(t, tt.want, streamed)
				requireDeltasMatch(t, streamed.Content, deltas)

				seen := api.requests()
				require.Len(t, seen, 2)
				require.Equal(t, "/model/"+url.PathEscape(bedrockModel)+"/invoke", seen[0].path)
				require.Equal(t, "/model/"+url.PathEscape(bedrockModel)+"/invoke-with-response-stream", seen[1].path)
				for _, s := range seen {
					require.Empty(t, noFieldsBut(s.body, "anthropic_version", "anthropic_beta", "max_tokens", "messages"))
					requireJSONField(t, s.body, "anthropic_beta", `["beta-one","beta-two"]`)
				}
				if auth.apiKey == "" {
					require.Equal(t, bedrockCreds.SessionToken, seen[0].header.Get("X-Amz-Security-Token"))
				}
			})
		}
	}
}

// tamperingTransport changes the body after the client signed it, as a proxy might.
type tamperingTransport struct{ base http.RoundTripper }

func (tr tamperingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	body = bytes.Replace(body, []byte(`"Hi"`), []byte(`"Ho"`), 1)
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return tr.base.RoundTrip(r)
}

func TestBedrockAuthentication(t *testing.T) {
	t.Parallel()
	static := func(id, secret string) aws.CredentialsProvider {
		return credentials.NewStaticCredentialsProvider(id, secret, bedrockCreds.SessionToken)
	}
	tests := []struct {
		name    string
		apiKey  string
		opts    anthropic.BedrockOptions
		tamper  bool
		wantErr string
	}{
		{name: "signed", opts: anthropic.BedrockOptions{Credentials: static(bedrockCreds.AccessKeyID, bedrockCreds.SecretAccessKey)}},
		{name: "wrong secret key", opts: anthropic.BedrockOptions{Credentials: static(bedrockCreds.AccessKeyID, "not-the-secret")},
			wantErr: "InvalidSignatureException: The request signature we calculated does not match"},
		{name: "wrong access key", opts: anthropic.BedrockOptions{Credentials: static("AKIDOTHER", bedrockCreds.SecretAccessKey)},
			wantErr: "InvalidSignatureException"},
		{name: "body changed after signing", tamper: true,
			opts:    anthropic.BedrockOptions{Credentials: static(bedrockCreds.AccessKeyID, bedrockCreds.SecretAccessKey)},
			wantErr: "InvalidSignatureException"},
		{name: "API key where a signature is wanted", opts: anthropic.BedrockOptions{APIKey: bedrockKey},
			wantErr: "InvalidSignatureException: missing SigV4 authorization"},
		{name: "wrong API key", apiKey: bedrockKey, opts: anthropic.BedrockOptions{APIKey: "ABSKother"},
			wantErr: "AccessDeniedException: Authentication failed"},
		{name: "API key", apiKey: bedrockKey, opts: anthropic.BedrockOptions{APIKey: bedrockKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &bedrockAPI{apiKey: tt.apiKey, reply: bedrockReply(scripted[0].msg)}
			srv := newBedrock(t, api)
			hc := srv.Client()
			if tt.tamper {
				hc = &http.Client{Transport: tamperingTransport{base: srv.Client().Transport}}
			}
			c := newBedrockClient(t, srv, tt.opts, anthropic.WithHTTPClient(hc))
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, err = c.Stream(t.Context(), bedrockRequest(), nil)
				} else {
					_, err = c.Create(t.Context(), bedrockRequest())
				}
				if tt.wantErr == "" {
					require.NoError(t, err)
					continue
				}
				requireModelError(t, err, wantError{kind: model.ErrInvalid, status: http.StatusForbidden, message: tt.wantErr})
				require.Contains(t, err.Error(), "(request aws-req-1)")
			}
			if tt.wantErr != "" {
				require.Empty(t, api.requests())
			}
		})
	}
}

func TestBedrockCredentialFailureIsRetryable(t *testing.T) {
	t.Parallel()
	api := &bedrockAPI{reply: bedrockReply(scripted[0].msg)}
	srv := newBedrock(t, api)
	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, fmt.Errorf("no EC2 IMDS role found")
	})
	c := newBedrockClient(t, srv, anthropic.BedrockOptions{Credentials: failing})
	_, err := c.Create(t.Context(), bedrockRequest())
	requireModelError(t, err, wantError{kind: model.ErrServer, message: "bedrock: AWS credentials: no EC2 IMDS role found"})
	require.Empty(t, api.requests())
}

func TestBedrockStatusErrors(t *testing.T) {
	t.Parallel()
	bedrockError := func(status int, name, msg string, extra ...any) func(http.ResponseWriter, bool) {
		return func(w http.ResponseWriter, _ bool) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", name+":http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.Header().Set("X-Amzn-RequestId", "aws-req-2")
			w.WriteHeader(status)
			body := map[string]any{"message": msg}
			for i := 0; i+1 < len(extra); i += 2 {
				body[extra[i].(string)] = extra[i+1]
			}
			_ = json.NewEncoder(w).Encode(body)
		}
	}
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, bool)
		want  wantError
	}{
		{name: "429 ThrottlingException", reply: bedrockError(429, "ThrottlingException", "Too many requests, please wait before trying again."),
			want: wantError{kind: model.ErrRateLimited, status: 429, message: "ThrottlingException: Too many requests, please wait before trying again. (request aws-req-2)"}},
		{name: "503 ServiceUnavailableException is overloaded", reply: bedrockError(503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
			want: wantError{kind: model.ErrOverloaded, status: 503, message: "ServiceUnavailableException"}},
		{name: "424 ModelErrorException carrying the model's 529", reply: bedrockError(424, "ModelErrorException", "The model returned an error", "originalStatusCode", 529, "originalMessage", "Overloaded"),
			want: wantError{kind: model.ErrOverloaded, status: 424, message: "ModelErrorException: The model returned an error (model: Overloaded)"}},
		{name: "500 InternalServerException", reply: bedrockError(500, "InternalServerException", "Internal server error"),
			want: wantError{kind: model.ErrServer, status: 500, message: "InternalServerException: Internal server error"}},
		{name: "408 ModelTimeoutException", reply: bedrockError(408, "ModelTimeoutException", "Model has timed out"),
			want: wantError{kind: model.ErrServer, status: 408, message: "ModelTimeoutException"}},
		{name: "400 ValidationException", reply: bedrockError(400, "ValidationException", "messages: field required"),
			want: wantError{kind: model.ErrInvalid, status: 400, message: "ValidationException: messages: field required"}},
		{name: "400 ServiceQuotaExceededException is worth a retry", reply: bedrockError(400, "ServiceQuotaExceededException", "quota exceeded"),
			want: wantError{kind: model.ErrRateLimited, status: 400, message: "ServiceQuotaExceededException"}},
		{name: "404 ResourceNotFoundException", reply: bedrockError(404, "ResourceNotFoundException", "Model not found"),
			want: wantError{kind: model.ErrInvalid, status: 404, message: "ResourceNotFoundException"}},
		{name: "an Anthropic-shaped 529 from a gateway in front",
			reply: func(w http.ResponseWriter, _ bool) { writeError(w, 529, "overloaded_error", "Overloaded") },
			want:  wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "502 from a proxy with an HTML body",
			reply: func(w http.ResponseWriter, _ bool) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte("<html>Bad gateway</html>"))
			},
			want: wantError{kind: model.ErrServer, status: 502, message: "<html>Bad gateway</html>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newBedrock(t, &bedrockAPI{apiKey: bedrockKey, reply: tt.reply})
			c := newBedrockClient(t, srv, anthropic.BedrockOptions{APIKey: bedrockKey})
			_, err := c.Create(t.Context(), bedrockRequest())
			requireModelError(t, err, tt.want)
			_, err = c.Stream(t.Context(), bedrockRequest(), nil)
			requireModelError(t, err, tt.want)
		})
	}
}

func TestBedrockStreamFailures(t *testing.T) {
	t.Parallel()
	// started sends the opening of a text answer, so failures happen mid-stream.
	started := func(w http.ResponseWriter) eventStream {
		s := newEventStream(w)
		for _, ev := range scripted[0].msg.events(bedrockModel)[:4] {
			s.chunk(ev.data)
		}
		return s
	}
	exception := func(name string, payload map[string]any) func(http.ResponseWriter, bool) {
		return func(w http.ResponseWriter, _ bool) { started(w).exception(name, payload) }
	}
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, bool)
		want  wantError
	}{
		{name: "throttlingException", reply: exception("throttlingException", map[string]any{"message": "Too many tokens"}),
			want: wantError{kind: model.ErrRateLimited, status: 429, message: "ThrottlingException: Too many tokens"}},
		{name: "modelStreamErrorException with the model's 529", reply: exception("modelStreamErrorException",
			map[string]any{"message": "stream error", "originalStatusCode": 529, "originalMessage": "Overloaded"}),
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "ModelStreamErrorException: stream error (model: Overloaded)"}},
		{name: "modelStreamErrorException", reply: exception("modelStreamErrorException", map[string]any{"message": "Retry your request."}),
			want: wantError{kind: model.ErrServer, status: 424, message: "ModelStreamErrorException: Retry your request."}},
		{name: "internalServerException", reply: exception("internalServerException", map[string]any{"message": "oops"}),
			want: wantError{kind: model.ErrServer, status: 500, message: "InternalServerException: oops"}},
		{name: "serviceUnavailableException", reply: exception("serviceUnavailableException", map[string]any{"message": "busy"}),
			want: wantError{kind: model.ErrOverloaded, status: 503, message: "ServiceUnavailableException: busy"}},
		{name: "validationException", reply: exception("validationException", map[string]any{"message": "prompt is too long"}),
			want: wantError{kind: model.ErrInvalid, status: 400, message: "ValidationException: prompt is too long"}},
		{name: "an exception nobody knows yet", reply: exception("brandNewException", map[string]any{"message": "?"}),
			want: wantError{kind: model.ErrServer, message: "BrandNewException: ?"}},
		{name: "an error message frame",
			reply: func(w http.ResponseWriter, _ bool) {
				started(w).frame(eventstream.Headers{
					{Name: ":message-type", Value: eventstream.StringValue("error")},
					{Name: ":error-code", Value: eventstream.StringValue("InternalFailure")},
					{Name: ":error-message", Value: eventstream.StringValue("something broke")},
				}, nil)
			},
			want: wantError{kind: model.ErrServer, message: "InternalFailure: something broke"}},
		{name: "an Anthropic error event inside a chunk",
			reply: func(w http.ResponseWriter, _ bool) {
				started(w).chunk(map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
			},
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "stream ends before message_stop",
			reply: func(w http.ResponseWriter, _ bool) { started(w) },
			want:  wantError{kind: model.ErrServer, message: "stream ended before message_stop"}},
		{name: "a frame with a bad checksum",
			reply: func(w http.ResponseWriter, _ bool) {
				s := started(w)
				var frame bytes.Buffer
				_ = eventstream.NewEncoder().Encode(&frame, eventstream.Message{Headers: eventstream.Headers{
					{Name: ":message-type", Value: eventstream.StringValue("event")},
					{Name: ":event-type", Value: eventstream.StringValue("chunk")},
				}, Payload: []byte(`{"bytes":"e30="}`)})
				raw := frame.Bytes()
				raw[len(raw)-6] ^= 0xff // inside the payload: the message checksum no longer matches
				_, _ = s.w.Write(raw)
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: event stream frame"}},
		{name: "a chunk that is not JSON",
			reply: func(w http.ResponseWriter, _ bool) {
				started(w).frame(eventstream.Headers{
					{Name: ":message-type", Value: eventstream.StringValue("event")},
					{Name: ":event-type", Value: eventstream.StringValue("chunk")},
				}, []byte(`{"bytes": 12`))
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: chunk event"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newBedrock(t, &bedrockAPI{apiKey: bedrockKey, reply: tt.reply})
			c := newBedrockClient(t, srv, anthropic.BedrockOptions{APIKey: bedrockKey})
			var deltas []model.Delta
			resp, err := c.Stream(t.Context(), bedrockRequest(), func(d model.Delta) { deltas = append(deltas, d) })
			requireModelError(t, err, tt.want)
			require.Equal(t, model.Response{}, resp, "an exception is never a success")
			if !strings.Contains(tt.name, "checksum") {
				require.NotEmpty(t, deltas, "the events before the failure were read")
			}
		})
	}
}

func TestBedrockRejects(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	tests := []struct {
		name string
		opts anthropic.BedrockOptions
		want string
	}{
		{name: "no region", opts: anthropic.BedrockOptions{APIKey: "k"}, want: `region "" is not an AWS region`},
		{name: "odd region", opts: anthropic.BedrockOptions{Region: "us-east-1/../x", APIKey: "k"}, want: "is not an AWS region"},
		{name: "no credentials", opts: anthropic.BedrockOptions{Region: "us-east-1"}, want: "needs an API key or AWS credentials"},
		{name: "relative base URL", opts: anthropic.BedrockOptions{Region: "us-east-1", Credentials: creds, BaseURL: "vpce.example"}, want: "must be an absolute http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := anthropic.Bedrock(tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestBedrockModelThatCannotBeAPathSegment(t *testing.T) {
	t.Parallel()
	api := &bedrockAPI{apiKey: bedrockKey, reply: bedrockReply(scripted[0].msg)}
	srv := newBedrock(t, api)
	c := newBedrockClient(t, srv, anthropic.BedrockOptions{APIKey: bedrockKey})
	for _, name := range []string{"", "..", "."} {
		req := bedrockRequest()
		req.Model = name
		_, err := c.Create(t.Context(), req)
		require.False(t, model.IsRetryable(err))
		require.Equal(t, model.ErrInvalid, modelErrorOf(t, err).Kind)
	}
	require.Empty(t, api.requests())
}

func TestBedrockStreamCutByTheClientTimeout(t *testing.T) {
	t.Parallel()
	srv := newBedrock(t, &bedrockAPI{apiKey: bedrockKey, reply: func(w http.ResponseWriter, _ bool) {
		s := newEventStream(w)
		s.chunk(map[string]any{"type": "ping"})
		time.Sleep(2 * time.Second) // never finishes in time: only the client's timeout ends the call
	}})
	c := newBedrockClient(t, srv, anthropic.BedrockOptions{APIKey: bedrockKey}, anthropic.WithTimeout(100*time.Millisecond))
	_, err := c.Stream(t.Context(), bedrockRequest(), nil)
	requireModelError(t, err, wantError{kind: model.ErrServer, message: "the stream was silent for 100ms"})
}

func TestBedrockStreamConnectionDropped(t *testing.T) {
	t.Parallel()
	srv := newBedrock(t, &bedrockAPI{apiKey: bedrockKey, reply: func(w http.ResponseWriter, _ bool) {
		s := newEventStream(w)
		s.chunk(map[string]any{"type": "ping"})
		var frame bytes.Buffer
		_ = eventstream.NewEncoder().Encode(&frame, eventstream.Message{Payload: []byte(`{"bytes":"e30="}`)})
		_, _ = w.Write(frame.Bytes()[:frame.Len()/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection inside a frame
	}})
	c := newBedrockClient(t, srv, anthropic.BedrockOptions{APIKey: bedrockKey})
	_, err := c.Stream(t.Context(), bedrockRequest(), nil)
	requireModelError(t, err, wantError{kind: model.ErrServer, message: "unexpected EOF"})
}
