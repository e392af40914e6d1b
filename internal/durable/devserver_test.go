//go:build integration

package durable

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

func TestDevServerStartsAndAnswers(t *testing.T) {
	ctx := context.Background()
	srv, err := StartDevServer(ctx, DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	_, err = srv.Client().CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, srv.FrontendHostPort())
}
