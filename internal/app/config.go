// Package app reads configuration and wires the parts of each subcommand together. It is the
// only package that knows every other one.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/durable"
)

// Config is the process configuration. Every field has a MANAGED_AGENT_* variable; flags
// override variables.
type Config struct {
	// ModelRetry is how workflows retry transient model failures; zero means
	// durable.DefaultModelRetry. Not an environment variable: tests shorten it.
	ModelRetry durable.ModelRetry
	// DatabaseURL is the PostgreSQL connection string (MANAGED_AGENT_DATABASE_URL).
	DatabaseURL string
	// Addr is the HTTP listen address (MANAGED_AGENT_ADDR).
	Addr string
	// APIKey, if set, is accepted and bound to a workspace at start (MANAGED_AGENT_API_KEY).
	APIKey string
	// LogLevel is debug, info, warn or error (MANAGED_AGENT_LOG_LEVEL).
	LogLevel string
	// LogFormat is json or text (MANAGED_AGENT_LOG_FORMAT).
	LogFormat string
	// DataDir is where dev keeps its private PostgreSQL and generated key (MANAGED_AGENT_DATA_DIR).
	DataDir string

	// TemporalAddress is host:port of Temporal (MANAGED_AGENT_TEMPORAL_ADDRESS); dev starts a
	// dev server when it is empty.
	TemporalAddress string
	// TemporalNamespace (MANAGED_AGENT_TEMPORAL_NAMESPACE), default "default".
	TemporalNamespace string
	// TemporalTLS (MANAGED_AGENT_TEMPORAL_TLS=1) and TemporalAPIKey (MANAGED_AGENT_TEMPORAL_API_KEY).
	TemporalTLS    bool
	TemporalAPIKey string
	// TaskQueue of session workflows (MANAGED_AGENT_TEMPORAL_TASK_QUEUE), default
	// managed-agents-sessions. API and workers of one deployment must agree.
	TaskQueue string

	// Model is fake or anthropic (MANAGED_AGENT_MODEL).
	Model string
	// FakeWordDelay paces the fake model's streamed words so previews are visible
	// (MANAGED_AGENT_FAKE_MODEL_WORD_DELAY, e.g. 20ms; default none).
	FakeWordDelay time.Duration
	// AnthropicBaseURL, AnthropicAPIKey, AnthropicAuthToken configure the anthropic model
	// (MANAGED_AGENT_ANTHROPIC_BASE_URL, _API_KEY, _AUTH_TOKEN).
	AnthropicBaseURL   string
	AnthropicAPIKey    string
	AnthropicAuthToken string

	// Sandbox is the sandbox provider: local (MANAGED_AGENT_SANDBOX).
	Sandbox string
	// SandboxDir is where the local provider puts work directories (MANAGED_AGENT_SANDBOX_DIR).
	SandboxDir string
	// AllowUnsafeLocalSandbox lets a real model drive the local sandbox
	// (MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX=1).
	AllowUnsafeLocalSandbox bool

	// invalid collects values FromEnv could not parse; Validate reports them.
	invalid []string
}

// Validate reports variables whose values could not be parsed, naming each.
func (c Config) Validate() error {
	if len(c.invalid) > 0 {
		return errors.New(strings.Join(c.invalid, "; "))
	}
	return nil
}

// FromEnv reads the variables over the given defaults.
func FromEnv(def Config) Config {
	c := def
	set := func(dst *string, name string) {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			*dst = v
		}
	}
	set(&c.DatabaseURL, "MANAGED_AGENT_DATABASE_URL")
	set(&c.Addr, "MANAGED_AGENT_ADDR")
	set(&c.APIKey, "MANAGED_AGENT_API_KEY")
	set(&c.LogLevel, "MANAGED_AGENT_LOG_LEVEL")
	set(&c.LogFormat, "MANAGED_AGENT_LOG_FORMAT")
	set(&c.DataDir, "MANAGED_AGENT_DATA_DIR")
	set(&c.TemporalAddress, "MANAGED_AGENT_TEMPORAL_ADDRESS")
	set(&c.TemporalNamespace, "MANAGED_AGENT_TEMPORAL_NAMESPACE")
	set(&c.TemporalAPIKey, "MANAGED_AGENT_TEMPORAL_API_KEY")
	set(&c.TaskQueue, "MANAGED_AGENT_TEMPORAL_TASK_QUEUE")
	set(&c.Model, "MANAGED_AGENT_MODEL")
	set(&c.AnthropicBaseURL, "MANAGED_AGENT_ANTHROPIC_BASE_URL")
	set(&c.AnthropicAPIKey, "MANAGED_AGENT_ANTHROPIC_API_KEY")
	set(&c.AnthropicAuthToken, "MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN")
	set(&c.Sandbox, "MANAGED_AGENT_SANDBOX")
	set(&c.SandboxDir, "MANAGED_AGENT_SANDBOX_DIR")
	if v := os.Getenv("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			c.invalid = append(c.invalid, fmt.Sprintf("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY=%q: must be a duration such as 20ms", v))
		}
		c.FakeWordDelay = d
	}
	c.TemporalTLS = c.TemporalTLS || os.Getenv("MANAGED_AGENT_TEMPORAL_TLS") == "1"
	c.AllowUnsafeLocalSandbox = c.AllowUnsafeLocalSandbox || os.Getenv("MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX") == "1"
	return c
}

// Logger builds the process logger; an invalid setting is an error naming the variable.
func (c Config) Logger() (*slog.Logger, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(c.LogLevel, "info"))); err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(orDefault(c.LogFormat, "json")) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("MANAGED_AGENT_LOG_FORMAT=%q: must be json or text", c.LogFormat)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
