// Package workflow runs every session durably on Temporal: one workflow per session
// serializes its turns, and each step of a turn (begin, model turn, tool call, finish) is an
// activity that is idempotent against the event log.
//
// The workflow keeps only ids and counters, never conversation content: the event log in
// PostgreSQL is the only history. Workflow code must stay deterministic (no I/O, clocks or
// randomness outside workflow.* APIs). This package must never import httpapi or Kubernetes
// packages.
package durable

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

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
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (MANAGED_AGENT_TEMPORAL_ADDRESS): %w", cfg.Address, err)
	}
	return c, nil
}

func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
