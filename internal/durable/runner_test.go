//go:build integration

package durable_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
)

// handlerless is a session workflow built before the wake update: it takes only signals, as a
// worker still running an older build during a rolling deploy does.
func handlerless(ctx sdkworkflow.Context, _ durable.SessionParams) error {
	sdkworkflow.GetSignalChannel(ctx, durable.SignalInterrupt).Receive(ctx, nil)
	return nil
}

// TestWakeRejectedByTheRunFails: a run that rejects the wake update (it has no handler for it)
// is not woken, so Wake must fail, for the waker to retry and the sweep to signal; an
// interrupt, a signal, still reaches it.
func TestWakeRejectedByTheRunFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, err := durable.StartDevServer(ctx, durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	queue := "handlerless-" + ids.New("")
	w := worker.New(srv.Client(), queue, worker.Options{})
	w.RegisterWorkflowWithOptions(handlerless, sdkworkflow.RegisterOptions{Name: "SessionWorkflow"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	r := &durable.Runner{Client: srv.Client(), TaskQueue: queue, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	session := ids.New("sesn")

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = r.Wake(wctx, session, false)
	require.Error(t, err)
	require.Contains(t, err.Error(), "wake session workflow")
	require.Contains(t, err.Error(), durable.UpdateWake, "the run's rejection names the update")

	require.NoError(t, r.Wake(wctx, session, true))
	require.NoError(t, srv.Client().GetWorkflow(wctx, durable.WorkflowID(session), "").Get(wctx, nil), "the interrupt signal ended the run")
}
