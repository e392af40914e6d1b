package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/managed-agents/managed-agents/internal/dispatcher"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// RunEnvironmentWorker is the environment-worker role: it serves one self-hosted environment
// of the server at MANAGED_AGENT_SERVER_URL with the sandbox provider MANAGED_AGENT_SANDBOX
// names, one sandbox per session (internal/dispatcher). It needs no database and no Temporal:
// only the server's URL and the environment's key, so it can run in another network or
// cluster than the server.
func RunEnvironmentWorker(ctx context.Context, cfg Config, version string) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	d, err := NewEnvironmentWorker(cfg)
	if err != nil {
		return err
	}
	logger.Info("environment worker starting", "version", version, "server", cfg.ServerURL, "environment_id", cfg.EnvironmentID,
		"sandbox", cfg.Sandbox, "concurrency", cfg.EnvironmentWorkerConcurrency)
	if err := d.Run(ctx); err != nil {
		return fmt.Errorf("environment worker: %w", err)
	}
	return nil
}

// NewEnvironmentWorker builds the environment-worker role's dispatcher from cfg.
func NewEnvironmentWorker(cfg Config, opts ...option.RequestOption) (*dispatcher.Dispatcher, error) {
	switch {
	case cfg.ServerURL == "":
		return nil, errors.New("MANAGED_AGENT_SERVER_URL is not set: the base URL of the server whose environment this worker serves")
	case cfg.EnvironmentID == "":
		return nil, errors.New("MANAGED_AGENT_ENVIRONMENT_ID is not set: the self-hosted environment (env_…) to serve")
	case cfg.EnvironmentKey == "":
		return nil, errors.New("MANAGED_AGENT_ENVIRONMENT_KEY is not set: the environment's key (`managed-agents admin keys create --environment`)")
	case cfg.EnvironmentWorkerConcurrency < 0:
		return nil, fmt.Errorf("MANAGED_AGENT_ENVIRONMENT_WORKER_CONCURRENCY=%d: must be positive", cfg.EnvironmentWorkerConcurrency)
	}
	if u, err := url.Parse(cfg.ServerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("MANAGED_AGENT_SERVER_URL=%q: must be an http or https URL", cfg.ServerURL)
	}
	p, err := NewSandboxProvider(cfg)
	if err != nil {
		return nil, err
	}
	ceiling, err := cfg.Network.ceiling()
	if err != nil {
		return nil, err
	}
	logger, err := cfg.Logger()
	if err != nil {
		return nil, err
	}
	// The environment key authorises every call (the SDK's worker sets it per request); the
	// client's own key is never sent.
	client := anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(cfg.ServerURL), option.WithAPIKey("unused")}, opts...)...)
	return dispatcher.New(dispatcher.Config{
		Client: client, EnvironmentID: cfg.EnvironmentID, EnvironmentKey: cfg.EnvironmentKey,
		Provider: p, Egress: ceiling.Resolve(sandbox.Network{Mode: sandbox.NetworkUnrestricted}),
		Concurrency: cfg.EnvironmentWorkerConcurrency, MaxIdle: cfg.EnvironmentWorkerMaxIdle, Logger: logger,
	})
}
