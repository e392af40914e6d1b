package anthropic_test

import (
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

// TestSDKBedrockAgreesWithTheStandIn runs the official SDK's own Bedrock adaptation against
// the Bedrock stand-in, as an independent client: its URL, body rewrite and SigV4 signature
// must pass the stand-in's checks, and it must read the stand-in's event-stream frames into
// the same messages as this client. So the stand-in speaks Bedrock as the SDK knows it, and the
// provider tests mean something.
func TestSDKBedrockAgreesWithTheStandIn(t *testing.T) {
	t.Parallel()
	for _, tt := range scripted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &bedrockAPI{reply: bedrockReply(tt.msg)}
			srv := newBedrock(t, api)
			creds := credentials.NewStaticCredentialsProvider(bedrockCreds.AccessKeyID, bedrockCreds.SecretAccessKey, bedrockCreds.SessionToken)
			client := sdk.NewClient(
				bedrock.WithConfig(aws.Config{Region: bedrockRegion, Credentials: creds}),
				option.WithBaseURL(srv.URL),
				option.WithHTTPClient(srv.Client()),
				option.WithMaxRetries(0),
				// The SDK sends its own API version unless the body names one; Bedrock's
				// InvokeModel wants this one (see the provider).
				option.WithJSONSet("anthropic_version", anthropic.BedrockVersion),
			)
			params := sdkParams
			params.Model = bedrockModel

			created, err := client.Messages.New(t.Context(), params)
			require.NoError(t, err)
			require.Equal(t, tt.want, fromSDK(created))

			stream := client.Messages.NewStreaming(t.Context(), params)
			defer stream.Close()
			var acc sdk.Message
			for stream.Next() {
				require.NoError(t, acc.Accumulate(stream.Current()))
			}
			require.NoError(t, stream.Err())
			require.Equal(t, tt.want, fromSDK(&acc))

			ours := newBedrockClient(t, srv, anthropic.BedrockOptions{Credentials: creds})
			streamed, err := ours.Stream(t.Context(), bedrockRequest(), nil)
			require.NoError(t, err)
			require.Equal(t, fromSDK(&acc), streamed)
			require.Len(t, api.requests(), 3)
		})
	}
}
