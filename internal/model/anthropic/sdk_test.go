package anthropic_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

// The official SDK reads the test server as an independent implementation of the wire
// format: if the SDK sends requests the server accepts and decodes its answers into the same
// messages as this client, the server is faithful and the client tests mean something.

// newSDKServer serves reply to bearer-authenticated clients (the SDK sends credentials that way).
func newSDKServer(t *testing.T, reply func(http.ResponseWriter, *http.Request, apiRequest)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(&messagesAPI{path: "/v1/messages", bearer: testToken, reply: reply})
	t.Cleanup(srv.Close)
	return srv
}

func sdkClient(srv *httptest.Server) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAuthToken(testToken), option.WithMaxRetries(0))
}

var sdkParams = sdk.MessageNewParams{
	Model:     "claude-test-1",
	MaxTokens: 256,
	Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Hi"))},
}

// fromSDK keeps what model.Response can hold of an SDK message.
func fromSDK(m *sdk.Message) model.Response {
	resp := model.Response{
		Content:    []model.Block{},
		StopReason: string(m.StopReason),
		Usage: model.Usage{
			InputTokens:              m.Usage.InputTokens,
			OutputTokens:             m.Usage.OutputTokens,
			CacheCreationInputTokens: m.Usage.CacheCreationInputTokens,
			CacheReadInputTokens:     m.Usage.CacheReadInputTokens,
		},
	}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			resp.Content = append(resp.Content, model.Block{Type: b.Type, Text: b.Text})
		case "thinking":
			resp.Content = append(resp.Content, model.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			resp.Content = append(resp.Content, model.Block{Type: b.Type, Data: b.Data})
		case "tool_use":
			resp.Content = append(resp.Content, model.Block{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return resp
}

func TestSDKReadsTheTestServerAlike(t *testing.T) {
	t.Parallel()
	for _, tt := range scripted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newSDKServer(t, replyWith(tt.msg))
			client := sdkClient(srv)

			created, err := client.Messages.New(t.Context(), sdkParams)
			require.NoError(t, err)
			require.Equal(t, tt.want, fromSDK(created))

			stream := client.Messages.NewStreaming(t.Context(), sdkParams)
			defer stream.Close()
			var acc sdk.Message
			for stream.Next() {
				require.NoError(t, acc.Accumulate(stream.Current()))
			}
			require.NoError(t, stream.Err())
			require.Equal(t, tt.want, fromSDK(&acc))

			ours, err := anthropic.New(anthropic.WithBaseURL(srv.URL), anthropic.WithBearerToken(testToken))
			require.NoError(t, err)
			streamed, err := ours.Stream(t.Context(), simpleRequest(), nil)
			require.NoError(t, err)
			require.Equal(t, fromSDK(&acc), streamed)
		})
	}
}

func TestSDKReadsTheTestServerErrors(t *testing.T) {
	t.Parallel()
	srv := newSDKServer(t, func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
		writeError(w, 529, "overloaded_error", "Overloaded")
	})
	client := sdkClient(srv)
	_, err := client.Messages.New(t.Context(), sdkParams)
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 529, apiErr.StatusCode)
	require.EqualValues(t, "overloaded_error", apiErr.Type())
	require.Equal(t, "Overloaded", apiErr.Message)

	srv = newSDKServer(t, func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
		s := newSSE(w)
		s.send("ping", map[string]any{"type": "ping"})
		s.send("error", map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "Internal server error"}})
	})
	client = sdkClient(srv)
	stream := client.Messages.NewStreaming(t.Context(), sdkParams)
	defer stream.Close()
	for stream.Next() {
	}
	require.ErrorContains(t, stream.Err(), "Internal server error")
}
