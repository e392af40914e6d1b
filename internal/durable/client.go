// Package durable is the Temporal side of the server, and the only package that imports the
// Temporal SDK besides app's wiring:
//
//   - SessionWorkflow, one per session (WorkflowID), serializes the session's turns: it asks
//     the turn engine (internal/turns, through Activities) for the next step of the log-derived
//     plan and runs it as an activity (advance, model turn, tool call, reschedule, exhaust,
//     terminate), sleeping on model backoff and waking on the wake and interrupt signals;
//     TeardownWorkflow destroys a deleted session's sandbox;
//   - Activities are thin: each is idempotent against the event log, which is the only
//     history. The workflow keeps ids and counters, never conversation content, and its code
//     stays deterministic (no I/O, clocks or randomness outside workflow.* APIs);
//   - Runner is the sessions service's sessions.Runner (start or signal a session's workflow,
//     run a teardown), NewWorker registers the workflows and activities on a task queue, Dial
//     connects a client, and StartDevServer runs the Temporal CLI's dev server for dev and
//     tests.
//
// Nothing but internal/app imports it (internal/archtest enforces DESIGN.md §3); it never
// imports httpapi, sessions or Kubernetes packages.
package durable

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// TaskQueue is where session workflows and their activities run.
const TaskQueue = "managed-agents-sessions"

// Config is how a process reaches Temporal.
type Config struct {
	// Address is host:port of the frontend (MANAGED_AGENT_TEMPORAL_ADDRESS).
	Address string
	// Namespace defaults to "default" (MANAGED_AGENT_TEMPORAL_NAMESPACE).
	Namespace string
	// TLS enables TLS with the system roots (MANAGED_AGENT_TEMPORAL_TLS=1).
	TLS bool
	// APIKey authenticates to Temporal Cloud and similar (MANAGED_AGENT_TEMPORAL_API_KEY).
	APIKey string
	// Compression is the gRPC compression: "gzip", "none", or "" for gzip unless Address is
	// a loopback one (MANAGED_AGENT_TEMPORAL_COMPRESSION). On loopback, compressing every
	// request and answer only costs CPU on both ends (a few percent of a turn's).
	Compression string
}

// compress reports whether the connection compresses.
func (c Config) compress() bool {
	switch c.Compression {
	case "gzip":
		return true
	case "none":
		return false
	}
	host, _, err := net.SplitHostPort(c.Address)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// Dial connects to Temporal.
func Dial(ctx context.Context, cfg Config, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{HostPort: cfg.Address, Namespace: cfg.Namespace, Logger: tlog.NewStructuredLogger(logger)}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if cfg.TLS {
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.APIKey)
	}
	if !cfg.compress() {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (MANAGED_AGENT_TEMPORAL_ADDRESS): %w", cfg.Address, err)
	}
	return c, nil
}

func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
